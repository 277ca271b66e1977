"""The one way to make a plan from the history: ``testfleet plan``, ``testfleet run
--stage/--file`` and the pytest plugin (through :mod:`testfleet.app.inprocess`), and the
queue and shadow modes to come, all plan here.

The history gives two inputs, read here and nowhere else on a planning path: measured
durations (:mod:`testfleet.app.estimates`) and the flaky quarantine
(:func:`testfleet.results.quarantine.quarantine_for`). Both are fail-soft: history
trouble becomes a note, never a failed plan. :func:`testfleet.planning.make_plan` then
gets values and returns a value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from testfleet.breaker.model import BreakerState
    from testfleet.breaker.runners import RunnerInventory
    from testfleet.config import Project
    from testfleet.planning.model import Plan


@dataclass(frozen=True)
class PlanInputs:
    """What the history adds to a plan, and what the user should hear about it."""

    estimates: dict[tuple[str, str], tuple[float, str]]
    quarantine: dict[tuple[str, str], str]
    #: each opted-in lane's runner-class breaker (#41), as the history holds it
    breakers: dict[str, BreakerState]
    #: history notes, then quarantine notes (untrusted text: print escaped)
    notes: list[str]


def plan_inputs(project: Project, registry: Any, database: str | None, *,
                stage: str | None = None, history_problem: str | None = None) -> PlanInputs:
    """Estimates and quarantine from the history (of ``stage`` and, for a variant's lane,
    its stage; of every stage when ``stage`` is None). ``history_problem`` says why no
    history could be read at all, instead of "no database yet"."""
    from testfleet.app.breaker import read_breakers
    from testfleet.app.estimates import estimates_for
    from testfleet.planning.lanes import find_lane
    from testfleet.results.quarantine import quarantine_for

    lane = find_lane(project.config, stage) if stage else None
    wanted = None if stage is None else [stage, lane.stage] if lane else [stage]
    estimates, notes = estimates_for(project, registry, url=database, stages=wanted)
    if history_problem is not None:
        notes = [f"{history_problem}; all estimates are est_time literals"]
    quarantine, quarantine_notes = quarantine_for(project, database, [stage] if stage else None)
    breakers, breaker_notes = read_breakers(project, database)
    return PlanInputs(estimates, quarantine, breakers, [*notes, *quarantine_notes, *breaker_notes])


def plan_from_history(project: Project, registry: Any, request: Any, database: str | None, *,
                      stage: str | None = None, history_problem: str | None = None,
                      notes_in_plan: bool = False,
                      runners: RunnerInventory | None = None) -> tuple[Plan, list[str]]:
    """The plan for ``request`` with the history's estimates and quarantine, and the notes
    on what was used. ``notes_in_plan``: the notes become the plan's own warnings (what
    ``testfleet plan`` prints and writes) and none are returned; otherwise the plan is the
    same as one made without notes, and the caller shows them (a stage path's plan is
    frozen and compared by digest, so notes of the moment stay out of it). The history's
    runner-class breakers (#41) and ``runners`` (the online self-hosted runners, ``plan
    --runners``) hold lanes back."""
    from testfleet.planning import make_plan

    inputs = plan_inputs(project, registry, database, stage=stage, history_problem=history_problem)
    if notes_in_plan:
        return make_plan(project, registry, request, inputs.estimates, warnings=inputs.notes,
                         quarantine=inputs.quarantine, breakers=inputs.breakers,
                         runners=runners), []
    return make_plan(project, registry, request, inputs.estimates,
                     quarantine=inputs.quarantine, breakers=inputs.breakers,
                     runners=runners), inputs.notes
