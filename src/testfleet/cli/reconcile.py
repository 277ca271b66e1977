"""``testfleet reconcile``: the last step of a CI run; the plan against what its jobs reported.

    testfleet reconcile --plan plan.json testfleet-status/
    testfleet reconcile --plan plan.json --expect-digest sha256:... --format json s1.json s2.json
    testfleet reconcile --plan plan.json --rescue-out rescue.json testfleet-status/
    testfleet reconcile --plan plan.json --rescue rescue.json testfleet-status/

Exit status: 0 every planned job reported and every planned (stage, file) ran exactly once
(a plan without jobs: nothing ran), or, with --rescue-out, every problem is a lost file the
rescue wave will run; 1 otherwise, with the list; 2 bad input (a plan, status or rescue file
that cannot be read, a plan or rescue wave that is not the expected one).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from testfleet.cli import _verbosity
from testfleet.cli._common import database_option, generated_workflow
from testfleet.cli._options import META_OUTPUT, format_option, output_option
from testfleet.errors import UsageError
from testfleet.textsafe import printable

if TYPE_CHECKING:
    from testfleet.reconcile.status import JobStatus

FORMATS = ("table", "json", "markdown")


@click.command("reconcile")
@click.option("--plan", "plan_path", type=click.Path(path_type=Path, dir_okay=False),
              required=True, metavar="FILE", help="The plan the run executed (its plan file; for "
                                                  "--stage runs, the frozen plan their status "
                                                  "files name).")
@click.option("--expect-digest", "expect", envvar="TESTFLEET_PLAN_DIGEST", default=None,
              metavar="DIGEST", help="Refuse a plan file whose digest is not DIGEST (exit 2). "
                                     "Default: $TESTFLEET_PLAN_DIGEST.")
@format_option(list(FORMATS), "table: a listing; json: testfleet.reconcile/1; markdown: the "
                              "step summary.")
@output_option()
@database_option("A queue lane's reports are read from there (queue mode, PostgreSQL).")
@click.option("--rescue-out", "rescue_out", envvar="TESTFLEET_RESCUE_OUT", default=None,
              type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="The first reconcile of a run: write the rescue wave (the files whose runner "
                   "was lost, one rescue job per lost shard) to FILE, and under GitHub Actions "
                   "the step outputs has_rescue, rescue (per stage lane, shaped like the plan's "
                   "stages output) and rescue_digest. Exits 0 when every problem is a file the "
                   "rescue runs. Default: $TESTFLEET_RESCUE_OUT.")
@click.option("--workflow", "workflow", envvar="TESTFLEET_WORKFLOW", default=None,
              type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="With --rescue-out: the generated workflow that runs the rescue; its jobs "
                   "that run several stages read one rescue matrix, keyed as their stage "
                   "matrix is. Default: $TESTFLEET_WORKFLOW.")
@click.option("--rescue-pipeline", "rescue_pipeline", default=None,
              type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="With --rescue-out, when the run goes on to a rescue wave: write its "
                   "Buildkite steps (and the reconcile after them) to FILE, for "
                   "'buildkite-agent pipeline upload'; otherwise FILE is left absent.")
@click.option("--rescue", "rescue_path", envvar="TESTFLEET_RESCUE", default=None,
              type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="The reconcile after a rescue wave: its rescue file. Every planned file must "
                   "have exactly one final report (shard's or rescue's) and none may fail. "
                   "Default: $TESTFLEET_RESCUE.")
@click.argument("statuses", nargs=-1, type=click.Path(path_type=Path), metavar="STATUS...")
@click.pass_context
def command(ctx: click.Context, plan_path: Path, expect: str | None, fmt: str,
            database: str | None, rescue_out: Path | None, workflow: Path | None,
            rescue_pipeline: Path | None, rescue_path: Path | None,
            statuses: tuple[Path, ...]) -> int:
    """Compare a plan with the job status files of its run: every planned job reported,
    every planned (stage, file) ran exactly once, nothing ran that was not planned.

    Each STATUS is a status file or a directory searched recursively for them (every
    *.json whose schema is testfleet.job-status/1; other JSON files are skipped). Under
    GitHub Actions the Markdown goes to $GITHUB_STEP_SUMMARY and each problem becomes an
    ::error annotation.

    \b
    Examples:
      testfleet reconcile --plan plan.json testfleet-status/
      testfleet reconcile --plan plan.json --format json -o reconcile.json testfleet-status/
      testfleet reconcile --plan plan.json --expect-digest sha256:0f3a... s1.json s2.json
      testfleet reconcile --plan plan.json --rescue-out rescue.json testfleet-status/
      testfleet reconcile --plan plan.json --rescue rescue.json testfleet-status/
    """
    import json

    from testfleet.planning.model import load_plan
    from testfleet.reconcile.compare import reconcile
    from testfleet.reconcile.render import (
        github_annotations,
        render_markdown,
        render_text,
        to_json,
    )
    from testfleet.runner.jobs import require_digest

    base: Path = ctx.find_root().obj.directory
    path = plan_path if plan_path.is_absolute() else base / plan_path
    plan = load_plan(path)
    require_digest(plan, (expect or "").strip() or None, f"plan file {plan_path}")
    if not statuses:
        raise UsageError("name the status files (or directories holding them) to reconcile")
    if rescue_out is not None and rescue_path is not None:
        raise UsageError("--rescue-out makes the rescue wave, --rescue reconciles it: give one")
    rescue = None
    if rescue_path is not None:
        from testfleet.reconcile.rescue import load_rescue, require_rescue

        rescue = load_rescue(rescue_path if rescue_path.is_absolute() else base / rescue_path)
        require_rescue(rescue, plan, None, f"rescue file {rescue_path}")
    found, notes = read_statuses([p if p.is_absolute() else base / p for p in statuses])
    for note in notes:
        _verbosity.note(printable(note))
    result = reconcile(plan, found, _queue_reports(ctx, plan, database), rescue)
    going_on = False
    if rescue_pipeline is not None and rescue_out is None:
        raise UsageError("--rescue-pipeline goes with --rescue-out (the wave it uploads)")
    if rescue_out is not None:
        groups: dict[str, list[str]] = {}
        if workflow is not None:  # its jobs that run several stages read one rescue matrix
            fit = generated_workflow(workflow if workflow.is_absolute() else base / workflow,
                                     "--workflow")
            groups = {key: lanes for key, (lanes, _) in fit.groups.items()}
        going_on, wave = _write_rescue(plan, found, result,
                                       rescue_out if rescue_out.is_absolute() else base / rescue_out,
                                       groups)
        if rescue_pipeline is not None:
            _write_pipeline(plan, wave if going_on else None, rescue_pipeline
                            if rescue_pipeline.is_absolute() else base / rescue_pipeline)
    if fmt == "json":
        click.echo(json.dumps(to_json(result), indent=2, ensure_ascii=False))
    elif fmt == "markdown":
        click.echo(render_markdown(result), nl=False)
    else:
        click.echo(render_text(result), nl=False)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in github_annotations(result):  # never into the document (-o: not stdout)
            if going_on:  # not this run's verdict: the rescue wave's reconcile is
                line = line.replace("::error ", "::warning ", 1)
            click.echo(line, err=fmt == "json" or META_OUTPUT in ctx.meta)
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            try:
                with open(summary, "a", encoding="utf-8") as fh:
                    fh.write(render_markdown(result))
            except OSError as exc:
                click.echo(f"testfleet: warning: cannot write $GITHUB_STEP_SUMMARY: {exc}",
                           err=True)
    return 0 if result.ok or going_on else 1


def _write_pipeline(plan: Any, wave: Any, path: Path) -> None:
    """The rescue wave's Buildkite steps, or no file when there is nothing to upload."""
    import json

    from testfleet.integrations.buildkite import rescue_pipeline

    try:
        if wave is None or not wave.jobs:
            path.unlink(missing_ok=True)
            return
        path.write_text(json.dumps(rescue_pipeline(plan, wave), indent=2) + "\n",
                        encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--rescue-pipeline {path}: cannot write it ({exc.strerror or exc})"
                         ) from None


def _write_rescue(plan: Any, found: list[JobStatus], result: Any, path: Path,
                  groups: dict[str, list[str]]) -> tuple[bool, Any]:
    """Write the rescue wave (and its GitHub step outputs); (whether the run goes on to it
    because every problem found is a file it runs, the wave)."""
    import json

    from testfleet.integrations.plan_formats import github_output_text
    from testfleet.reconcile.compare import rescue_covers
    from testfleet.reconcile.rescue import rescue_wave, stage_matrices, write_rescue

    rescue = rescue_wave(plan, found)
    try:
        write_rescue(path, rescue)
    except OSError as exc:
        raise UsageError(f"--rescue-out {path}: cannot write it ({exc.strerror or exc})") from None
    going_on = not result.ok and rescue_covers(result, rescue)
    files = sum(len(j.files) for j in rescue.jobs)
    if rescue.jobs:
        _verbosity.note(printable(
            f"rescue wave {rescue.digest[:19]}… in {path.name}: {files} file(s) of "
            f"{len(rescue.jobs)} lost job(s) ({', '.join(j.origin for j in rescue.jobs)}) run "
            "once more on their runner class"
            + ("; the reconcile after it decides this run" if going_on else
               ("" if result.ok else "; other problems fail this run anyway"))))
    output = os.environ.get("GITHUB_OUTPUT")
    if output and os.environ.get("GITHUB_ACTIONS") == "true":
        outputs = {"has_rescue": "true" if rescue.jobs else "false",
                   "rescue_digest": rescue.digest,
                   "rescue": json.dumps(stage_matrices(plan, rescue, groups), sort_keys=True,
                                        separators=(",", ":"))}
        try:
            with open(output, "a", encoding="utf-8") as fh:
                fh.write(github_output_text(outputs))
        except OSError as exc:
            raise UsageError(f"cannot write $GITHUB_OUTPUT: {exc.strerror or exc}") from None
    return going_on, rescue


def _queue_reports(ctx: click.Context, plan: Any, database: str | None) -> Any:
    """A queue lane's files are accounted from the queue database (#40): its jobs are
    runners, not partitions. None when the plan has no queue lane."""
    from testfleet.queue.lane import planned_lanes

    if not planned_lanes(plan):
        return None
    from testfleet.cli._common import project_from
    from testfleet.cli.queue import open_queue_store
    from testfleet.queue.status import final_reports
    from testfleet.reconcile.compare import QueueReport

    with open_queue_store(project_from(ctx), database) as store:
        lanes = final_reports(store, plan)
    return {lane: [QueueReport(f, o, r) for f, o, r in rows]  # type: ignore[arg-type]
            for lane, rows in lanes.items()}


def read_statuses(paths: list[Path]) -> tuple[list[JobStatus], list[str]]:
    """Every status file under ``paths``; notes on what was skipped. Unreadable or invalid
    status files are one :class:`UsageError` naming each (exit 2)."""
    from testfleet.fileio import read_regular
    from testfleet.reconcile.status import (
        MAX_STATUS_BYTES,
        SCHEMA,
        decode_status,
        parse_status,
    )

    notes: list[str] = []
    errors: list[str] = []
    found: list[JobStatus] = []
    seen: set[Path] = set()
    for root in paths:
        if root.is_dir():
            candidates = []
            for here, dirs, files in os.walk(root):  # never follows a symlinked directory
                dirs.sort()
                candidates += [Path(here) / f for f in sorted(files) if f.endswith(".json")]
            if not candidates:
                notes.append(f"{root}: no *.json file in it")
            explicit = False
        elif root.exists() or root.is_symlink():
            candidates, explicit = [root], True
        else:
            notes.append(f"{root} does not exist: no status read from it")
            continue
        for path in candidates:
            key = path.resolve()
            if key in seen:
                continue
            seen.add(key)
            try:
                raw = read_regular(path, MAX_STATUS_BYTES)
                data = decode_status(raw, str(path))
            except OSError as exc:
                errors.append(f"{path}: cannot read it ({exc.strerror or exc})")
                continue
            except UsageError as exc:
                errors.append(str(exc))
                continue
            if not explicit and not (isinstance(data, dict) and data.get("schema") == SCHEMA):
                notes.append(f"{path}: skipped, not a job status file")
                continue
            try:
                found.append(parse_status(data, str(path)))
            except UsageError as exc:
                errors.append(str(exc))
    if errors:
        first, left_out = _verbosity.cap(errors)
        shown = "\n".join(f"  {printable(e)}" for e in first)
        more = f"\n  {_verbosity.more(left_out)}" if left_out else ""
        raise UsageError(f"{len(errors)} status file(s) cannot be read; nothing was "
                         f"reconciled:\n{shown}{more}")
    return found, notes
