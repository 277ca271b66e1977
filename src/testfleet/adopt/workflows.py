"""Read a project's existing GitHub workflows as data, for adoption.

The workflows are parsed with PyYAML, never matched with regular expressions, and
nothing in them is executed. A job is a *stage job* for each suite its runner calls
name (``--suite NAME``; a job may call the runner twice; ``--suite ${{ matrix.suite }}``
names every suite of its matrix), or for the suite its id names; reusable workflows
called from the same repository (``uses: ./.github/workflows/x.yml``) are followed
``MAX_DEPTH`` levels, with the caller's ``with:`` values substituted for
``${{ inputs.* }}`` and the caller's trigger: a job runs on the events of the workflow
that starts it, as far as each level's ``if:`` allows.

What a job says that a configuration can hold (runner labels, container image,
partition count, timeout, ordering, literal env values, retry flags, events, crons and
the paths that filter them) is collected per stage; a second job for the same suite and
hardware (another image, another workflow) is kept as an alternate (a variant);
everything else -- a value computed at run time -- becomes a :class:`NotCarried` line
the user reads at the end.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testfleet.adopt.ci_model import CIRead, CIStage, NotCarried
from testfleet.adopt.gates import events_allowed, pr_gates, resolve_needs
from testfleet.adopt.job import TEST_COMMAND, command_lines, read_stage_job, runner_defaults
from testfleet.adopt.runner import RunnerRead, read_runner, runner_script
from testfleet.adopt.workflow_yaml import (
    called_jobs,
    crons_of,
    event_filters,
    events_of,
    load_workflow,
    on_of,
    short,
    text_of,
)
from testfleet.workflow_calls import MAX_CALL_DEPTH

_SUITE_ARG = re.compile(r"--suite[= ]+(\$\{\{\s*matrix\.([A-Za-z0-9_-]+)\s*\}\}|[A-Za-z0-9][A-Za-z0-9._-]*)")
_HW = re.compile(r"--hw[= ]+([A-Za-z0-9_-]+)")
#: the events a testfleet plan is made for, of those a workflow can name
PLAN_EVENTS = ("pull_request", "pull_request_target", "push", "schedule", "workflow_call",
               "workflow_dispatch")
MAX_DEPTH = MAX_CALL_DEPTH  # reusable workflows followed this many levels deep


@dataclass
class JobUnit:
    """One job as it runs: a job of a workflow, or a job of a reusable workflow that a
    job calls (each called job its own unit, with the caller's inputs in place)."""

    rel: str  # the workflow whose trigger starts it
    top_job: str  # the job of that workflow (needs and PR gates are looked up from it)
    caller: Mapping[str, Any]  # the job whose settings wrap ``inner`` (or the job itself)
    inner: dict[str, Any] | None
    definition: tuple[str, str]  # (workflow file, job id) where the job's steps are written
    events: tuple[str, ...]
    #: (workflow file, job id) of ``caller``: where the job's matrix and inputs are written
    caller_id: tuple[str, str] = ("", "")


def read_workflows(repo: Path, suites: Iterable[str], path_only: Iterable[str] = ()) -> CIRead:
    """Read ``.github/workflows/*.yml`` under ``repo`` for the given suite names; a job
    whose matrix names some of ``path_only`` (files registered with suite "") by path is
    kept as a path job."""
    known = set(suites)
    by_path = set(path_only)
    result = CIRead()
    wf_dir = repo / ".github" / "workflows"
    if not wf_dir.is_dir():
        return result
    files = sorted(p for p in wf_dir.iterdir() if p.suffix in (".yml", ".yaml") and p.is_file())
    runners: dict[str, RunnerRead | None] = {}
    docs: dict[str, dict[str, Any]] = {}
    cache: dict[str, Any] = {}
    for path in files:
        data = load_workflow(path, path.relative_to(repo).as_posix(), result.findings, cache)
        if data is not None:
            docs[path.relative_to(repo).as_posix()] = data
    called = {str(job.get("uses"))[2:] for data in docs.values()
              for job in (data.get("jobs") or {}).values()
              if isinstance(job, Mapping) and str(job.get("uses", "")).startswith("./")}
    for rel, data in docs.items():
        on = on_of(data)
        own = events_of(on)
        if set(own) <= {"workflow_call"} and rel in called:
            continue  # a reusable workflow is read where it is called, with the caller's trigger
        jobs = data.get("jobs")
        if not isinstance(jobs, Mapping):
            continue
        events = tuple(e for e in own if e != "workflow_call") or own
        filters = event_filters(on)
        _filter_notes(rel, filters, result)
        event_paths = {e: [str(x) for x in f["paths"]] for e, f in filters.items()
                       if isinstance(f.get("paths"), list) and f["paths"]}
        crons = crons_of(on)
        job_stages: dict[str, list[str]] = {}
        runs_tests = False
        for job_id, job in jobs.items():
            if not isinstance(job, Mapping):
                continue
            for unit in _units(repo, rel, str(job_id), job, events, result, cache):
                commands = text_of(unit.inner.get("steps") if unit.inner is not None
                                   else job.get("steps")) + "\n" + text_of(unit.caller.get("with"))
                if TEST_COMMAND.search(commands):
                    runs_tests = True
                    for line in command_lines(commands):
                        result.test_commands.append((rel, str(job_id), line))
                runs = _stage_runs(commands, unit, known)
                named = _matrix_paths(unit, by_path) if not runs and by_path else []
                if named:
                    runs_tests = True
                    ci = read_stage_job(unit.caller_id[1], rel, str(job_id), unit.events,
                                        dict(unit.caller),
                                        [dict(unit.inner)] if unit.inner is not None else [],
                                        commands, result.not_carried)
                    ci.definition = unit.caller_id  # the job whose matrix names the files
                    result.job_runs.append((rel, str(job_id), "", tuple(named)))
                    ci.crons = list(crons) if "schedule" in unit.events else []
                    ci.event_paths = {e: list(v) for e, v in event_paths.items() if e in unit.events}
                    _register_path_job(result, ci, named)
                for stage, scoped, strategy in runs:
                    runs_tests = True
                    result.job_runs.append((rel, str(job_id), stage, ()))
                    job_stages.setdefault(str(job_id), [])
                    if stage not in job_stages[str(job_id)]:
                        job_stages[str(job_id)].append(stage)
                    caller = dict(unit.caller)
                    inner = dict(unit.inner) if unit.inner is not None else None
                    if strategy is not None:
                        (inner if inner is not None and "strategy" in inner else caller)["strategy"] = strategy
                    ci = read_stage_job(stage, rel, str(job_id), unit.events, caller,
                                        [inner] if inner is not None else [], scoped,
                                        result.not_carried, jobs, repo, cache)
                    ci.definition = unit.definition
                    ci.cadence_input = bool(re.search(r"--cadence[= ]+\$\{\{", scoped))
                    ci.crons = list(crons) if "schedule" in unit.events else []
                    ci.event_paths = {e: list(v) for e, v in event_paths.items() if e in unit.events}
                    hw_m = _HW.search(scoped)
                    ci.hw = hw_m.group(1) if hw_m else None
                    ci.runner_script, ci.runner_defaults = runner_defaults(repo, scoped)
                    read_stage_runner(repo, scoped, ci, runners)
                    _register(result, stage, ci)
        resolve_needs(jobs, job_stages, result, rel, known)
        pr_gates(jobs, job_stages, result, repo, rel, cache)
        if runs_tests:
            result.test_workflows.append(rel)
            for cron in crons:
                result.crons.setdefault(cron, rel)
        else:
            for cron in crons:
                result.ignored_crons.append(NotCarried(
                    rel, f"cron {cron!r}", "this workflow runs no tests, so its schedule is not "
                    "a test cadence"))
    return result


def _units(repo: Path, rel: str, job_id: str, job: Mapping[str, Any], events: tuple[str, ...],
           result: CIRead, cache: dict[str, Any], depth: int = 0) -> list[JobUnit]:
    """The job as it runs: itself, or each job of the reusable workflow it calls (followed
    ``MAX_DEPTH`` levels), on the events its own ``if:`` (and each caller's) allows."""
    events = events_allowed(job.get("if"), events, job.get("\0inputs", {}))
    uses = job.get("uses")
    if not isinstance(uses, str):
        here = (str(job.get("\0workflow", rel)), str(job.get("\0id", job_id)))
        return [JobUnit(rel, job_id, job, None, here, events, here)]
    raw_with = job.get("with")
    with_: Mapping[str, Any] = raw_with if isinstance(raw_with, Mapping) else {}
    where = f"{rel} job {job_id}"
    out: list[JobUnit] = []
    for inner in called_jobs(repo, uses, with_, where, result.findings, result.not_carried, cache):
        inner_events = events_allowed(inner.get("if"), events, inner.get("\0inputs", {}))
        if isinstance(inner.get("uses"), str) and depth + 1 < MAX_DEPTH:
            for unit in _units(repo, rel, job_id, inner, inner_events, result, cache, depth + 1):
                out.append(unit)
            continue
        out.append(JobUnit(rel, job_id, job, inner,
                           (str(inner.get("\0workflow")), str(inner.get("\0id"))), inner_events,
                           (str(job.get("\0workflow", rel)), str(job.get("\0id", job_id)))))
    return out


def _stage_runs(commands: str, unit: JobUnit, known: set[str],
                ) -> list[tuple[str, str, Any]]:
    """(stage, the job's commands for that stage alone, the job's matrix restricted to
    it or None) for every suite the job runs: each ``--suite NAME`` of its runner calls (a
    job may call the runner twice), each value of ``--suite ${{ matrix.suite }}``, else the
    job's id when it is a suite's name."""
    joined = commands.replace("\\\n", " ")
    source = unit.inner if unit.inner is not None and "strategy" in unit.inner else unit.caller
    strategy = source.get("strategy")
    matrix = strategy.get("matrix") if isinstance(strategy, Mapping) else None
    found: list[tuple[str, str | None]] = []
    for m in _SUITE_ARG.finditer(joined):
        if m.group(2):
            for value in _matrix_values(matrix, m.group(2)):
                if value in known:
                    found.append((value, m.group(2)))
        elif m.group(1) in known:
            found.append((m.group(1), None))
    found = list(dict.fromkeys(found))
    if not found:
        return [(unit.top_job, joined, None)] if unit.top_job in known else []
    out = []
    for stage, key in found:
        lines = []
        for line in joined.splitlines():
            if key is not None:
                line = re.sub(r"\$\{\{\s*matrix\." + re.escape(key) + r"\s*\}\}", stage, line)
            named = [m.group(1) for m in _SUITE_ARG.finditer(line)]
            if named and stage not in named:
                continue  # another suite's runner call
            lines.append(line)
        scoped = "\n".join(lines)
        out.append((stage, scoped, _restrict(strategy, key, stage) if key else None))
    return out


def _matrix_paths(unit: JobUnit, files: set[str]) -> list[str]:
    """The files of ``files`` the job's matrix names (anywhere in its values)."""
    from testfleet.adopt.workflow_yaml import text_of

    source = unit.caller if "strategy" in unit.caller else (unit.inner or {})
    strategy = source.get("strategy")
    text = text_of(strategy.get("matrix")) if isinstance(strategy, Mapping) else ""
    return sorted({w.strip().removeprefix("./") for w in text.split("\n")} & files)


def _matrix_values(matrix: Any, key: str) -> list[str]:
    if not isinstance(matrix, Mapping):
        return []
    values = [str(v) for v in matrix.get(key) or [] if isinstance(v, (str, int))] \
        if isinstance(matrix.get(key), list) else []
    for entry in matrix.get("include") or []:
        if isinstance(entry, Mapping) and isinstance(entry.get(key), (str, int)):
            values.append(str(entry[key]))
    return list(dict.fromkeys(values))


def _restrict(strategy: Any, key: str, value: str) -> Any:
    """The job's strategy with ``matrix.<key>`` fixed to ``value`` (its runs-on and
    partition count are then the ones that suite's combinations give)."""
    matrix = dict(strategy["matrix"])
    if isinstance(matrix.get(key), list):
        matrix[key] = [v for v in matrix[key] if str(v) == value]
    if isinstance(matrix.get("include"), list):
        matrix["include"] = [e for e in matrix["include"] if not isinstance(e, Mapping)
                             or key not in e or str(e[key]) == value]
    return {**strategy, "matrix": matrix}


def _register(result: CIRead, stage: str, ci: CIStage) -> None:
    """Add one stage job: the stage's first, another hardware's (``by_hw``), the same job
    reached again (another caller: its events and crons join), or another job for the
    same suite and hardware (``alternates``: another image or workflow)."""
    first = result.stages.get(stage)
    if first is None:
        result.stages[stage] = ci
        return
    if ci.hw and first.hw and ci.hw != first.hw:
        target = first.by_hw.get(ci.hw)
        if target is None:
            first.by_hw[ci.hw] = ci
            return
    else:
        target = first
        if ci.definition != first.definition and _pull_request(ci) and not _pull_request(first):
            # the job a pull request runs is the stage's own; the cron-only one a variant
            ci.alternates, first.alternates = [first, *first.alternates], []
            ci.by_hw, first.by_hw = first.by_hw, {}
            result.stages[stage] = ci
            return
    for same in (target, *target.alternates):
        if same.definition != ci.definition:
            continue
        keep, other = same, ci
        if ci.workflow == ci.definition[0] and same.workflow != same.definition[0]:
            # the job as its own workflow starts it (not as another workflow calls it,
            # with that caller's inputs) is the one whose settings are adopted
            keep, other = ci, same
            keep.alternates, same.alternates = same.alternates, []
            keep.by_hw, same.by_hw = same.by_hw, {}
            if same is first:
                result.stages[stage] = keep
            elif same is target:
                first.by_hw[str(same.hw)] = keep
            else:
                target.alternates[target.alternates.index(same)] = keep
        keep.events = tuple(sorted(set(keep.events) | set(other.events)))
        keep.crons = sorted(set(keep.crons) | set(other.crons))
        for event, paths in other.event_paths.items():
            keep.event_paths.setdefault(event, paths)
        keep.pr_labels_required |= other.pr_labels_required
        keep.draft_fails = keep.draft_fails or other.draft_fails
        return
    target.alternates.append(ci)


def _register_path_job(result: CIRead, ci: CIStage, files: list[str]) -> None:
    """One job reached from several workflows is one path job (the route of its own
    workflow kept, the others' events and crons joined)."""
    for i, (same, named) in enumerate(result.path_jobs):
        if same.definition != ci.definition:
            continue
        keep, other = (ci, same) if ci.workflow == ci.definition[0] else (same, ci)
        keep.events = tuple(sorted(set(keep.events) | set(other.events)))
        keep.crons = sorted(set(keep.crons) | set(other.crons))
        for event, paths in other.event_paths.items():
            keep.event_paths.setdefault(event, paths)
        result.path_jobs[i] = (keep, sorted(set(named) | set(files)))
        return
    result.path_jobs.append((ci, files))


def _pull_request(ci: CIStage) -> bool:
    return bool({"pull_request", "pull_request_target"} & (set(ci.events) | set(ci.event_paths)))


def _filter_notes(rel: str, filters: Mapping[str, Mapping[str, Any]], result: CIRead) -> None:
    """Trigger filters a configuration has no key for are said once per workflow."""
    for event, table in filters.items():
        for key in ("branches", "branches-ignore", "tags", "tags-ignore", "paths-ignore", "types"):
            if key in table:
                result.not_carried.append(NotCarried(
                    rel, f"{event}: {key} {short(table[key])}",
                    "the generated workflow decides the branches and event types it runs on "
                    "(init --push-branch); testfleet plans every event it is given"
                    if key != "paths-ignore" else
                    "run_on_changes names paths that trigger a run, not paths that do not: "
                    "the stage runs on every such event"))


def read_stage_runner(repo: Path, commands: str, stage: CIStage,
                 runners: dict[str, RunnerRead | None]) -> None:
    """The runner script the job's test command starts (read once per script), and whether
    the job passes its nightly switch."""
    script = runner_script(repo, commands)
    if script is None:
        return
    if script not in runners:
        runners[script] = read_runner(repo, script)
    runner = stage.runner = runners[script]
    stage.nightly_run = bool(runner and runner.nightly_flag
                             and re.search(re.escape(runner.nightly_flag) + r"(?![\w-])", commands))
