"""The decision for one variant on one hardware profile, from the model's numbers only.

Inputs are figures (`VariantFigures`): per-bucket step times of the baseline and of the
variant, what the variant changed (fusion, specialization, library swap, execution mode:
read from the transformed graph, never from names), the replaced kernels' share of the
step and their distance to their ceiling. The rules, in order (docs/advise.md):

1. Hotspot too small: the replaced kernels' exposed share of the step and the variant's
   best gain are both below `min_hotspot_share` → don't write.
2. Library near its ceiling: the variant does the same minimum work as the kernels it
   replaces (specialize, swap, or a fusion that removes little HBM traffic) and those run
   within `near_ceiling_headroom` of their attainable roofline → keep the library (a
   predicted gain beyond that ceiling rests on an efficiency estimate, not on the model).
3. Adopt everywhere: weighted gain >= threshold, no bucket regresses, coverage >=
   `min_coverage` → fuse / specialize / use the library / adopt (by what it changes).
4. Dispatch by bucket: the gain of taking the variant only in the buckets where it wins
   by `dispatch_margin` reaches the threshold → dispatch by bucket (a specialization:
   specialize for those buckets).
5. Otherwise don't write: the predicted gain is below the threshold.
6. Unstable distribution: a positive decision that falls below the threshold under one of
   the alternative distributions is withdrawn (unless dispatching by bucket holds under
   all of them).

The threshold is max(scenario `min_gain`, `maintenance_cost_gain`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.schema.scenario import AdviceSettings

DECISIONS = ("fuse", "specialize", "dispatch_by_bucket", "use_library", "adopt", "keep_library", "dont_write")
POSITIVE = frozenset({"fuse", "specialize", "dispatch_by_bucket", "use_library", "adopt"})
_ADOPT_BY_KIND = {"fusion": "fuse", "specialize": "specialize", "swap": "use_library", "execution": "adopt",
                  "other": "adopt"}


@dataclass(frozen=True)
class VariantFigures:
    name: str
    kinds: tuple[str, ...]  # what the variant changes: fusion, specialize, swap, execution, insert (in that priority)
    weights: tuple[float, ...]
    base_s: tuple[float, ...]  # baseline step time per bucket
    var_s: tuple[float, ...]  # variant step time per bucket
    on_new_path: tuple[bool, ...]  # the variant's own path is not a fallback in this bucket
    micro_gain: float | None
    replaced_share: float  # replaced kernels' time alone / baseline step (weighted)
    replaced_exposed_share: float  # their exposed time on the critical path / baseline step
    replaced_time_s: float  # weighted
    replaced_roofline_s: float
    replaced_attainable_s: float
    new_roofline_s: float
    # name → per-bucket weights (zero where a bucket is absent) and step times of extra buckets
    distributions: dict[str, tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    decision: str
    reasons: tuple[tuple[str, str], ...]  # (code, plain-language sentence with the figures)
    chosen: tuple[bool, ...]  # per bucket: take the variant's path
    figures: dict[str, float | None]


def _gain(weights: tuple[float, ...], base: tuple[float, ...], new: tuple[float, ...]) -> float:
    b = sum(w * t for w, t in zip(weights, base, strict=True))
    n = sum(w * t for w, t in zip(weights, new, strict=True))
    return 1.0 - n / b if b > 0 else 0.0


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:+.1f} %"


def _share(x: float) -> str:
    return f"{x * 100:.1f} %"


def primary_kind(kinds: tuple[str, ...]) -> str:
    for k in ("fusion", "specialize", "swap", "execution"):
        if k in kinds:
            return k
    return "other" if kinds else "none"


def decide(f: VariantFigures, min_gain: float, s: AdviceSettings) -> Decision:
    """Apply the rules (module docstring) to one variant's figures."""
    threshold = max(min_gain, s.maintenance_cost_gain)
    n = len(f.weights)
    total_w = sum(f.weights)
    gains = tuple(1.0 - v / b if b > 0 else 0.0 for v, b in zip(f.var_s, f.base_s, strict=True))
    full = _gain(f.weights, f.base_s, f.var_s)
    winners = tuple(g >= s.dispatch_margin for g in gains)
    disp_s = tuple(v if w else b for v, b, w in zip(f.var_s, f.base_s, winners, strict=True))
    dispatched = _gain(f.weights, f.base_s, disp_s)
    regress = [i for i, g in enumerate(gains) if g < -s.max_bucket_regression]
    coverage = sum(w for w, on in zip(f.weights, f.on_new_path, strict=True) if on) / total_w if total_w else 0.0
    kind = primary_kind(f.kinds)
    is_kernel = kind in ("fusion", "specialize", "swap")
    same_work = kind in ("specialize", "swap") or (
        kind == "fusion" and f.replaced_roofline_s > 0 and f.new_roofline_s >= 0.9 * f.replaced_roofline_s)
    att_headroom = f.replaced_time_s / f.replaced_attainable_s if f.replaced_attainable_s > 0 else None
    # The best step gain a kernel doing the same work could bring: its exposed share, scaled by
    # what is left between the replaced kernels and their attainable time.
    ceiling = (f.replaced_exposed_share * max(0.0, 1.0 - f.replaced_attainable_s / f.replaced_time_s)
               if f.replaced_time_s > 0 else 0.0)
    best = max(full, dispatched)
    figures: dict[str, float | None] = {
        "threshold": threshold, "step_gain": full, "dispatched_gain": dispatched, "micro_gain": f.micro_gain,
        "coverage": coverage, "worst_bucket_gain": min(gains) if gains else 0.0,
        "winning_weight": sum(w for w, win in zip(f.weights, winners, strict=True) if win) / total_w if total_w else 0.0,
        "hotspot_share": f.replaced_share, "hotspot_exposed_share": f.replaced_exposed_share,
        "attainable_headroom": att_headroom, "same_work_gain_ceiling": ceiling if same_work else None,
    }
    reasons: list[tuple[str, str]] = []
    none = tuple(False for _ in range(n))
    everywhere = tuple(f.on_new_path)

    if kind == "none":
        reasons.append(("no_change", "the variant runs the baseline's kernels in every bucket: nothing to build"))
        return Decision("dont_write", tuple(reasons), none, figures)
    if is_kernel and f.replaced_exposed_share < s.min_hotspot_share and best < s.min_hotspot_share:
        reasons.append(("hotspot_too_small",
                        f"the kernels it replaces are {_share(f.replaced_share)} of the step, {_share(f.replaced_exposed_share)} "
                        f"exposed on the critical path (below the {_share(s.min_hotspot_share)} hotspot minimum); its best "
                        f"step gain is {_pct(best)} although the kernel-only gain is {_pct(f.micro_gain)}"))
        return Decision("dont_write", tuple(reasons), none, figures)
    if is_kernel and same_work and att_headroom is not None and att_headroom <= s.near_ceiling_headroom:
        reasons.append(("library_near_ceiling",
                        f"the library kernels it replaces already run within {att_headroom:.2f}x of their attainable "
                        f"roofline (limit {s.near_ceiling_headroom:.2f}x); a kernel doing the same work could gain at most "
                        f"{_pct(ceiling)} of the step"
                        + (f"; the variant's predicted {_pct(full)} rests on an efficiency beyond that ceiling"
                           if full > ceiling + 1e-9 else f" (the variant: {_pct(full)})")))
        return Decision("keep_library", tuple(reasons), none, figures)

    decision, chosen = "dont_write", none
    if full >= threshold and not regress and coverage >= s.min_coverage:
        decision, chosen = _ADOPT_BY_KIND.get(kind, "adopt"), everywhere
        reasons.append(("gain", f"step gain {_pct(full)} (threshold {_pct(threshold)}), no bucket slower by more than "
                                f"{_share(s.max_bucket_regression)}, coverage {_share(coverage)}"))
    elif dispatched >= threshold and any(winners):
        decision = "specialize" if kind == "specialize" else "dispatch_by_bucket"
        chosen = winners
        lost = [i for i, w in enumerate(winners) if not w]
        why = (f"{len(regress)} bucket(s) slower by more than {_share(s.max_bucket_regression)} (worst {_pct(min(gains))})"
               if regress else f"coverage {_share(coverage)} is below {_share(s.min_coverage)}"
               if coverage < s.min_coverage else f"the step gain everywhere is {_pct(full)}")
        reasons.append(("per_bucket", f"taking it only where it wins by {_share(s.dispatch_margin)} gains {_pct(dispatched)} "
                                      f"(everywhere: {_pct(full)}; {why}); {len(lost)} of {n} bucket(s) keep the baseline"))
    else:
        if same_work and att_headroom is not None and ceiling < threshold:
            reasons.append(("library_near_ceiling",
                            f"the replaced kernels run within {att_headroom:.2f}x of their attainable roofline: at most "
                            f"{_pct(ceiling)} of the step to gain"))
            return Decision("keep_library", tuple(reasons), none, figures)
        reasons.append(("below_min_gain",
                        f"predicted step gain {_pct(full)} everywhere, {_pct(dispatched)} taking it only where it wins "
                        f"(threshold {_pct(threshold)}); kernel-only gain {_pct(f.micro_gain)}, worst bucket {_pct(min(gains))}"))
        return Decision("dont_write", tuple(reasons), none, figures)

    # Rule 6: the decision must hold under every alternative distribution.
    unstable = []
    for dname, (weights, base, var) in f.distributions.items():
        pick = tuple(c for c in chosen) + tuple(False for _ in range(len(weights) - n))
        new = tuple(v if p else b for v, b, p in zip(var, base, pick, strict=True))
        g = _gain(weights, base, new)
        figures[f"gain_under:{dname}"] = g
        if g < threshold:
            unstable.append((dname, g))
    if unstable and decision != "dispatch_by_bucket" and decision != "specialize":
        # Would dispatching by bucket hold everywhere?
        ok = True
        for _dname, (weights, base, var) in f.distributions.items():
            pick = winners + tuple(False for _ in range(len(weights) - n))
            new = tuple(v if p else b for v, b, p in zip(var, base, pick, strict=True))
            ok = ok and _gain(weights, base, new) >= threshold
        if ok and dispatched >= threshold:
            reasons.insert(0, ("distribution_unstable",
                            "adopting it everywhere falls below the threshold under "
                            + ", ".join(f"'{d}' ({_pct(g)})" for d, g in unstable)
                            + "; dispatching by bucket holds under every distribution"))
            return Decision("specialize" if kind == "specialize" else "dispatch_by_bucket", tuple(reasons), winners, figures)
    if unstable:
        reasons.insert(0, ("distribution_unstable",
                        "the gain does not hold under the alternative distribution(s) "
                        + ", ".join(f"'{d}' ({_pct(g)})" for d, g in unstable) + f" (threshold {_pct(threshold)})"))
        return Decision("dont_write", tuple(reasons), none, figures)
    return Decision(decision, tuple(reasons), chosen, figures)
