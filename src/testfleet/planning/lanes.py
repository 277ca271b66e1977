"""Lanes: the unit a stage is planned in. A stage without ``variants`` is one lane keyed
by its name; a stage with variants is one lane per variant, keyed ``<stage>.<variant>``,
each with the stage's table as the variant overrides it (see ``StageConfig.with_variant``).

Selection decides a registration's fate per stage (labels, cadences, gates are the
stage's); the planner then gives each lane its own jobs, fates and counts, and the runner,
the duration history and the generated workflows key by the lane.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from testfleet.config import Config, StageConfig


@dataclass(frozen=True)
class Lane:
    stage: str
    variant: str  # "" for a stage without variants
    config: StageConfig

    @property
    def key(self) -> str:
        return lane_key(self.stage, self.variant)

    @property
    def backend(self) -> str:
        return self.config.backend


def lane_key(stage: str, variant: str) -> str:
    """``<stage>.<variant>``, or the stage's name when there is no variant."""
    return f"{stage}.{variant}" if variant else stage


def stage_lanes(config: Config, name: str) -> list[Lane]:
    """The lanes of one stage, variants in name order."""
    stage = config.stages[name]
    if not stage.variants:
        return [Lane(name, "", stage)]
    return [Lane(name, v, stage.with_variant(v)) for v in sorted(stage.variants)]


def all_lanes(config: Config) -> dict[str, Lane]:
    """Every lane of the configuration by its key."""
    return {lane.key: lane for name in sorted(config.stages) for lane in stage_lanes(config, name)}


def find_lane(config: Config, key: str) -> Lane | None:
    """The lane ``key`` names (a variant-less stage's name or ``<stage>.<variant>``)."""
    if key in config.stages and not config.stages[key].variants:
        return Lane(key, "", config.stages[key])
    stage, dot, variant = key.rpartition(".")
    if dot and stage in config.stages and variant in config.stages[stage].variants:
        return Lane(stage, variant, config.stages[stage].with_variant(variant))
    return None


def stage_backends(config: Config, name: str) -> set[str]:
    """The backends whose registrations a stage accepts (``StageConfig.accepted_backends``)."""
    return config.stages[name].accepted_backends()


def uses_stage_estimate(own: str | None, stage: str | None) -> bool:
    """The one rule for a variant's duration estimate, given the sources (``history`` or
    ``est_time``; None: none) of its own estimate and of its stage's for the same file: its
    own history first, else the stage's history (the same file on other hardware is a
    better guess than a literal), else its own. The planner and ``durations show`` both
    apply it. (When neither is history both are the registration's literal.)"""
    if stage is None:
        return False
    return own is None or (own != "history" and stage == "history")


def job_matrices(entries: Mapping[str, Sequence[Mapping[str, Any]]],
                 groups: Mapping[str, Sequence[str]] | None = None) -> dict[str, dict[str, Any]]:
    """Per lane, its matrix entries (in ``entries``' order) as a generated workflow's jobs
    read them, ``{"<key>": {"has_jobs": bool, "matrix": {"include": [...]}}}``: by the
    lane's key, or, for the lanes of a job that runs several (``groups``: key -> lanes),
    together under the job's key. The plan's ``stages`` output and the rescue wave's
    ``rescue`` output are both this."""
    key_of = {lane: key for key, lanes in (groups or {}).items() for lane in lanes}
    out: dict[str, dict[str, Any]] = {}
    for lane, items in entries.items():
        slot = out.setdefault(key_of.get(lane, lane), {"has_jobs": False, "matrix": {"include": []}})
        slot["has_jobs"] = slot["has_jobs"] or bool(items)
        slot["matrix"]["include"] += list(items)
    return out
