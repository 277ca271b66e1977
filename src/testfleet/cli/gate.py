"""``testfleet gate``: evaluate records against history, show history, untrust runs.

- ``gate evaluate --file FILE --record PATH [--write-baseline]``: what the runner
  does after a passing file, by hand (records produced by any tool). Exit 0 when the
  run is trusted (every coordinate PASS or INACTIVE), 1 when it is not, 2 on bad input.
- ``gate history --file FILE [--metric KEY] [--format table|json]``: stored values.
- ``gate untrust (--run-id ID | --ci-run-id N | --commit SHA)``: take runs out of
  every baseline (a bad merge that slipped through, a broken runner image).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from testfleet import color
from testfleet.cli import _verbosity
from testfleet.cli._common import database_option, human_format_option, project_from, single_line
from testfleet.cli._options import (
    file_option,
    format_option,
    output_option,
    stage_option,
)
from testfleet.errors import UsageError
from testfleet.textsafe import printable

if TYPE_CHECKING:
    from testfleet.documents.gate import GateHistoryDoc


@click.group("gate")
def command() -> None:
    """Evaluate metric records, show metric history, mark runs untrusted.

    \b
    Examples:
      testfleet gate history --file tests/unit/test_train_curve_loss.py --metric train/loss
      testfleet gate evaluate --file tests/unit/test_train_curve_loss.py --record records/
      testfleet gate untrust --commit 4f2a9c1
    """


def _test_path(project: Any, test: str) -> str:
    """``--file`` as the repo-relative posix path the history is keyed by."""
    path = Path(test)
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, project.root / path]
    for cand in candidates:
        try:
            rel = cand.resolve().relative_to(project.root.resolve())
        except ValueError:
            continue
        if cand.is_file():
            return rel.as_posix()
    raise UsageError(f"--file {test}: no such test file inside the project {project.root}")


def _registration(project: Any, file: str, suite: str | None) -> tuple[str, str]:
    """(backend, suite) of the file; ``--suite`` picks one when it registers several."""
    stages = project.config.stages
    if suite is not None:
        from testfleet.planning.lanes import find_lane

        lane = find_lane(project.config, suite)  # a variant's gate history: <stage>.<variant>
        if suite not in stages and lane is None:
            raise UsageError(f"--stage {suite}: unknown stage; valid: {', '.join(sorted(stages))}")
        return (lane.backend if lane is not None else stages[suite].backend), suite
    from testfleet.registry import collect

    registry = collect(project)
    found = sorted({(r.backend, r.suite) for r in registry.registrations if r.file == file})
    if len(found) == 1:
        return found[0]
    if not found:
        raise UsageError(f"{file} has no registration; pass --stage STAGE to name its stage")
    raise UsageError(f"{file} is registered on several stages "
                     f"({', '.join(s for _, s in found)}); pass --stage STAGE")


@command.command("evaluate")
@file_option("The test file that logged.", required=True, dest="test", old=("--test",))
@click.option("--record", "record", required=True, metavar="PATH",
              type=click.Path(path_type=Path),
              help="A record directory (every *.jsonl in it) or one record file.")
@click.option("--write-baseline", is_flag=True,
              help="Store this run, trusted iff every coordinate is PASS or INACTIVE.")
@stage_option("The stage whose history to use (default: the file's only registration).",
              dest="suite", old=("--suite",))
@click.option("--run-id", default=None, metavar="ID", callback=single_line,
              help="Run id to store (default: random).")
@click.option("--ci-run-id", default=None, metavar="ID", envvar="GITHUB_RUN_ID", callback=single_line,
              help="CI run id to store (default: $GITHUB_RUN_ID).")
@click.option("--commit", default=None, metavar="SHA", envvar="GITHUB_SHA", callback=single_line,
              help="Commit to store (default: $GITHUB_SHA).")
@database_option()
@human_format_option("testfleet.gate-evaluate/1")
@output_option()
@click.pass_context
def evaluate_cmd(ctx: click.Context, test: str, record: Path, write_baseline: bool,
                 suite: str | None, run_id: str | None,
                 ci_run_id: str | None, commit: str | None, database: str | None,
                 fmt: str) -> int:
    """Evaluate one test's records against its trusted history.

    Exit status: 0 trusted (PASS / INACTIVE), 1 FAIL or ERROR, 2 bad input.

    \b
    Examples:
      testfleet gate evaluate --file tests/unit/test_train_curve_loss.py --record records/
      testfleet gate evaluate --file tests/unit/test_train_curve_loss.py --record records/ \
          --write-baseline --stage stage-b-cpu
      testfleet gate evaluate --file tests/unit/test_train_curve_loss.py --record run.jsonl --format json -o verdict.json
    """
    from testfleet.gate.declarations import gate_calls_in_file
    from testfleet.gate.hook import evaluate_run
    from testfleet.gate.records import read_records

    project = project_from(ctx)
    file = _test_path(project, test)
    if not record.is_absolute():  # -C DIR: relative to DIR, as for plan, run and report
        record = ctx.find_root().obj.directory / record
    if not record.exists():
        raise UsageError(f"--record {record}: no such file or directory")
    calls, problems = gate_calls_in_file(project.root, file)
    if not calls and not problems:
        raise UsageError(f"{file} declares no register_ci_gate(...): nothing to evaluate")
    backend, stage = _registration(project, file, suite)
    records = read_records(record)
    if records.unreadable:  # an evaluation of part of the records would be a guess
        raise UsageError(f"--record {record}: " + "; ".join(records.unreadable[:10]))
    if records.out_of_range:
        # The runner turns these into ERROR verdicts; here, the records are the input.
        first, more = _verbosity.cap(records.out_of_range, 10)
        shown = "\n  ".join(first)
        raise UsageError(f"--record {record}: {len(records.out_of_range)} record line(s) hold "
                         f"a number no metric can hold:\n  {shown}"
                         + (f"\n  {_verbosity.more(more)}" if more > 0 else ""))
    result = evaluate_run(
        project, calls=calls, problems=problems, records=records, file=file,
        backend=backend, suite=stage, write_baseline=write_baseline,
        run_id=run_id or f"manual-{uuid.uuid4().hex[:12]}", ci_run_id=ci_run_id or None,
        commit=commit or None, database=database,
    )
    if fmt == "json":
        click.echo(json.dumps(result.to_json(), indent=2, sort_keys=True))
    else:
        for line in result.lines:
            click.echo(line)
    if write_baseline and not result.written:
        # Asked to write and nothing was: a CI step that seeds baselines must see that.
        click.echo("testfleet: gate evaluate --write-baseline: nothing was written "
                   "(see the lines above)", err=True)
        return 1
    if result.findings:
        return 1
    return 0 if result.trusted else 1


@command.command("history")
@file_option("The test file whose metric history to show.", required=True, dest="test",
             old=("--test",))
@click.option("--metric", "metric", default=None, metavar="KEY", help="Only this metric key.")
@click.option("--runs", default=20, show_default=True, type=click.IntRange(1, 100000),
              metavar="N", help="How many of the newest gated runs to show.")
@format_option(["table", "json"], "table for people, json for tools (testfleet.gate-history/1).")
@output_option()
@database_option()
@click.pass_context
def history_cmd(ctx: click.Context, test: str, metric: str | None, runs: int, fmt: str,
                database: str | None) -> int:
    """Stored values of a test's gated runs, newest first (trusted and untrusted).

    \b
    Examples:
      testfleet gate history --file tests/unit/test_train_curve_loss.py
      testfleet gate history --file tests/unit/test_train_curve_loss.py --metric train/loss --runs 5
      testfleet gate history --file tests/unit/test_train_curve_grad_norm.py --format json -o history.json
    """
    from testfleet.store.core import open_store
    from testfleet.store.errors import StoreMissing
    from testfleet.store.metric_store import MetricStore

    project = project_from(ctx)
    file = _test_path(project, test)
    try:
        store = open_store(project, database, readonly=True)  # a read never creates a database
    except StoreMissing:
        rows = []
    else:
        with store:
            rows = MetricStore(store).history(file, metric_key=metric, runs=runs)
    if fmt == "json":
        doc: GateHistoryDoc = {"schema": "testfleet.gate-history/1", "test": file,
                               "metric": metric, "values": [r.to_json() for r in rows]}
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    if not rows:
        click.echo(f"no gated runs stored for {file}" + (f" and metric {metric!r}" if metric else ""))
        return 0
    _history_table(file, rows)
    return 0


def _history_table(file: str, rows: list[Any]) -> None:
    from datetime import datetime, timezone

    from rich.table import Table
    from rich.text import Text

    console = color.console(soft_wrap=False, pipe_width=240)  # a pipe or file: never squeeze
    table = Table(title=Text(f"metric history of {file}"), title_justify="left")
    for col in ("run", "recorded (UTC)", "commit", "stage", "trusted", "metric", "steps", "step",
                "value"):
        table.add_column(col, justify="right" if col in ("step", "value") else "left",
                         no_wrap=col not in ("metric", "trusted"))
    for r in rows:
        when = datetime.fromtimestamp(r.recorded_at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")
        key = r.metric_key if len(r.metric_key) <= 60 else r.metric_key[:57] + "..."
        step = f"last ({r.actual_step})" if r.step == -1 else str(r.step)
        trusted = "yes" if r.trusted else ("no" + (f" ({r.untrusted_by})" if r.untrusted_by else ""))
        stage = f"{r.suite}{' ' + r.env_key if r.env_key else ''}"
        # Text(...) everywhere: stored strings are data, never rich markup.
        # ... and through the one escaping rule: a merged bundle's text is one inert line
        table.add_row(*(Text(printable(c)) for c in (
            r.run_id, when, (r.commit or "-")[:12], stage, trusted, key, r.steps_key, step,
            f"{r.value:.6g}")))
    console.print(table)


@command.command("untrust")
@click.option("--run-id", default=None, metavar="ID", help="A testfleet run id.")
@click.option("--ci-run-id", default=None, metavar="ID", help="A CI run id (all its gated files).")
@click.option("--commit", default=None, metavar="SHA",
              help="A commit (full SHA, or a prefix of at least 7 hex digits).")
@database_option()
@click.pass_context
def untrust_cmd(ctx: click.Context, run_id: str | None, ci_run_id: str | None,
                commit: str | None, database: str | None) -> int:
    """Take runs out of every baseline; prints how many runs changed.

    \b
    Examples:
      testfleet gate untrust --commit 4f2a9c1
      testfleet gate untrust --ci-run-id 9876543210
      testfleet gate untrust --run-id manual-0123456789ab
    """
    from testfleet.store.core import open_store
    from testfleet.store.metric_store import MetricStore

    given = [(n, v) for n, v in (("--run-id", run_id), ("--ci-run-id", ci_run_id),
                                 ("--commit", commit)) if v is not None]
    if len(given) != 1:
        raise UsageError("give exactly one of --run-id, --ci-run-id, --commit")
    name, value = given[0]
    if not value.strip():
        raise UsageError(f"{name} must not be empty")
    project = project_from(ctx)
    with open_store(project, database) as store:
        try:
            changed = MetricStore(store).mark_untrusted(run_id=run_id, ci_run_id=ci_run_id,
                                                        commit=commit)
        except ValueError as exc:
            raise UsageError(f"{name}: {exc}") from None
    click.echo(f"{changed} gated run{'s' if changed != 1 else ''} marked untrusted ({name} {value})")
    return 0
