"""When a stage or one of its variants runs, beyond cadences and PR labels.

Real CI files say more than "this stage runs nightly": a workflow has no ``push:``
trigger at all, a nightly suite also runs on pushes that touch ``version.py``, a second
image of a suite runs on a cron only, a stage waits for another on pull requests but
not on schedules, a nightly job keeps only ``nightly=True`` registrations whatever
starts it, a cron runs files that register no suite at all. These keys say so:

- ``events`` (stage and variant): the CI events the lane runs on;
- ``run_on_changes`` (stage and variant): extra triggers, an event plus changed paths;
- ``cadences`` (variant): a variant's own cadences (a stage has had them already);
- ``registrations`` (stage): ``"nightly"`` or ``"per-commit"``, the side of the nightly
  split this stage runs on every trigger (a ``run_suite.py --nightly`` job);
- ``needs_on`` (stage): per event, the stages this one waits for instead of ``needs``;
- ``files`` (stage): path-only registrations (``suite = ""``) the stage runs, by path.

The models are mixins of ``StageConfig`` / ``VariantConfig`` (:mod:`testfleet.config.stages`
imports this module, never the other way round); the predicates are pure functions the
policy and the planner call. Binding path-only registrations to stages is planning
(:mod:`testfleet.planning.stage_files`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from testfleet.documents.vocabulary import Event, Reason
from testfleet.graphs import find_cycle

#: The CI events a plan can be made for (``testfleet.planning.policy.EVENTS``).
EVENTS: tuple[Event, ...] = get_args(Event)
#: The sides of the nightly split a stage can pin (see ``registrations``).
SIDES = ("nightly", "per-commit")


class _Keys(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True,
                              allow_inf_nan=False)


def _path_patterns(patterns: list[str], what: str) -> list[str]:
    """Changed-path and file patterns are gitignore-style, as ``exclude`` is; one that
    gitignore cannot read, or that is not a relative path, is refused when loading."""
    from testfleet.globs import pattern_problem

    for pattern in patterns:
        if not pattern.strip() or pattern.startswith("/") or ".." in pattern.split("/") \
                or any(ord(c) < 32 or c == "\x7f" for c in pattern) or "${{" in pattern:
            raise ValueError(f"{what} {pattern[:60]!r} must be a relative path or glob inside "
                             "the project (no '..', no leading '/', no control characters)")
        problem = pattern_problem(pattern)
        if problem is not None:
            raise ValueError(f"{what} {problem}")
    return patterns


class ChangeTrigger(_Keys):
    """``{ event = "push", paths = ["python/sglang/version.py"] }``: the lane also runs on
    this event when a changed path matches one of ``paths``, whatever its ``events`` and
    ``cadences`` say (PR label and draft gates still apply)."""

    event: Event
    paths: list[str] = Field(min_length=1)

    @field_validator("paths")
    @classmethod
    def _paths(cls, v: list[str]) -> list[str]:
        return _path_patterns(v, "changed path")


class LaneTriggers(_Keys):
    """Keys a stage and each of its variants may set."""

    # [] is allowed: the lane runs on no event by itself, only through run_on_changes
    events: list[Event] | None = None
    run_on_changes: list[ChangeTrigger] = Field(default_factory=list)

    @field_validator("events")
    @classmethod
    def _unique_events(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and len(set(v)) != len(v):
            raise ValueError("events lists an event more than once")
        return v


class StageTriggers(LaneTriggers):
    """Keys of a stage only."""

    registrations: Literal["nightly", "per-commit"] | None = None
    needs_on: dict[Event, list[str]] = Field(default_factory=dict)
    files: list[str] = Field(default_factory=list)

    @field_validator("files")
    @classmethod
    def _files(cls, v: list[str]) -> list[str]:
        return _path_patterns(v, "file")


class VariantTriggers(LaneTriggers):
    """Keys of a variant only: its own cadences (the stage's otherwise)."""

    cadences: list[str] | None = Field(default=None, min_length=1)


class MarkerRoles(_Keys):
    """What a project's own marker keyword means to testfleet (``[markers.<marker>]``).

    ``disabled_on_runners`` names a declared ``list[str]`` keyword whose fnmatch patterns
    over runner labels narrow the call's ``disabled`` to the lanes whose ``runs_on`` has a
    matching label: ``register_amd_ci(..., disabled="OOM on MI35x, #2301",
    disabled_on_runners=["*mi35*"])`` keeps running on the other runner classes.
    """

    disabled_on_runners: str | None = None
    #: a declared ``str`` keyword with the per-runner disable's own reason
    #: (``disabled_on_runners_reason="MI35x OOM, #2301"``). Naming it, or a default, makes
    #: the runner patterns a disable of their own: no ``disabled`` needed, and ``disabled``
    #: stays the switch of the whole registration
    disabled_on_runners_reason: str | None = None
    #: the reason when a call gives none; ``{pattern}`` is the pattern that matched
    disabled_on_runners_default: str | None = None

    @model_validator(mode="after")
    def _declared(self) -> MarkerRoles:
        name = self.disabled_on_runners
        keywords: Mapping[str, str] = getattr(self, "keywords", {})
        if name is not None and keywords.get(name) != "list[str]":
            raise ValueError(f"disabled_on_runners names {name!r}, which must be a keyword "
                             f"declared as \"list[str]\" in keywords (got "
                             f"{keywords.get(name, 'not declared')!r})")
        reason = self.disabled_on_runners_reason
        if (reason is not None or self.disabled_on_runners_default is not None) and name is None:
            raise ValueError("disabled_on_runners_reason / disabled_on_runners_default need "
                             "disabled_on_runners (the keyword with the runner patterns)")
        if reason is not None and keywords.get(reason) != "str":
            raise ValueError(f"disabled_on_runners_reason names {reason!r}, which must be a "
                             f"keyword declared as \"str\" in keywords (got "
                             f"{keywords.get(reason, 'not declared')!r})")
        if self.disabled_on_runners_default is not None and not self.disabled_on_runners_default.strip():
            raise ValueError("disabled_on_runners_default must be a non-empty reason")
        return self


# -- cross references (on the raw data, reported with the other config problems) -----

def trigger_problems(stages: Mapping[str, Mapping[str, Any]],
                     known_cadences: set[str]) -> list[tuple[str, str]]:
    """(key path, message): variant cadences the policy does not define, ``needs_on``
    naming an unknown stage or the stage itself, and a cycle that only ``needs_on``
    edges close (a cycle of ``needs`` alone is reported with ``needs``)."""
    import difflib

    problems: list[tuple[str, str]] = []
    for name, stage in stages.items():
        variants = stage.get("variants")
        for variant, table in variants.items() if isinstance(variants, Mapping) else ():
            wanted = table.get("cadences") if isinstance(table, Mapping) else None
            for cadence in wanted if isinstance(wanted, list) else []:
                if isinstance(cadence, str) and cadence not in known_cadences:
                    close = difflib.get_close_matches(cadence, sorted(known_cadences), n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    problems.append((f"stages.{name}.variants.{variant}.cadences",
                                     f"unknown cadence {cadence!r}{hint}; valid: "
                                     f"{', '.join(sorted(known_cadences))} (policy.cadences)"))
        needs_on = stage.get("needs_on")
        for event, needs in needs_on.items() if isinstance(needs_on, Mapping) else ():
            for need in needs if isinstance(needs, list) else []:
                if not isinstance(need, str):
                    continue
                if need == name:
                    problems.append((f"stages.{name}.needs_on.{event}", "a stage cannot need itself"))
                elif need not in stages:
                    close = difflib.get_close_matches(need, sorted(stages), n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    problems.append((f"stages.{name}.needs_on.{event}",
                                     f"unknown stage {need!r}{hint}; valid: {', '.join(sorted(stages))}"))
    plain = {n: [x for x in s.get("needs", []) if isinstance(x, str)]
             if isinstance(s.get("needs", []), list) else [] for n, s in stages.items()}
    if find_cycle(plain):
        return problems
    for event in EVENTS:
        graph = {n: _needs_raw(s, event) for n, s in stages.items()}
        cycle = find_cycle(graph)
        if cycle:
            problems.append((f"stages.{cycle[0]}.needs_on.{event}",
                             f"on {event}, 'needs_on' forms a cycle: " + " -> ".join(cycle)))
            break
    return problems


def _needs_raw(stage: Mapping[str, Any], event: str) -> list[str]:
    needs_on = stage.get("needs_on")
    chosen = needs_on.get(event) if isinstance(needs_on, Mapping) and event in needs_on \
        else stage.get("needs", [])
    return [x for x in chosen if isinstance(x, str)] if isinstance(chosen, list) else []


# -- the rules (pure) ------------------------------------------------------------------

def matches_paths(patterns: Sequence[str], paths: Iterable[str]) -> list[str]:
    """The paths that match any of the gitignore-style ``patterns`` (:mod:`testfleet.globs`)."""
    from testfleet.globs import spec as path_spec

    spec = path_spec(tuple(patterns))
    return [p for p in paths if spec.match_file(p)]


def change_trigger(lane: LaneTriggers, event: str, changed: Sequence[str] | None) -> str | None:
    """The first changed path that makes the lane run on ``event`` through its
    ``run_on_changes``, or None (no entry for the event, no diff, or nothing matches)."""
    if not changed:
        return None
    for trigger in lane.run_on_changes:
        if trigger.event == event:
            hit = matches_paths(trigger.paths, changed)
            if hit:
                return hit[0]
    return None


def event_excluded(lane: LaneTriggers, name: str, event: str) -> str | None:
    """Why the lane does not run on ``event`` (its ``events`` leave it out), or None."""
    if lane.events is None or event in lane.events:
        return None
    also = sorted({t.event for t in lane.run_on_changes})
    more = (f" (and on {', '.join(also)} when a changed path matches its run_on_changes)"
            if also else "")
    return f"{name} runs only on {', '.join(lane.events)}{more}; this run is {event}"


def needs_for(needs: Sequence[str], needs_on: Mapping[Any, Sequence[str]],
              event: str | None) -> list[str]:
    """The stages a stage waits for on ``event``: ``needs_on[event]`` when given, else
    ``needs``; with no event (a workflow written once for every event), all of them."""
    if event is None:
        return list(dict.fromkeys([*needs, *(n for ns in needs_on.values() for n in ns)]))
    return list(needs_on[event]) if event in needs_on else list(needs)


def side_excluded(side: str | None, name: str, nightly: bool) -> tuple[Reason, str] | None:
    """(fate, detail) when a stage pinned to one side of the nightly split does not run
    this registration, else None."""
    if side == "nightly" and not nightly:
        return ("per-commit-only", f"nightly=False; stage {name} runs only nightly=True "
                                   "registrations (registrations = \"nightly\")")
    if side == "per-commit" and nightly:
        return ("nightly-only", f"nightly=True; stage {name} runs only nightly=False "
                                "registrations (registrations = \"per-commit\")")
    return None


def files_match(patterns: Sequence[str], file: str) -> bool:
    """Does a path-only registration's file belong to a stage's ``files``?"""
    return bool(patterns) and bool(matches_paths(patterns, [file]))


def runner_match(patterns: Sequence[str], labels: Sequence[str]) -> str | None:
    """The first runner label that one of ``patterns`` (fnmatch, case-sensitive) matches."""
    for label in labels:
        if any(fnmatch.fnmatchcase(label, p) for p in patterns):
            return label
    return None
