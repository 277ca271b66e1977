"""The pytest plugin: run one testfleet job under the user's own ``pytest`` invocation.

    pytest --testfleet-stage stage-a-cpu --testfleet-shard 2/4
    pytest --testfleet-plan plan.json --testfleet-job stage-a-cpu-2-of-4

The job's files come from the same plan ``testfleet run`` executes: a plan file's job, or
for a stage this run's frozen in-process plan (``app/inprocess.py``: same registry,
estimates and quarantine as ``testfleet plan``, planned once per CI run and machine, so
shards run one after another never re-plan from the history the earlier ones wrote).
Files outside the job are not collected at all (a GPU test's imports never run on a CPU
runner). Registrations of the stage that are disabled are collected and reported as
skips carrying their reason, so plain pytest output shows what is switched off; without
a stage, a file whose every registration is disabled is skipped the same way.

A job's verdict follows ``testfleet run``'s rule (:func:`testfleet.results.quarantine.blocks`):
a quarantined file's failure does not fail the session, a job file that ran no test does.
Each file's outcome is one execution per session, aggregated over every test report the
session received (under pytest-xdist, in the controller only: workers record nothing),
and goes to the same history as ``testfleet run``. A job status file
(:mod:`testfleet.reconcile.status`) says what the session ran, for ``testfleet reconcile``.

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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from testfleet.documents.vocabulary import Outcome

import pytest

_KEY = pytest.StashKey["_Job"]()
#: the key under which the controller hands its job to pytest-xdist workers
_WIRE = "testfleet_job"


@dataclass
class _Job:
    """What this session runs and what it has seen, per repo-relative file."""

    root: Path
    stage: str | None  # the lane (``<stage>.<variant>``), None: no job (plain pytest)
    backend: str | None
    job_id: str | None
    files: set[str]  # selected files ("" set = no selection: everything collects)
    disabled: dict[str, str]  # file -> reason (collected, skipped)
    quarantined: dict[str, str] = field(default_factory=dict)  # file -> why it never blocks
    record: bool = False
    database: str | None = None
    project: Any = None  # the controller's (workers do not record)
    sel: Any = None
    plan_file: str | None = None
    status_file: Path | None = None
    empty_reason: str = ""
    partial: str = ""  # why the session runs part of a file's tests ("" whole files)
    durations: dict[str, float] = field(default_factory=dict)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    failed_elsewhere: set[str] = field(default_factory=set)  # failures outside the job
    collected: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)

    def rel(self, path: Path) -> str | None:
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return None

    def wire(self) -> dict[str, Any]:
        """What a pytest-xdist worker needs to collect and skip as the controller planned."""
        return {"root": str(self.root), "stage": self.stage, "backend": self.backend,
                "job_id": self.job_id, "files": sorted(self.files),
                "disabled": dict(self.disabled), "quarantined": dict(self.quarantined)}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> _Job:
        return cls(Path(data["root"]), data["stage"], data["backend"], data["job_id"],
                   set(data["files"]), dict(data["disabled"]), dict(data["quarantined"]))


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
    group.addoption("--testfleet-plan-digest", metavar="DIGEST", default=None,
                    help="Refuse to run unless the plan's digest is DIGEST (default: "
                         "$TESTFLEET_PLAN_DIGEST).")
    group.addoption("--testfleet-status-file", metavar="PATH", default=None,
                    help="Write the job status file here (for `testfleet reconcile`); default: "
                         "<cache_dir>/runs/<run id>/job-status.json.")
    group.addoption("--testfleet-database", metavar="URL", default=None,
                    help="History database (default: the project's, as `testfleet run`).")
    group.addoption("--testfleet-no-history", action="store_true", default=False,
                    help="Do not record durations and outcomes in the history database.")


def _usage(message: str) -> pytest.UsageError:
    from testfleet.textsafe import printable

    return pytest.UsageError(f"testfleet: {printable(message)}")


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # a pytest-xdist worker: run what the controller planned
        if workerinput.get(_WIRE) is not None:
            config.stash[_KEY] = _Job.from_wire(workerinput[_WIRE])
        return
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
    if job.stage is not None:
        config.pluginmanager.register(_Tracker(job, config), "testfleet-job-tracker")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: each worker gets the controller's job; it never plans on its own."""
    job = node.config.stash.get(_KEY, None)
    if job is not None:
        node.workerinput[_WIRE] = job.wire()


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
    digest = (config.getoption("--testfleet-plan-digest")
              or os.environ.get("TESTFLEET_PLAN_DIGEST", "")).strip() or None
    database = config.getoption("--testfleet-database")
    notes: list[str] = []
    plan: Any = None
    try:
        project = load_project(found.parent, found)
        registry = collect(project)
        if plan_path is not None:
            sel, plan, shown = _from_plan(Path(config.invocation_params.dir), plan_path,
                                          job_id or "", digest, project, registry)
        elif stage is not None:
            sel, plan, shown = _from_stage(project, registry, stage, shard, cadence, database,
                                           digest, notes)
        else:
            sel, shown = None, None
    except TestfleetError as exc:
        raise _usage(str(exc)) from None
    if sel is None:
        by_file: dict[str, list[Any]] = {}
        for reg in registry.registrations:
            by_file.setdefault(reg.file, []).append(reg)
        disabled = {f: "; ".join(sorted({r.disabled for r in regs if r.disabled}))
                    for f, regs in by_file.items() if all(r.disabled for r in regs)}
        return _Job(project.root, None, None, None, set(), disabled)
    files = {item.file for item in sel.items}
    disabled = {r.file: r.disabled for r in registry.registrations
                if r.suite == sel.stage and r.disabled and r.file not in files}
    quarantined = {item.file: item.quarantined for item in sel.items if item.quarantined}
    status = config.getoption("--testfleet-status-file")
    job = _Job(project.root, sel.lane, sel.backend, sel.job_id, files, disabled, quarantined,
               record=asked and not config.getoption("--testfleet-no-history"),
               database=database, project=project, sel=sel, plan_file=shown,
               status_file=None if status is None else Path(config.invocation_params.dir) / status,
               partial=_partial_selection(config), notes=notes)
    if sel.empty:
        from testfleet.runner.jobs import empty_shard_message

        job.empty_reason = empty_shard_message(sel, plan)
        job.notes.append(job.empty_reason)
    return job


def _partial_selection(config: pytest.Config) -> str:
    """Why this session runs only some tests of its files ("" when it runs them whole): a
    file's verdict from some of its tests is not the file's, so it is not recorded."""
    if config.getoption("keyword", default=""):
        return "-k selects some tests"
    if config.getoption("deselect", default=None):
        return "--deselect drops some tests"
    if config.getoption("lf", default=False):
        return "--last-failed reruns some tests"
    if config.getoption("stepwise", default=False):
        return "--stepwise stops at the first failure"
    if any("::" in str(arg) for arg in config.args):
        return "node ids select some tests"
    return ""


def _from_plan(base: Path, plan_path: str, job_id: str, digest: str | None, project: Any,
               registry: Any) -> Any:
    from testfleet.planning.model import load_plan
    from testfleet.runner.jobs import require_digest, select_plan_job
    from testfleet.runner.planguard import require_registered

    path = Path(plan_path)
    plan = load_plan(path if path.is_absolute() else base / path)
    require_digest(plan, digest, f"plan file {plan_path}")
    sel = select_plan_job(plan, job_id)
    if digest is None:  # nothing pins the plan: it runs only what this project plans
        require_registered(project.config, registry.registrations, plan, sel.jobs,
                           f"plan file {plan_path}")
    return sel, plan, plan_path


def _from_stage(project: Any, registry: Any, stage: str, shard: str | None,
                cadence: str | None, database: str | None, digest: str | None,
                notes: list[str]) -> Any:
    from testfleet.app.inprocess import plan_in_process
    from testfleet.cli._trigger import TriggerOptions, build_request
    from testfleet.runner.jobs import parse_shard, require_digest, select_stage_jobs

    request = build_request(project, project.root,
                            TriggerOptions(stages=(stage,), cadence=cadence), env={})
    made = plan_in_process(project, registry, request, database=database, stage=stage)
    notes.extend(made.notes)
    shown = None if made.frozen is None else made.frozen.relative_to(project.root).as_posix()
    require_digest(made.plan, digest, "this run's plan" + (f" ({shown})" if shown else ""))
    if made.frozen is None:
        notes.append(f"plan {made.plan.digest} (not frozen)")
    elif not made.reused:
        notes.append(f"plan {made.plan.digest} ({shown}): every shard of this run on this "
                     "machine runs from it")
    sel = select_stage_jobs(made.plan, stage, parse_shard(shard) if shard is not None else None)
    return sel, made.plan, shown


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


class _Tracker:
    """Aggregates the session's reports into one outcome per job file, sets the session's
    exit status by testfleet's rule, records history and writes the status file.
    Registered in the controller (or the only process) only, never in a pytest-xdist
    worker: the controller receives every worker's reports, so a file split over workers
    is still one execution with one outcome."""

    def __init__(self, job: _Job, config: pytest.Config) -> None:
        self.job = job
        self.config = config

    def _file(self, nodeid: str) -> str | None:
        """The repo-relative file of a report (its node id's path is relative to the rootdir)."""
        path = nodeid.split("::", 1)[0]
        return self.job.rel(Path(self.config.rootpath) / path) if path else None

    def _elsewhere(self, rel: str | None, nodeid: str) -> None:
        if rel is None or rel not in self.job.disabled:
            self.job.failed_elsewhere.add(rel or nodeid)

    @pytest.hookimpl(trylast=True)
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A job file that fails to import failed, whatever else its session did."""
        if not report.failed:
            return
        rel = self._file(report.nodeid)
        if rel is not None and rel in self.job.files:
            self.job.outcomes[rel] = "FAILED"
        else:
            self._elsewhere(rel, report.nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Every test report, from whichever process ran it: a file is FAILED when any of
        its reports failed, else PASSED once one was reported (a skip included)."""
        job = self.job
        rel = self._file(report.nodeid)
        if rel is None or rel not in job.files:
            if report.failed:
                self._elsewhere(rel, report.nodeid)
            return
        job.durations[rel] = job.durations.get(rel, 0.0) + float(report.duration)
        if report.failed:
            job.outcomes[rel] = "FAILED"
        else:
            job.outcomes.setdefault(rel, "PASSED")

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        job = self.job
        verdicts = {rel: job.outcomes.get(rel, "NOT_RUN") for rel in sorted(job.files)}
        status = _job_exit(job, verdicts, int(session.exitstatus))
        if status != session.exitstatus:
            session.exitstatus = status
        if job.record:
            _record(job, verdicts)
        _write_status(job, verdicts, status)


def _job_exit(job: _Job, verdicts: dict[str, Outcome], status: int) -> int:
    """pytest's exit status under ``testfleet run``'s rule: the job passes when every file
    passed or failed while quarantined; a job file that ran nothing fails it; an empty
    shard passes. Interruptions, internal and usage errors keep pytest's status."""
    from testfleet.results.quarantine import blocks

    codes = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED)
    if status not in codes:
        return status
    blocking = [rel for rel, outcome in verdicts.items()
                if blocks(outcome == "PASSED", rel in job.quarantined, outcome != "NOT_RUN")]
    held = sorted(rel for rel, outcome in verdicts.items()
                  if outcome == "FAILED" and rel in job.quarantined)
    for rel in held:
        job.notes.append(f"quarantined, does not fail the job: {rel} failed "
                         f"({job.quarantined[rel]})")
    missing = [rel for rel in blocking if verdicts[rel] == "NOT_RUN"]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        job.notes.append(f"{len(missing)} file(s) of job {job.job_id} ran no test (not collected? "
                         f"run pytest from the project root, or pass their directory): {shown}; "
                         "the job fails")
    if blocking or job.failed_elsewhere:
        return int(pytest.ExitCode.TESTS_FAILED) if status == pytest.ExitCode.OK else status
    return int(pytest.ExitCode.OK)


def _record(job: _Job, verdicts: dict[str, Outcome]) -> None:
    rows = [(rel, outcome, job.durations.get(rel, 0.0)) for rel, outcome in verdicts.items()
            if outcome != "NOT_RUN"]
    if not rows:
        return
    if job.partial:
        job.notes.append(f"nothing recorded in the history: {job.partial}, and a file's "
                         "verdict needs all of its tests")
        return
    try:
        from testfleet.runner.jobs import ci_run_id
        from testfleet.store import open_store
        from testfleet.store.durations import Execution
        from testfleet.vcs import current_commit

        commit = current_commit(job.root)
        ci_run = ci_run_id()
        now = time.time()
        with open_store(job.project, job.database) as store:
            store.record_executions([
                Execution(file=rel, stage=job.stage or "", backend=job.backend or "",
                          duration=round(d, 3), outcome=outcome, attempt=1, commit=commit,
                          ci_run_id=ci_run, timestamp=now)
                for rel, outcome, d in rows])
        job.notes.append(f"recorded {len(rows)} file(s) in the history of stage {job.stage}")
    except Exception as exc:  # history is fail-soft, exactly as in `testfleet run`
        job.notes.append(f"history database unavailable, nothing recorded: {exc}")


def _write_status(job: _Job, verdicts: dict[str, Outcome], status: int) -> None:
    from dataclasses import replace

    from testfleet import __version__
    from testfleet.reconcile.status import FileStatus, JobStatus, write_status
    from testfleet.runner.jobs import ci_attempt, ci_run_id, make_run_id

    sel = job.sel
    lane = job.stage or ""
    not_run = [rel for rel, outcome in verdicts.items() if outcome == "NOT_RUN"]
    interrupted = status == pytest.ExitCode.INTERRUPTED
    reason = ("the session was interrupted" if interrupted
              else f"{len(not_run)} file(s) ran no test" if not_run
              else f"part of the job's tests ran: {job.partial}" if job.partial
              else job.empty_reason)
    run_id = make_run_id(sel.job_id)
    doc = JobStatus(
        plan_digest=sel.plan_digest, job_id=sel.job_id, stage=sel.stage, variant=sel.variant,
        shard=sel.shard, shards=sel.shards, run_id=run_id, ci_run_id=ci_run_id(),
        empty=sel.empty, complete=not (interrupted or not_run or job.partial),
        exit_status=status, jobs=sel.jobs, runner="pytest", ci_attempt=ci_attempt(),
        files=tuple(FileStatus(rel, lane, outcome, 0 if outcome == "NOT_RUN" else 1,
                               rel in job.quarantined) for rel, outcome in verdicts.items()),
        plan_file=job.plan_file, started_at=job.started_at, finished_at=time.time(),
        testfleet_version=__version__)
    doc = replace(doc, reason=reason[:4000])
    path = job.status_file or (job.root / job.project.config.cache_dir / "runs" / run_id
                               / "job-status.json")
    try:
        write_status(path, doc)
    except OSError as exc:
        job.notes.append(f"cannot write the job status file {path}: {exc.strerror or exc}")
        return
    job.notes.append(f"job status written to {path}")


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    job = config.stash.get(_KEY, None)
    if job is None or job.stage is None:
        return None
    held = f", {len(job.quarantined)} quarantined" if job.quarantined else ""
    return [f"testfleet: job {job.job_id} (stage {job.stage}, {job.backend}): "
            f"{len(job.files)} file(s){held}, {len(job.disabled)} disabled (reported as skips)"]


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    job = config.stash.get(_KEY, None)
    if job is None or not job.notes:
        return
    from testfleet.textsafe import printable

    terminalreporter.section("testfleet")
    for note in job.notes:
        terminalreporter.write_line(printable(note))
