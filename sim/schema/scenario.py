"""Schema of a scenario file: a workload, hardware profiles to sweep, and variants as transform lists."""

from __future__ import annotations

from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.fields import FieldInfo

from sim.schema.serving import ServingSpec
from sim.schema.workload import Bucket, add_schema_model, rebuild_with_containers


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TransformSpec(Strict):
    """Exactly one key: the transform's name, mapping to its arguments."""

    # One field per transform, `key: ArgsModel | None`, added by `add_transform` (sim.transforms.define).

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



def transform_keys() -> tuple[str, ...]:
    """One field of TransformSpec per transform, in the order they were defined (sim.transforms.define:
    the import lines of sim/transforms/__init__.py)."""
    return tuple(TransformSpec.model_fields)


def add_transform(key: str, args: type[BaseModel]) -> None:
    """Accept `{key: args}` as a transform (sim.transforms.define calls this): a field of TransformSpec,
    and every scenario model that contains one is rebuilt."""
    if key in TransformSpec.model_fields:
        raise ValueError(f"transform {key!r} is already defined")
    TransformSpec.__pydantic_fields__[key] = FieldInfo.from_annotated_attribute(cast(Any, args | None), None)
    add_schema_model(args)
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
