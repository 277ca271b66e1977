"""The pytest plugin: run one testfleet job under the user's own ``pytest`` invocation.

    pytest --testfleet-stage stage-a-cpu --testfleet-shard 2/4
    pytest --testfleet-plan plan.json --testfleet-job stage-a-cpu-2-of-4

The job's files are chosen by the same planner as ``testfleet plan`` / ``testfleet run``
(same registry, same estimates, same split), so a shard run here is the shard CI runs.
Files outside the job are not collected at all (a GPU test's imports never run on a CPU
runner). Registrations of the stage that are disabled are collected and reported as
skips carrying their reason, so plain pytest output shows what is switched off; without
a stage, a file whose every registration is disabled is skipped the same way.
Per-file durations and outcomes go to the same history as ``testfleet run``.

Loaded by the ``pytest11`` entry point when testfleet is installed, or with
``-p testfleet``. It does nothing unless a testfleet configuration is found from the
rootdir, and nothing inside a ``testfleet run`` child (that runner already selected,
skipped and records the file).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

_KEY = pytest.StashKey["_Job"]()


@dataclass
class _Job:
    """What this session runs and what it has seen, per repo-relative file."""

    project: Any
    stage: str | None
    backend: str | None
    job_id: str | None
    files: set[str]  # selected files ("" set = no selection: everything collects)
    disabled: dict[str, str]  # file -> reason (collected, skipped)
    record: bool
    database: str | None
    durations: dict[str, float] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)
    collected: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)

    def rel(self, path: Path) -> str | None:
        try:
            return path.resolve().relative_to(self.project.root.resolve()).as_posix()
        except ValueError:
            return None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("testfleet", "testfleet: run one job of a test fleet")
    group.addoption("--testfleet-stage", metavar="STAGE", default=None,
                    help="Collect exactly the files testfleet plans for this stage.")
    group.addoption("--testfleet-shard", metavar="I/N", default=None,
                    help="With --testfleet-stage: only shard I of N (as `testfleet plan` splits it).")
    group.addoption("--testfleet-cadence", metavar="CADENCE", default=None,
                    help="With --testfleet-stage: plan for this cadence (nightly admits "
                         "nightly-only registrations). Default: a push to the default branch.")
    group.addoption("--testfleet-plan", metavar="FILE", default=None,
                    help="A plan written by `testfleet plan --format json` (with --testfleet-job).")
    group.addoption("--testfleet-job", metavar="ID", default=None,
                    help="The plan job whose files to collect (with --testfleet-plan).")
    group.addoption("--testfleet-database", metavar="URL", default=None,
                    help="History database (default: the project's, as `testfleet run`).")
    group.addoption("--testfleet-no-history", action="store_true", default=False,
                    help="Do not record durations and outcomes in the history database.")


def _usage(message: str) -> pytest.UsageError:
    return pytest.UsageError(f"testfleet: {message}")


def pytest_configure(config: pytest.Config) -> None:
    opt = config.getoption
    stage, plan_path, job_id = (opt("--testfleet-stage"), opt("--testfleet-plan"),
                                opt("--testfleet-job"))
    shard, cadence = opt("--testfleet-shard"), opt("--testfleet-cadence")
    asked = any(v is not None for v in (stage, plan_path, job_id, shard, cadence))
    if os.environ.get("TESTFLEET_RUN_ID") and not asked:
        return  # a child of `testfleet run`: that runner selected and records this file
    from testfleet.configfile import find_config

    found = find_config(Path(config.rootpath))
    if found is None:
        if asked:
            raise _usage(f"no testfleet configuration found from {config.rootpath} "
                         "(pyproject.toml [tool.testfleet] or testfleet.toml)")
        return
    try:
        job = _make_job(config, found, stage=stage, shard=shard, cadence=cadence,
                        plan_path=plan_path, job_id=job_id, asked=asked)
    except pytest.UsageError as exc:
        if asked:
            raise
        # Plain pytest must keep working when the testfleet config is broken (check says why).
        config.issue_config_time_warning(pytest.PytestConfigWarning(
            f"{exc}; disabled registrations are not skipped in this run"), stacklevel=2)
        return
    config.stash[_KEY] = job


def _make_job(config: pytest.Config, found: Path, *, stage: str | None, shard: str | None,
              cadence: str | None, plan_path: str | None, job_id: str | None,
              asked: bool) -> _Job:
    from testfleet.config import load_project
    from testfleet.errors import TestfleetError
    from testfleet.registry import collect

    if (plan_path is None) != (job_id is None):
        raise _usage("--testfleet-plan and --testfleet-job go together")
    if plan_path is not None and (stage or shard or cadence):
        raise _usage("--testfleet-plan runs a job exactly as planned; --testfleet-stage, "
                     "--testfleet-shard and --testfleet-cadence do not apply")
    if (shard or cadence) and not stage:
        raise _usage("--testfleet-shard and --testfleet-cadence need --testfleet-stage")
    try:
        project = load_project(found.parent, found)
        registry = collect(project)
        if plan_path is not None:
            sel = _from_plan(Path(config.invocation_params.dir), plan_path, job_id or "")
        elif stage is not None:
            sel = _from_stage(project, registry, stage, shard, cadence,
                              config.getoption("--testfleet-database"))
        else:
            sel = None
    except TestfleetError as exc:
        raise _usage(str(exc)) from None
    record = asked and not config.getoption("--testfleet-no-history")
    if sel is None:
        by_file: dict[str, list[Any]] = {}
        for reg in registry.registrations:
            by_file.setdefault(reg.file, []).append(reg)
        disabled = {f: "; ".join(sorted({r.disabled for r in regs if r.disabled}))
                    for f, regs in by_file.items() if all(r.disabled for r in regs)}
        return _Job(project, None, None, None, set(), disabled, False, None)
    files = {item.file for item in sel.items}
    disabled = {r.file: r.disabled for r in registry.registrations
                if r.suite == sel.stage and r.disabled and r.file not in files}
    # a variant's job records under its lane (<stage>.<variant>), as `testfleet run` does
    lane = f"{sel.stage}.{sel.variant}" if getattr(sel, "variant", "") else sel.stage
    return _Job(project, lane, sel.backend, sel.job_id, files, disabled, record,
                config.getoption("--testfleet-database"))


def _from_plan(base: Path, plan_path: str, job_id: str) -> Any:
    from testfleet.planning.model import load_plan
    from testfleet.runner.jobs import select_plan_job

    path = Path(plan_path)
    return select_plan_job(load_plan(path if path.is_absolute() else base / path), job_id)


def _from_stage(project: Any, registry: Any, stage: str, shard: str | None,
                cadence: str | None, database: str | None) -> Any:
    from testfleet.cli._trigger import TriggerOptions, build_request
    from testfleet.planning import make_plan
    from testfleet.planning.estimates import estimates_for
    from testfleet.runner.jobs import parse_shard, select_stage_jobs

    request = build_request(project, project.root,
                            TriggerOptions(stages=(stage,), cadence=cadence), env={})
    estimates, _ = estimates_for(project, registry, url=database, stages=[stage])
    plan = make_plan(project, registry, request, estimates)
    return select_stage_jobs(plan, stage, parse_shard(shard) if shard is not None else None)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Files outside the job are never imported (a GPU test's imports on a CPU runner)."""
    job = config.stash.get(_KEY, None)
    if job is None or job.stage is None or collection_path.suffix != ".py":
        return None
    if collection_path.name in ("conftest.py", "__init__.py"):
        return None
    rel = job.rel(collection_path)
    if rel is None:
        return None
    return True if rel not in job.files and rel not in job.disabled else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    job = config.stash.get(_KEY, None)
    if job is None:
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        rel = job.rel(Path(item.path))
        if job.stage is not None and (rel is None or (rel not in job.files
                                                      and rel not in job.disabled)):
            dropped.append(item)  # named explicitly on the command line, but not in the job
            continue
        kept.append(item)
        if rel is None:
            continue
        job.collected.add(rel)
        reason = job.disabled.get(rel)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"testfleet: disabled: {reason}"))
    if dropped:
        items[:] = kept
        config.hook.pytest_deselected(items=dropped)
        job.notes.append(f"{len(dropped)} test(s) deselected: their files are not in job "
                         f"{job.job_id}")
    missing = sorted(job.files - job.collected)
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        job.notes.append(f"{len(missing)} file(s) of job {job.job_id} were not collected "
                         f"(run pytest from the project root, or pass their directory): {shown}")
        for rel in missing:
            job.outcomes[rel] = "NOT_RUN"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    job = item.config.stash.get(_KEY, None)
    if job is None or job.stage is None:
        return
    rel = job.rel(Path(item.path))
    if rel is None or rel not in job.files:
        return
    job.durations[rel] = job.durations.get(rel, 0.0) + float(report.duration)
    if report.failed:
        job.outcomes[rel] = "FAILED"
    else:
        job.outcomes.setdefault(rel, "PASSED")  # passed or skipped tests: the file passed


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    job = session.config.stash.get(_KEY, None)
    if job is None or not job.record or job.stage is None:
        return
    rows = [(rel, job.outcomes.get(rel, "NOT_RUN"), job.durations.get(rel, 0.0))
            for rel in sorted(job.files)]
    rows = [r for r in rows if r[1] != "NOT_RUN"]
    if not rows:
        return
    try:
        from testfleet.runner.hooks import current_commit
        from testfleet.store import open_store
        from testfleet.store.durations import Execution

        commit = current_commit(job.project.root)
        ci_run_id = (os.environ.get("GITHUB_RUN_ID") or os.environ.get("BUILDKITE_BUILD_NUMBER")
                     or None)
        now = time.time()
        with open_store(job.project, job.database) as store:
            store.record_executions([
                Execution(file=rel, stage=job.stage, backend=job.backend or "", duration=round(d, 3),
                          outcome=outcome, attempt=1, commit=commit, ci_run_id=ci_run_id,
                          timestamp=now)
                for rel, outcome, d in rows])
        job.notes.append(f"recorded {len(rows)} file(s) in the history of stage {job.stage}")
    except Exception as exc:  # history is fail-soft, exactly as in `testfleet run`
        job.notes.append(f"history database unavailable, nothing recorded: {exc}")


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    job = config.stash.get(_KEY, None)
    if job is None or job.stage is None:
        return None
    return [f"testfleet: job {job.job_id} (stage {job.stage}, {job.backend}): "
            f"{len(job.files)} file(s), {len(job.disabled)} disabled (reported as skips)"]


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    job = config.stash.get(_KEY, None)
    if job is None or not job.notes:
        return
    terminalreporter.section("testfleet")
    for note in job.notes:
        terminalreporter.write_line(note)
