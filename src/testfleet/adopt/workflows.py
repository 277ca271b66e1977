"""Read a project's existing GitHub workflows as data, for adoption.

The workflows are parsed with PyYAML, never matched with regular expressions, and
nothing in them is executed. A job is a *stage job* when its command names a suite
(``--suite NAME``) or its id is a suite's name; reusable workflows called from the
same repository (``uses: ./.github/workflows/x.yml``) are followed one level, with
the caller's ``with:`` values substituted for ``${{ inputs.* }}``.

What a job says that a configuration can hold (runner labels, container image,
partition count, timeout, ordering, literal env values, retry flags) is collected
per stage; everything else -- a value computed at run time, a second job for the
same stage -- becomes a :class:`NotCarried` line the user reads at the end.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from testfleet.adopt.ci_model import CIRead, CIStage, NotCarried
from testfleet.adopt.gates import pr_gates, resolve_needs
from testfleet.adopt.job import TEST_COMMAND, command_lines, read_stage_job, runner_defaults
from testfleet.adopt.runner import RunnerRead, read_runner, runner_script
from testfleet.adopt.workflow_yaml import (
    called_jobs,
    crons_of,
    events_of,
    load_workflow,
    on_of,
    text_of,
)

_SUITE = re.compile(r"--suite[= ]+([A-Za-z0-9][A-Za-z0-9._-]*)")
_HW = re.compile(r"--hw[= ]+([A-Za-z0-9_-]+)")


def read_workflows(repo: Path, suites: Iterable[str]) -> CIRead:
    """Read ``.github/workflows/*.yml`` under ``repo`` for the given suite names."""
    known = set(suites)
    result = CIRead()
    wf_dir = repo / ".github" / "workflows"
    if not wf_dir.is_dir():
        return result
    files = sorted(p for p in wf_dir.iterdir() if p.suffix in (".yml", ".yaml") and p.is_file())
    runners: dict[str, RunnerRead | None] = {}
    for path in files:
        rel = path.relative_to(repo).as_posix()
        data = load_workflow(path, rel, result.findings)
        if data is None:
            continue
        on = on_of(data)
        events = events_of(on)
        jobs = data.get("jobs")
        if not isinstance(jobs, Mapping):
            continue
        job_stage: dict[str, str] = {}
        runs_tests = False
        for job_id, job in jobs.items():
            if not isinstance(job, Mapping):
                continue
            where = f"{rel} job {job_id}"
            called = []
            if isinstance(job.get("uses"), str):
                raw_with = job.get("with")
                with_: Mapping[str, Any] = raw_with if isinstance(raw_with, Mapping) else {}
                called = called_jobs(repo, job["uses"], with_, where, result.findings,
                                      result.not_carried)
            commands = text_of(job.get("steps")) + "\n" + text_of(job.get("with"))
            commands += "".join("\n" + text_of(c.get("steps")) for c in called)
            if TEST_COMMAND.search(commands):
                runs_tests = True
                for line in command_lines(commands):
                    result.test_commands.append((rel, str(job_id), line))
            suites_named = [s for s in _SUITE.findall(commands) if s in known]
            stage = suites_named[0] if suites_named else (str(job_id) if str(job_id) in known else None)
            if stage is None:
                continue
            runs_tests = True
            job_stage[str(job_id)] = stage
            hw_m = _HW.search(commands)
            hw = hw_m.group(1) if hw_m else None
            if stage in result.stages and hw and result.stages[stage].hw \
                    and hw != result.stages[stage].hw and hw not in result.stages[stage].by_hw:
                other = read_stage_job(stage, rel, str(job_id), events, job, called, commands,
                               result.not_carried)
                other.hw = hw
                other.runner_script, other.runner_defaults = runner_defaults(repo, commands)
                read_stage_runner(repo, commands, other, runners)
                result.stages[stage].by_hw[hw] = other
                continue
            if stage in result.stages:
                first = result.stages[stage]
                result.not_carried.append(NotCarried(
                    where, f"a second job for stage {stage}",
                    f"the stage's settings come from {first.workflow} job {first.job}"))
                result.stages[stage].events = tuple(sorted(set(first.events) | set(events)))
                continue
            result.stages[stage] = read_stage_job(stage, rel, str(job_id), events, job, called, commands,
                                          result.not_carried)
            result.stages[stage].runner_script, result.stages[stage].runner_defaults = \
                runner_defaults(repo, commands)
            result.stages[stage].hw = hw
            read_stage_runner(repo, commands, result.stages[stage], runners)
        resolve_needs(jobs, job_stage, result)
        pr_gates(jobs, job_stage, result)
        if runs_tests:
            result.test_workflows.append(rel)
            for cron in crons_of(on):
                result.crons.setdefault(cron, rel)
        else:
            for cron in crons_of(on):
                result.ignored_crons.append(NotCarried(
                    rel, f"cron {cron!r}", "this workflow runs no tests, so its schedule is not "
                    "a test cadence"))
    return result


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
