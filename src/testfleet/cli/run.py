"""``testfleet run``: execute one job of a plan (or a stage shard, or one file) for real.

    testfleet run --plan plan.json --job stage-a-cpu-2-of-4 --junit junit.xml
    testfleet run --stage stage-a-cpu [--shard 2/4] [trigger flags]
    testfleet run --file tests/unit/test_x.py [--stage S]
    testfleet run ... --dry-run

Exit status: 0 every file passed (FLAKY counts; a quarantined file's failure does not
block) or the shard is empty, 1 a file failed or timed out, 2 usage/plan errors (a plan
that is not the expected one included), 130/143 when interrupted by SIGINT/SIGTERM.

Every run writes a job status file (``--status-file``, else ``<records>/job-status.json``)
that ``testfleet reconcile`` compares with the plan; ``--stage`` runs execute the run's
frozen plan (see ``app/inprocess.py``).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import click

from testfleet import color
from testfleet.cli import _verbosity
from testfleet.cli._common import database_option, history_location_problem, project_from
from testfleet.cli._options import RenamedOption
from testfleet.cli._trigger import TriggerOptions, build_request, trigger_options
from testfleet.errors import UsageError
from testfleet.textsafe import printable

OUTPUTS = ("auto", "plain", "github", "buildkite", "terminal")


@click.command("run")
@click.option("--plan", "plan_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
              metavar="FILE", help="A plan written by `testfleet plan --format json`.")
@click.option("--job", "job_id", default=None, metavar="ID", help="The plan job to run (with --plan).")
@click.option("--shard", default=None, metavar="I/N",
              help="With --stage: run shard I of N (planned in-process). Default: all shards.")
@trigger_options
@click.option("--max-attempts", type=click.IntRange(1, 10), default=None, metavar="N",
              help="Attempts per file; only failures matching [runner] retriable_patterns and "
                   "no fatal pattern are retried; timeouts never. Default: [runner] max_attempts.")
@click.option("--continue-on-error", is_flag=True,
              help="Run every file even after a failure (default: stop at the first failure, "
                   "unless the cadence bypasses fast-fail).")
@click.option("--junit", "junit", type=click.Path(path_type=Path, dir_okay=False), default=None,
              metavar="FILE", help="Write JUnit XML to FILE (atomically; also after an "
                                   "interruption).")
@database_option("Every execution is recorded there (unless --no-history).")
@click.option("--no-history", is_flag=True, help="Do not record executions in the history database.")
@click.option("--records", type=click.Path(path_type=Path, file_okay=False), default=None,
              metavar="DIR", help="Where per-file, per-attempt record directories go "
                                  "(default: <cache_dir>/runs/<run id>).")
@click.option("--display", "output", type=click.Choice(OUTPUTS), default="auto", show_default=True,
              cls=RenamedOption, old=("--output",),
              help="Live output style: GitHub Actions groups, Buildkite sections, a terminal "
                   "progress display, or a plain log (auto picks from the environment).")
@click.option("--dry-run", is_flag=True, help="Print what would run (files, estimates, timeouts) "
                                              "and exit.")
@click.option("--plan-digest", "plan_digest", envvar="TESTFLEET_PLAN_DIGEST", default=None,
              metavar="DIGEST", help="Run only from the plan with this digest, else refuse "
                                     "(exit 2). With --plan: the plan file's; with --stage: the "
                                     "one the first shard printed. Default: "
                                     "$TESTFLEET_PLAN_DIGEST.")
@click.option("--status-file", "status_file", type=click.Path(path_type=Path, dir_okay=False),
              default=None, metavar="FILE",
              help="Write the job status file to FILE (for `testfleet reconcile`); default: "
                   "<records>/job-status.json.")
@click.option("--rescue", "rescue_path", type=click.Path(path_type=Path, dir_okay=False),
              default=None, metavar="FILE",
              help="With --plan: --job names a rescue job of this rescue file (written by "
                   "`testfleet reconcile --rescue-out`): run the files its planned job's runner "
                   "never reported, once, with that job's settings.")
@click.option("--rescue-digest", "rescue_digest", envvar="TESTFLEET_RESCUE_DIGEST", default=None,
              metavar="DIGEST", help="With --rescue: refuse a rescue file whose digest is not "
                                     "DIGEST (exit 2). Default: $TESTFLEET_RESCUE_DIGEST.")
@click.option("--queue", "queue", is_flag=True,
              help="Run as one of a queue lane's runners (execution = \"queue\"): claim files "
                   "from the lane's PostgreSQL queue until every file is done. A queue lane's "
                   "jobs run this way without it; with it, a lane in shard mode is refused.")
@click.pass_context
def command(ctx: click.Context, plan_path: Path | None, job_id: str | None, shard: str | None,
            trigger_options: TriggerOptions, max_attempts: int | None, continue_on_error: bool,
            junit: Path | None, database: str | None, no_history: bool, records: Path | None,
            output: str, dry_run: bool, plan_digest: str | None,
            status_file: Path | None, rescue_path: Path | None, rescue_digest: str | None,
            queue: bool) -> int:
    """Run one job of a plan (or a stage shard, or registered files): one process per file,
    timeouts that kill the whole process tree, classified retries, fast-fail, live output,
    JUnit, GitHub step summary, history and metric gate.

    \b
    Every path executes one plan per CI run: --plan runs a job of a plan file; --stage
    plans in process once per run and machine and freezes that plan, so later shards on
    the machine run from it (whatever history was recorded meanwhile). --plan-digest makes
    any path refuse a plan that is not the expected one.

    \b
    Examples:
      testfleet run --plan plan.json --job stage-a-cpu-1-of-4 --junit junit.xml
      testfleet run --stage stage-a-cpu --shard 2/4
      testfleet run --stage stage-b-cpu --cadence nightly --display plain
      testfleet run --file tests/unit/test_rollout_buffer.py --dry-run
      testfleet run --plan plan.json --stage stage-c-4-gpu-h200 --queue
      testfleet run --plan plan.json --rescue rescue.json --job stage-a-cpu-2-of-4-rescue
    """
    from testfleet.runner.jobs import build_spec
    from testfleet.runner.settings import run_options

    project = project_from(ctx)
    base: Path = ctx.find_root().obj.directory
    opts = trigger_options
    status_path = None if status_file is None else (
        status_file if status_file.is_absolute() else base / status_file)
    try:
        if plan_path is not None and queue and not job_id and len(opts.stages) == 1:
            plan_path, sel, plan, plan_file = None, *_select_queue_stage(
                project, base, plan_path, opts.stages[0], (plan_digest or "").strip() or None)
        else:
            sel, plan, plan_file = _select(project, base, opts, plan_path, job_id, shard,
                                           database, (plan_digest or "").strip() or None,
                                           rescue_path, (rescue_digest or "").strip() or None)
        settings = _queue_lane(project, plan, sel, queue, bool(opts.files), database)
        if settings is not None:
            from testfleet.queue.lane import lane_items

            sel = dataclasses.replace(sel, items=lane_items(plan, sel.lane))
    except UsageError as exc:
        if status_path is not None and not dry_run:
            _refused(status_path, opts, plan_path, job_id, shard, str(exc))
        raise
    policy = sel.policy
    if max_attempts is None:  # the command line, else the plan job's, else the config's
        max_attempts = sel.max_attempts
    options = run_options(project.config, max_attempts=max_attempts, stage=sel.stage,
                          variant=sel.variant,
                          continue_on_error=continue_on_error,
                          bypass_fastfail=bool(policy.get("bypass_fastfail", False)))
    if project.config_path.name == "pyproject.toml":  # where a dormancy line would go
        options = dataclasses.replace(options, config_table=f"tool.testfleet.{options.config_table}")
    spec = build_spec(project, sel, options,
                      records=None if records is None else (records if records.is_absolute()
                                                            else base / records))
    if settings is not None and not dry_run:
        status_path = status_path or spec.records_dir / "job-status.json"
        return _execute_queue(project, spec, settings, junit=junit, base=base,
                              database=database, history=not no_history,
                              write_baseline=bool(policy.get("write_baseline")), output=output,
                              sel=sel, status_path=status_path, plan_file=plan_file)
    if sel.empty:
        from testfleet.runner.jobs import empty_shard_message

        message = empty_shard_message(sel, plan)
        if dry_run:
            click.echo(f"testfleet: {message}")
            return 0
    elif dry_run:
        _print_dry_run(spec)
        return 0
    if records is None:  # the default records (and history) go under cache_dir
        from testfleet.cachedir import cache_dir_problem

        problem = cache_dir_problem(project.root, project.config.cache_dir)
        if problem is not None:
            raise UsageError(f"{problem}; nothing was run")
    # Checked up front: otherwise every file would "fail" (exit 1) on a usage error.
    try:
        spec.records_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        what = (f"--records {records}" if records is not None
                else f"record directory {spec.records_dir} (under cache_dir)")
        raise UsageError(f"{what}: cannot create it ({exc.strerror or exc}); "
                         "nothing was run") from None
    junit_path = None if junit is None else (junit if junit.is_absolute() else base / junit)
    status_path = status_path or spec.records_dir / "job-status.json"
    if sel.empty:
        return _run_empty(sel, spec, message, status_path, plan_file, junit_path)
    from testfleet.runner.extra import require_runner

    try:  # an install without the runner extra says so before anything runs
        require_runner({spec.settings.command_for(item) for item in spec.items})
    except UsageError as exc:
        _refused(status_path, opts, plan_path, job_id, shard, str(exc))
        raise
    return _execute(project, spec, junit_path=junit_path, database=database,
                    history=not no_history, write_baseline=bool(policy.get("write_baseline")),
                    output=output, sel=sel, status_path=status_path, plan_file=plan_file)


def _select_queue_stage(project: Any, base: Path, plan_path: Path, stage: str,
                        digest: str | None) -> tuple[Any, Any, str | None]:
    """``--plan P --stage S --queue``: a runner of lane S of a plan file, whichever of its
    jobs the CI engine started this one as."""
    from testfleet.planning.model import load_plan
    from testfleet.runner.jobs import require_digest, select_stage_jobs

    path = plan_path if plan_path.is_absolute() else base / plan_path
    plan = load_plan(path)
    require_digest(plan, digest, f"plan file {path}")
    sel = select_stage_jobs(plan, stage, None)
    if digest is None:
        from testfleet.registry import collect
        from testfleet.runner.planguard import require_registered

        require_registered(project.config, collect(project, gates=False).registrations,
                           plan, sel.jobs, f"plan file {plan_path}")
    return sel, plan, str(plan_path)


def _queue_lane(project: Any, plan: Any, sel: Any, asked: bool, files: bool,
                database: str | None) -> Any:
    """The lane's queue settings when this run is one of its runners, else None. Queue mode
    needs the shared PostgreSQL history database; anything else is refused (exit 2) with
    what to do."""
    from testfleet.queue.lane import queue_of

    doc = None if files else queue_of(plan, sel.lane)
    if doc is None:
        if asked:
            raise UsageError(f"--queue: lane {sel.lane} of plan {plan.digest[:19]}… runs in shard "
                             "mode (its stage does not set execution = \"queue\", or a fork's "
                             "pull request planned it); run it without --queue")
        return None
    if plan.policy.get("fork"):
        raise UsageError(f"lane {sel.lane}: a fork's pull request never touches the shared "
                         "database, so its plan has no queue lane; this plan says fork and "
                         "queue at once (edited?); nothing was run")
    from testfleet.queue.worker import QueueSettings
    from testfleet.store import StoreError, resolve_target

    try:
        target = resolve_target(project, database)
    except StoreError as exc:
        raise UsageError(f"queue lane {sel.lane}: {exc}") from None
    if target.dialect != "postgresql":
        where = ("no database is configured, so the history is the embedded SQLite file "
                 f"{target.display}" if target.default else
                 f"the history database ({target.origin}) is SQLite: {target.display}")
        raise UsageError(
            f"lane {sel.lane} runs in queue mode (execution = \"queue\"), which needs the "
            f"team's PostgreSQL history database; {where}. Give it with --database "
            "postgresql://... or TESTFLEET_DATABASE_URL (after 'testfleet db upgrade'), or set "
            f"execution = \"shards\" on the stage; nothing was run")
    return QueueSettings(plan_digest=plan.digest, lane=sel.lane,
                         lease_seconds=float(doc["lease_seconds"]),
                         infra_retries=int(doc["infra_retries"]),
                         pull_request=str(plan.policy.get("event", "")).startswith("pull_request"))


def _trigger_given(opts: TriggerOptions) -> bool:
    return any(getattr(opts, name) for name in (
        "event", "labels", "cadence", "schedule", "fork", "match_all_labels", "changed_files",
        "diff_base", "files", "stages", "include_disabled", "github", "draft"))


def _select(project: Any, base: Path, opts: TriggerOptions, plan_path: Path | None,
            job_id: str | None, shard: str | None, database: str | None,
            digest: str | None, rescue_path: Path | None = None,
            rescue_digest: str | None = None) -> tuple[Any, Any, str | None]:
    """(the selection, the plan it comes from, the plan file's path as shown)."""
    from testfleet.runner.jobs import require_digest, select_plan_job, select_rescue_job

    if rescue_path is not None and plan_path is None:
        raise UsageError("--rescue needs --plan (the plan the rescue wave is of) and --job")

    if plan_path is not None:
        if _trigger_given(opts) or shard is not None:
            raise UsageError("--plan runs a job exactly as planned; trigger flags, --stage, "
                             "--file and --shard do not apply")
        if not job_id:
            raise UsageError("--plan needs --job ID (the plan's job ids are in its 'jobs')")
        from testfleet.planning.model import load_plan

        path = plan_path if plan_path.is_absolute() else base / plan_path
        plan = load_plan(path)
        require_digest(plan, digest, f"plan file {path}")
        if rescue_path is not None:
            from testfleet.reconcile.rescue import load_rescue, require_rescue

            where = rescue_path if rescue_path.is_absolute() else base / rescue_path
            rescue = load_rescue(where)
            require_rescue(rescue, plan, rescue_digest, f"rescue file {rescue_path}")
            sel = select_rescue_job(plan, rescue, job_id)
        else:
            sel = select_plan_job(plan, job_id)
        if digest is None:  # nothing pins the plan: it runs only what this project plans
            from testfleet.registry import collect
            from testfleet.runner.planguard import require_registered

            require_registered(project.config, collect(project, gates=False).registrations,
                               plan, (sel.rescue.origin,) if sel.rescue else sel.jobs,
                               f"plan file {plan_path}")
        return sel, plan, str(plan_path)
    if job_id is not None:
        raise UsageError("--job needs --plan")
    if not opts.stages and not opts.files:
        raise UsageError("say what to run: --plan FILE --job ID, --stage S [--shard I/N] "
                         "or --file PATH")
    if len(opts.stages) > 1:
        raise UsageError("run one stage at a time (got --stage "
                         + ", --stage ".join(opts.stages) + ")")
    return _plan_in_process(project, base, opts, shard, database, digest)


def _plan_in_process(project: Any, base: Path, opts: TriggerOptions, shard: str | None,
                     database: str | None, digest: str | None) -> tuple[Any, Any, str | None]:
    from testfleet.app.inprocess import plan_in_process
    from testfleet.runner.jobs import (
        parse_shard,
        require_digest,
        select_file_jobs,
        select_stage_jobs,
    )

    if shard is not None and (opts.files or not opts.stages):
        raise UsageError("--shard needs --stage (and not --file)")
    wanted = parse_shard(shard) if shard is not None else None
    request = build_request(project, base, opts)
    registry = _collect(project)
    stage = opts.stages[0] if opts.stages else None
    made = plan_in_process(project, registry, request, database=database, stage=stage,
                           history_problem=history_location_problem(project, database))
    for note in made.notes:
        _verbosity.note(printable(note))
    plan = made.plan
    shown = None if made.frozen is None else _relative(made.frozen, project.root)
    require_digest(plan, digest, "this run's plan" + (f" ({shown})" if shown else ""))
    if made.frozen is None:
        _verbosity.note(f"plan {plan.digest} (not frozen)")
    elif not made.reused:
        _verbosity.note(f"plan {plan.digest} ({shown}); every shard of this run on this machine "
                        "runs from it (--plan-digest pins it elsewhere)")
    if opts.files:
        return select_file_jobs(plan, stage), plan, shown
    assert stage is not None
    return select_stage_jobs(plan, stage, wanted), plan, shown


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _refused(status_path: Path, opts: TriggerOptions, plan_path: Path | None,
             job_id: str | None, shard: str | None, why: str) -> None:
    """A job that was refused still reports, when it was told where: reconciliation then
    names the reason instead of an unreported job."""
    from testfleet import __version__
    from testfleet.reconcile.status import JobStatus, write_status
    from testfleet.runner.jobs import ci_attempt, ci_run_id, make_run_id

    stage = opts.stages[0] if opts.stages else ""
    name = job_id or (f"{stage}-{shard.replace('/', '-of-')}" if stage and shard else stage)
    name = name or "unknown-job"
    now = time.time()
    status = JobStatus(
        plan_digest="", job_id=name, stage=stage, variant="", shard=0, shards=0,
        run_id=make_run_id(name), ci_run_id=ci_run_id(), empty=False, complete=False,
        exit_status=2, jobs=(job_id,) if job_id else (), ci_attempt=ci_attempt(),
        reason=f"refused: {why}"[:4000], plan_file=None if plan_path is None else str(plan_path),
        started_at=now, finished_at=now, testfleet_version=__version__)
    try:
        write_status(status_path, status)
    except OSError as exc:
        click.echo(f"testfleet: warning: cannot write the status file {status_path} "
                   f"({exc.strerror or exc})", err=True)


def _run_empty(sel: Any, spec: Any, message: str, status_path: Path, plan_file: str | None,
               junit_path: Path | None) -> int:
    """A shard with no file: say so everywhere CI looks, and pass."""
    import os

    from testfleet.reconcile.status import write_status
    from testfleet.runner import status

    click.echo(f"testfleet: {printable(message)}", err=True)
    try:
        write_status(status_path, status.empty(sel, spec.run_id, message, plan_file=plan_file))
    except OSError as exc:
        raise UsageError(f"cannot write the status file {status_path} "
                         f"({exc.strerror or exc})") from None
    if junit_path is not None:
        from testfleet.runner.executor import partial_result
        from testfleet.runner.junit import write_junit

        try:
            write_junit(partial_result(spec, [], time.time(), time.monotonic()), junit_path)
        except OSError as exc:
            raise UsageError(f"--junit {junit_path}: cannot write it "
                             f"({exc.strerror or exc})") from None
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        from testfleet.mdtext import md

        try:
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(f"### testfleet run {md(sel.job_id)}: empty shard\n\n{md(message)}\n\n")
        except OSError as exc:
            click.echo(f"testfleet: warning: cannot write $GITHUB_STEP_SUMMARY: {exc}", err=True)
    return 0


def _collect(project: Any) -> Any:
    """The registry to plan in process. A tree with registration errors is not refused
    (#12: errors are fates): the rejected calls get the fate ``invalid`` in the plan and
    are named here, the valid tests run; `plan` and `check` are the steps that fail on them."""
    from testfleet.registry import collect

    registry = collect(project, gates=False)
    errors = [f for f in registry.findings if f.severity == "error"]
    if errors:
        shown, left_out = _verbosity.cap(errors)
        for f in shown:
            click.echo(f.render(), err=True)
        more = f" (first {len(shown)} shown; -v shows them all)" if left_out else ""
        click.echo(f"testfleet: warning: the tree has {len(errors)} registration error(s){more}; "
                   "their registrations are left out as 'invalid' ('testfleet check' lists them)",
                   err=True)
    return registry


def _print_dry_run(spec: Any) -> None:
    import shlex

    from rich.markup import escape
    from rich.table import Table

    from testfleet.runner.executor import command_argv
    from testfleet.runner.summary import fmt_seconds

    s = spec.settings
    table = Table(title=f"testfleet run {spec.job_id} (dry run): stage {s.stage} ({s.backend}), "
                        f"{len(spec.items)} file{'s' if len(spec.items) != 1 else ''}, max {spec.options.max_attempts} attempt(s), "
                        f"fast-fail {'on' if spec.options.fast_fail else 'off'}",
                  title_justify="left")
    session: dict[int, str] = {}
    if s.batch:  # session mode: which pytest session each file runs in
        from testfleet.runner.session import plan_groups

        for n, group in enumerate(plan_groups(spec.items, s), 1):
            for i in group:
                session[i] = f"session {n}" if len(group) > 1 else "alone"
    for col in ("#", "file", "estimate", "timeout", "command", *(("batch",) if s.batch else ())):
        table.add_column(col, overflow="fold")
    for i, item in enumerate(spec.items, 1):
        argv = command_argv(s.command_for(item), item.file, s.extra_args)
        table.add_row(str(i), escape(printable(item.file)), fmt_seconds(item.estimate),
                      fmt_seconds(s.timeout_for(item.estimate)),
                      escape(printable(shlex.join(["python" if argv[0] == sys.executable
                                                   else argv[0], *argv[1:]]))),
                      *((session[i - 1],) if s.batch else ()))
    color.console().print(table)


def _placeholders(spec: Any, sel: Any, junit_path: Path | None, status_path: Path,
                  plan_file: str | None) -> None:
    """Before anything runs, a red JUnit file and a "started, not finished" status: a
    runner killed before its first checkpoint must not leave an old (or no) file that
    reads as green. If one cannot be written, stop before running anything: CI would
    find nothing after the whole job."""
    from testfleet.reconcile.status import write_status
    from testfleet.runner import status
    from testfleet.runner.executor import partial_result

    if junit_path is not None:
        from testfleet.runner.junit import write_junit

        try:
            write_junit(partial_result(spec, [], time.time(), time.monotonic()), junit_path)
        except OSError as exc:
            raise UsageError(f"--junit {junit_path}: cannot write it "
                             f"({exc.strerror or exc}); nothing was run") from None
    try:
        write_status(status_path, status.placeholder(spec, sel, plan_file=plan_file,
                                                     started_at=time.time()))
    except OSError as exc:
        raise UsageError(f"cannot write the status file {status_path} "
                         f"({exc.strerror or exc}); nothing was run") from None


def _finish(job: Any, final: Any, status_path: Path, reporter: Any, hooks: Any) -> bool:
    """The job's end, in shard and queue mode alike: its final status (False when that
    file could not be written, which the caller turns into a failed exit), the step
    summary, and the hooks closed."""
    from testfleet.reconcile.status import write_status
    from testfleet.runner.summary import append_step_summary

    written = True
    try:
        write_status(status_path, final)
    except OSError as exc:
        reporter.warning(f"cannot write the status file {status_path}: {exc}")
        written = False
    try:
        append_step_summary(job)
    except OSError as exc:
        reporter.warning(f"cannot write $GITHUB_STEP_SUMMARY: {exc}")
    hooks.close()
    return written


def _execute(project: Any, spec: Any, *, junit_path: Path | None, database: str | None,
             history: bool, write_baseline: bool, output: str, sel: Any, status_path: Path,
             plan_file: str | None) -> int:
    from testfleet.runner import status
    from testfleet.runner.hooks import RunHooks
    from testfleet.runner.interrupt import Interrupt
    from testfleet.runner.live import make_reporter
    from testfleet.runner.loop import execute

    reporter = make_reporter(output)
    hooks = RunHooks(project, warn=reporter.warning, database=database, record_history=history,
                     junit=junit_path, write_baseline=write_baseline)
    interrupt = Interrupt()
    hooks.interrupted = lambda: interrupt.signum is not None
    try:
        with interrupt.handling():
            _placeholders(spec, sel, junit_path, status_path, plan_file)
            job = execute(spec, reporter=reporter, interrupt=interrupt, hooks=hooks)
            # The file on disk would still be the red placeholder (or a checkpoint): a
            # green exit beside it would contradict what CI reads.
            junit_lost = junit_path is not None and not hooks.write_junit(job)
            code = job.exit_code
            if junit_lost and code == 0:
                code = 1
            status_lost = not _finish(job, status.final(job, sel, plan_file=plan_file,
                                                        exit_status=code),
                                      status_path, reporter, hooks)
    finally:
        interrupt.close()
    sys.stdout.flush()
    if job.interrupted_by is not None:
        click.echo(f"testfleet: interrupted by signal {job.interrupted_by}; partial results "
                   "written", err=True)
    if junit_lost and job.exit_code == 0:
        click.echo(f"testfleet: every file passed, but the final JUnit file {junit_path} could "
                   "not be written (see the warning above); exit 1", err=True)
    if status_lost and code == 0:
        click.echo(f"testfleet: every file passed, but the final status file {status_path} "
                   "could not be written (see the warning above); exit 1", err=True)
        code = 1
    return code


def _execute_queue(project: Any, spec: Any, settings: Any, *, junit: Path | None, base: Path,
                   database: str | None, history: bool, write_baseline: bool, output: str,
                   sel: Any, status_path: Path, plan_file: str | None) -> int:
    """One runner of a queue lane: statuses and JUnit as in shard mode, listing the files
    whose report this runner made."""
    from testfleet.queue.worker import exit_status, run_queue
    from testfleet.runner import status
    from testfleet.runner.hooks import RunHooks
    from testfleet.runner.interrupt import Interrupt
    from testfleet.runner.live import make_reporter
    from testfleet.store import open_store

    junit_path = None if junit is None else (junit if junit.is_absolute() else base / junit)
    try:
        spec.records_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"record directory {spec.records_dir}: cannot create it "
                         f"({exc.strerror or exc}); nothing was run") from None
    store = open_store(project, database)  # schema too old or unreachable: exit 2, says why
    if history and settings.pull_request:
        # the runner's history database is the shared one here: a pull request's outcomes
        # stay in the queue tables and never enter the history
        _verbosity.note("a pull request's queue run records no history (its outcomes stay in "
                        "the queue tables)")
        history = False
    reporter = make_reporter(output)
    hooks = RunHooks(project, warn=reporter.warning, database=database, record_history=history,
                     junit=junit_path, write_baseline=write_baseline)
    interrupt = Interrupt()
    hooks.interrupted = lambda: interrupt.signum is not None
    click.echo(f"testfleet: queue runner {settings.runner} of lane {settings.lane} (plan "
               f"{settings.plan_digest[:19]}…, {len(spec.items)} planned file(s), lease "
               f"{settings.lease_seconds:g}s)", err=True)
    try:
        with interrupt.handling(), store:
            # nothing claimed yet: the placeholders list no file
            _placeholders(dataclasses.replace(spec, items=()), sel, junit_path, status_path,
                          plan_file)
            run = run_queue(spec, settings, store, reporter=reporter, interrupt=interrupt,
                            hooks=hooks)
            code = exit_status(run)
            if junit_path is not None and not hooks.write_junit(run.job) and code == 0:
                code = 1
            final = status.final(run.job, sel, plan_file=plan_file, exit_status=code)
            if run.database_lost or run.job.interrupted_by is not None:
                why = (f"queue database lost: {run.database_lost}" if run.database_lost
                       else final.reason)
                final = dataclasses.replace(final, complete=False, reason=why[:4000])
            if not _finish(run.job, final, status_path, reporter, hooks):
                code = code or 1
    finally:
        interrupt.close()
    sys.stdout.flush()
    click.echo(f"testfleet: {_queue_summary(run, settings)}", err=True)
    if run.database_lost:
        click.echo(f"testfleet: error: the queue database did not come back: "
                   f"{printable(run.database_lost)}; stopped claiming. A file this runner held "
                   "goes back to another runner when its lease expires; nothing it did not "
                   "report was recorded", err=True)
    return code


def _queue_summary(run: Any, settings: Any) -> str:
    if run.empty_on_arrival:
        return (f"the queue of lane {settings.lane} was empty when this runner arrived: every "
                "file already has its report; nothing to run, exit 0")
    parts = [f"reported {run.ran} file(s) of lane {settings.lane}"]
    if run.requeued:
        parts.append(f"{len(run.requeued)} sent to another runner (infrastructure failure)")
    if run.discarded:
        parts.append(f"{len(run.discarded)} outcome(s) discarded (lease lost: "
                     + ", ".join(run.discarded[:3]) + ")")
    if run.released:
        parts.append(f"{len(run.released)} put back when interrupted")
    if run.stopped:
        parts.append(f"stopped: {run.stopped}")
    return "; ".join(parts)
