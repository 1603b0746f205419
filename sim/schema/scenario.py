"""Schema of a scenario file: a workload, hardware profiles to sweep, and variants as transform lists."""

from __future__ import annotations

from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.fields import FieldInfo

from sim.schema.serving import ServingSpec
from sim.schema.workload import (
    Bucket,
    Expr,
    Launch,
    Mode,
    Op,
    rebuild_with_containers,
    uses_op_union,
)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FuseArgs(Strict):
    ops: list[str] = Field(default_factory=list, description="the ops to fuse (two or more), or use ops_under")
    ops_under: str | None = Field(
        default=None, description="fuse the elementwise and reduction ops whose names start with 'MODULE.' (captured "
        "workloads name ops by module path: docs/capture.md); `phase` narrows it")
    phase: Literal["forward", "backward", "optimizer", "other"] | None = Field(
        default=None, description="with ops_under: only ops of this phase")
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")
    launch: Launch | None = None
    library: str = "triton"
    drop_saved: list[str] = Field(
        default_factory=list,
        description="tensors the fused kernel no longer writes; later readers must recompute them",
    )
    recompute: list[str] = Field(
        default_factory=list, description="tensors the fused kernel recomputes instead of reading them"
    )
    math: dict[str, Expr] | None = Field(
        default=None,
        description="the fused kernel's own math per element (e.g. its RNG differs from the library's); "
        "default: the members' math, weighted by their element counts",
    )
    extra_reads: list[str] = Field(
        default_factory=list, description="tensors the fused kernel reads to recompute what was dropped"
    )
    recompute_math: dict[str, Expr] = Field(
        default_factory=dict, description="extra math per element the fused kernel does to recompute dropped tensors"
    )
    passes: Expr | None = Field(
        default=None, description="sweeps over each row of the fused reduction (default: the reduction's own; e.g. 1"
        " for a one-pass add+LayerNorm that keeps its row in registers)")

    @model_validator(mode="after")
    def _ops_or_under(self) -> FuseArgs:
        if self.ops_under is None and len(self.ops) < 2:
            raise ValueError("fuse needs 'ops' (two or more op names) or 'ops_under' (a module path)")
        if self.ops_under is not None and self.ops:
            raise ValueError("fuse takes 'ops' or 'ops_under', not both")
        if self.phase is not None and self.ops_under is None:
            raise ValueError("'phase' selects among 'ops_under' ops; it needs 'ops_under'")
        return self


class ModeArgs(Strict):
    mode: Mode
    region: str | None = None
    ops: list[str] | None = None
    ops_under: str | None = Field(
        default=None, description="the ops whose names start with 'MODULE.' (a captured workload's module path)")
    drop_host: bool = Field(
        default=False, description="compiled: the region's host ops (framework ops, autograd nodes, module calls) "
        "are traced away, as TorchDynamo/AOTAutograd do; cuda_graph always drops them")


class SetLaunchArgs(Strict):
    op: str
    launch: Launch
    passes: Expr | None = Field(
        default=None, description="a reduction's sweeps over each row under this kernel (e.g. 1 when a looped"
        " kernel's second sweep hits the cache)")


class InsertArgs(Strict):
    op: Op
    before: str | None = None
    after: str | None = None

    @model_validator(mode="after")
    def _one_anchor(self) -> InsertArgs:
        if (self.before is None) == (self.after is None):
            raise ValueError("give exactly one of 'before' or 'after'")
        return self


uses_op_union(InsertArgs, "op", entries=False, many=False)  # an op kind defined later (sim.ops) is inserted too


class RemoveArgs(Strict):
    ops: list[str] = Field(min_length=1)


class DispatchArgs(Strict):
    when: str = Field(description="predicate over the bucket's parameters: the fast path when true")
    then: list[TransformSpec] = Field(min_length=1)
    else_: list[TransformSpec] = Field(default_factory=list, alias="else")
    path: str = "fast"
    fallback_path: str = "fallback"


class SpecializeArgs(Strict):
    """A kernel variant for the buckets where `when` holds; other buckets keep the default path."""

    op: str
    when: str = "True"
    launch: Launch | None = None
    pad: dict[str, Expr] = Field(
        default_factory=dict,
        description="GEMM dims to pad, e.g. {k: 'round_up(k, 64)'}: the kernel runs the padded shape and a copy pads the operand",
    )
    efficiency: float | None = Field(default=None, gt=0, description="throughput scale vs the default kernel (an estimate you give)")
    library: str | None = None
    path: str = "specialized"


class SwapArgs(Strict):
    """Run ops on another library implementation (its efficiency comes from the profile's `libraries`)."""

    ops: list[str] | None = None
    kind: str | None = None
    library: str

    @model_validator(mode="after")
    def _target(self) -> SwapArgs:
        if (self.ops is None) == (self.kind is None):
            raise ValueError("give exactly one of 'ops' or 'kind'")
        return self


class TransformSpec(Strict):
    """Exactly one key: the transform's name, mapping to its arguments."""

    fuse: FuseArgs | None = None
    mode: ModeArgs | None = None
    set_launch: SetLaunchArgs | None = None
    insert: InsertArgs | None = None
    remove: RemoveArgs | None = None
    dispatch: DispatchArgs | None = None
    specialize: SpecializeArgs | None = None
    swap: SwapArgs | None = None

    @model_validator(mode="before")
    @classmethod
    def _exactly_one(cls, data: object) -> object:
        if not isinstance(data, dict) or len(data) != 1:
            raise ValueError(
                "a transform is a mapping with exactly one key, one of: " + ", ".join(transform_keys())
            )
        key = next(iter(data))
        if key not in transform_keys():
            raise ValueError(f"unknown transform {str(key)[:60]!r} (expected one of: {', '.join(transform_keys())})")
        if data[key] is None:
            raise ValueError(f"transform '{key}' has no arguments (null); it needs a mapping of its arguments")
        return data

    def kind_and_args(self) -> tuple[str, BaseModel]:
        for key in transform_keys():
            val = getattr(self, key)
            if val is not None:
                return key, val
        raise AssertionError("validated to have one key")


DispatchArgs.model_rebuild()


def transform_keys() -> tuple[str, ...]:
    """One field of TransformSpec per transform, in this order (transforms defined in their own file,
    sim.transforms.define, come after the built-in ones)."""
    return tuple(TransformSpec.model_fields)


def add_transform(key: str, args: type[BaseModel]) -> None:
    """Accept `{key: args}` as a transform (sim.transforms.define calls this): a field of TransformSpec,
    and every scenario model that contains one is rebuilt."""
    if key in TransformSpec.model_fields:
        raise ValueError(f"transform {key!r} is already defined")
    TransformSpec.__pydantic_fields__[key] = FieldInfo.from_annotated_attribute(cast(Any, args | None), None)
    rebuild_with_containers({TransformSpec})


class ChooseArgs(Strict):
    """Let kernelsim pick the path per bucket: the fastest under the model, if it beats the
    baseline by at least `min_gain` (else the bucket stays on the baseline: a fallback).

    Candidates are the `paths` given here and the scenario's other variants named in `from`
    (`all`: every variant that is not itself a `choose`), each under its variant's name.
    """

    paths: dict[str, list[TransformSpec]] = Field(default_factory=dict)
    from_: Literal["all"] | list[str] = Field(
        default_factory=list, alias="from",
        description="other variants of the scenario to choose among (by name), or `all` of them")
    min_gain: float = Field(default=0.0, ge=0, le=1)

    @model_validator(mode="after")
    def _some_candidate(self) -> ChooseArgs:
        if not self.paths and not self.from_:
            raise ValueError("give the candidates: 'paths', 'from' (variant names or 'all'), or both")
        return self


class Variant(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.+-]+$")
    description: str = ""
    transforms: list[TransformSpec] = Field(default_factory=list)
    choose: ChooseArgs | None = None

    @model_validator(mode="after")
    def _one_form(self) -> Variant:
        if self.choose is not None and self.transforms:
            raise ValueError("give either 'transforms' or 'choose', not both")
        return self


class SweepSpec(Strict):
    """Axes of `kernelsim sweep`: the grid is hardware × each parameter axis, in the order written.

    Every point simulates baseline plus the selected variants on every bucket of one profile.
    """

    hardware: list[str] | None = Field(
        default=None, min_length=1, description="profile names or YAML paths (default: the scenario's `hardware`)"
    )
    params: dict[str, list[float | int]] = Field(
        default_factory=dict,
        description="parameter axes: a workload parameter or a scenario knob → values; a value replaces the"
        " parameter everywhere (its default and every bucket's value)",
    )
    variants: list[str] | None = Field(
        default=None, min_length=1, description="the variants each point simulates (default all; baseline always)"
    )

    @model_validator(mode="after")
    def _non_empty_axes(self) -> SweepSpec:
        for name, values in self.params.items():
            if not values:
                raise ValueError(f"sweep axis {name!r} has no values")
            if len(set(values)) != len(values):
                raise ValueError(f"sweep axis {name!r} repeats a value")
        return self


class AdviceSettings(Strict):
    """Thresholds of `kernelsim advise` (docs/advise.md); fractions of the step time unless said otherwise."""

    min_hotspot_share: float = Field(
        default=0.05, ge=0, le=1,
        description="below this exposed share of the step, the kernels a variant replaces are too small a hotspot",
    )
    near_ceiling_headroom: float = Field(
        default=1.15, ge=1,
        description="a library kernel within this factor of its attainable roofline is near its ceiling",
    )
    dispatch_margin: float = Field(
        default=0.005, ge=0, le=1, description="a bucket takes the new path only when it gains at least this much",
    )
    max_bucket_regression: float = Field(
        default=0.005, ge=0, le=1, description="a bucket slower than the baseline by more than this is a regression",
    )
    min_coverage: float = Field(
        default=0.8, ge=0, le=1, description="adopt a path everywhere only if it covers at least this weighted share",
    )
    maintenance_cost_gain: float = Field(
        default=0.0, ge=0, le=1,
        description="the step gain a custom kernel must bring to pay for its maintenance (raises min_gain)",
    )


class ScenarioFile(Strict):
    schema_: Literal["kernelsim.scenario/v1"] = Field(alias="schema")
    name: str
    description: str = ""
    workload: str
    hardware: list[str] = Field(min_length=1)
    distribution: list[Bucket] | None = None
    min_gain: float = Field(default=0.01, ge=0, le=1)
    clock: Literal["burst", "sustained"] = Field(
        default="burst",
        description="burst: the clocks of short runs (what calibration measures); sustained: the steady state of a "
        "long run under the power cap (the profile's power.sustained_clock_mhz)",
    )
    variants: list[Variant] = Field(default_factory=list)
    parameters: dict[str, float | int] = Field(
        default_factory=dict,
        description="scenario knobs for transform expressions (e.g. a BLOCK size), and overrides of the"
        " workload's parameter defaults; buckets still set their own values",
    )
    sweep: SweepSpec | None = Field(default=None, description="axes for `kernelsim sweep` (docs/sweeps.md)")
    serving: ServingSpec | None = Field(
        default=None, description="`kernelsim serve`: arrivals, batching, CUDA-graph capture, rates (docs/serving.md)"
    )
    alternative_distributions: dict[str, list[Bucket]] = Field(
        default_factory=dict,
        description="`kernelsim advise`: other plausible bucket mixes (name → buckets); a decision that only"
        " pays off under some of them is reported as unstable (docs/advise.md). Adds to the workload's"
        " `distribution.alternatives`",
    )
    advice: AdviceSettings | None = Field(default=None, description="thresholds of `kernelsim advise` (docs/advise.md)")

    @model_validator(mode="after")
    def _unique_variants(self) -> ScenarioFile:
        names = ["baseline"]
        for v in self.variants:
            if v.name in names:
                raise ValueError(f"variant name {v.name!r} is used twice (or is 'baseline', which is implicit)")
            names.append(v.name)
        return self
