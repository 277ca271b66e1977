"""What a plan may run when no digest pins it: only what this project would plan.

A plan's digest proves the plan is intact, not who made it: anyone who edits a plan file
can recompute it. So a path that runs a plan nobody pinned (``run --plan P --job J`` and
``pytest --testfleet-plan`` without ``--plan-digest``/``$TESTFLEET_PLAN_DIGEST``; every
``--stage`` shard that executes a frozen plan another shard left under
``<cache_dir>/plans/``) checks the plan against what it can recompute itself, from the
checkout's configuration and registrations, which no earlier job's tests leave behind on
a machine whose checkout step cleans the working tree:

- a job of a plan file runs only files this checkout registers for the job's stage
  (:func:`unregistered_files`): a file outside ``roots``, unregistered, or registered for
  another stage is refused;
- a frozen plan is compared with the history-free plan this shard makes for its key
  anyway (:func:`frozen_plan_problems`): same trigger and policy, the same lanes with the
  same job settings (backend, runners, container, command, environment, CI settings), no
  file the history-free plan does not hold, each with its command.

What history decides (how files are split between a lane's shards, estimates, quarantine)
cannot be recomputed once earlier shards recorded theirs; only a pinned digest holds those
(see docs/exactly-once.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from testfleet.canonical import canonical_bytes
from testfleet.config import Config
from testfleet.errors import UsageError
from testfleet.planning.model import Job, Plan

#: files named per refused job, before the rest are counted
SHOWN = 5


def _listed(items: Sequence[str]) -> str:
    head = ", ".join(items[:SHOWN])
    return head + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def unregistered_files(config: Config, registrations: Iterable[Any],
                       jobs: Sequence[Job]) -> list[str]:
    """One line per job that holds a file this checkout does not register for the job's
    stage (a registration with that suite, or a path-only one of a backend the stage
    takes). Collection only finds files under ``roots``, so a file outside them is never
    registered."""
    stages_of: dict[str, set[str]] = {}
    path_only: dict[str, set[str]] = {}
    for reg in registrations:
        if reg.suite:
            stages_of.setdefault(reg.file, set()).add(reg.suite)
        else:
            path_only.setdefault(reg.file, set()).add(reg.backend)
    out = []
    for job in jobs:
        stage = config.stages.get(job.stage)
        if stage is None:
            out.append(f"job {job.id}: stage {job.stage!r} is not in the configuration")
            continue
        backends = stage.accepted_backends()
        foreign = [t.file for t in job.tests
                   if job.stage not in stages_of.get(t.file, ())
                   and not backends & path_only.get(t.file, set())]
        if foreign:
            out.append(f"job {job.id}: {_listed(foreign)} not registered for stage {job.stage} "
                       "in this checkout")
    return out


def require_registered(config: Config, registrations: Iterable[Any], plan: Plan,
                       job_ids: Sequence[str], what: str) -> None:
    """Refuse (:class:`UsageError`) to run jobs of a plan no digest pins when they hold a
    file this checkout does not register for their stage."""
    problems = unregistered_files(config, registrations, [plan.job(j) for j in job_ids])
    if problems:
        raise UsageError(f"{what} was not pinned (--plan-digest or $TESTFLEET_PLAN_DIGEST), and "
                         f"it runs what this project does not plan: {'; '.join(problems)}. "
                         "Its digest only proves it is intact, not who made it; nothing was run")


def require_frozen_matches(frozen: Plan, fresh: Plan, shown: str) -> None:
    """Refuse (:class:`UsageError`) a frozen plan that holds what this project's
    history-free plan for the same key does not."""
    problems = frozen_plan_problems(frozen, fresh)
    if problems:
        raise UsageError(
            f"the frozen plan of this run {shown} is not what this project plans for it: "
            f"{'; '.join(problems[:SHOWN])}"
            + (f"; and {len(problems) - SHOWN} more" if len(problems) > SHOWN else "")
            + ". It was changed after it was frozen (its digest recomputed); nothing was run. "
              f"Delete {shown} to plan again (and re-run every shard of this run)")


def _settings(job: Job) -> bytes:
    """What a job runs with that history never changes (its shard, estimate, timeout and
    files' quarantine are history's)."""
    return canonical_bytes({
        "stage": job.stage, "variant": job.variant, "backend": job.backend,
        "runs_on": list(job.runs_on), "container": job.container, "command": job.command,
        "env": job.env, "ci": job.ci.to_json(), "probe": job.probe})


def frozen_plan_problems(frozen: Plan, fresh: Plan) -> list[str]:
    """Where ``frozen`` (read back from ``<cache_dir>/plans/``) holds what ``fresh``, the
    plan this shard made for the same key without history, does not: another trigger or
    policy, a lane or job setting it does not plan, a file it does not plan there, or a
    file's command. An empty list: the frozen plan differs at most in what history
    decides."""
    out = []
    if canonical_bytes(frozen.trigger) != canonical_bytes(fresh.trigger):
        out.append("it was planned for another trigger")
    if canonical_bytes(frozen.policy) != canonical_bytes(fresh.policy):
        out.append("it has another policy")
    settings: dict[tuple[str, bool], bytes] = {}
    files: dict[tuple[str, bool], dict[str, str | None]] = {}
    for job in fresh.jobs:
        key = (job.lane, job.probe)
        settings.setdefault(key, _settings(job))
        files.setdefault(key, {}).update((t.file, t.command) for t in job.tests)
    for job in frozen.jobs:
        key = (job.lane, job.probe)
        if key not in settings:
            out.append(f"job {job.id}: lane {job.lane} has no {'probe ' if job.probe else ''}"
                       "job in this project's plan")
            continue
        if _settings(job) != settings[key]:
            out.append(f"job {job.id}: its settings (backend, runners, container, command, "
                       "environment or CI settings) are not the configuration's")
        planned = files[key]
        extra = [t.file for t in job.tests if t.file not in planned]
        if extra:
            out.append(f"job {job.id}: {_listed(extra)} not planned for {job.lane}")
        other_command = [t.file for t in job.tests
                       if t.file in planned and t.command != planned[t.file]]
        if other_command:
            out.append(f"job {job.id}: another command for {_listed(other_command)}")
    return out
