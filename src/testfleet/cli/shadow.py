"""``testfleet shadow``: run beside the existing CI before switching it off.

- ``shadow compare --plan FILE --observed PATH...``: the plan testfleet made for this run's
  event against what the existing CI's jobs recorded they ran (see
  :mod:`testfleet.shadow.observed`), per stage: files, runner labels, shard count. Exit 0
  whatever differs (it must never fail the run it watches; ``--fail-on-difference`` for a
  local script), 2 on bad input. With ``--history``, the run is counted (``--record``, never
  on a pull request) and the verdict says when the switch is safe.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from testfleet.cli import _verbosity
from testfleet.cli._options import META_OUTPUT, format_option, output_option, stage_option
from testfleet.errors import UsageError

FORMATS = ("table", "json", "markdown")


@click.group("shadow")
def command() -> None:
    """Compare what testfleet would run with what the existing CI ran, run by run.

    \b
    Examples:
      testfleet shadow compare --plan plan.json --observed shadow-records/
      testfleet shadow compare --plan plan.json --observed shadow-records/ --history .testfleet/shadow-history.json --record
    """


@command.command("compare")
@click.option("--plan", "plan_path", type=click.Path(path_type=Path, dir_okay=False),
              required=True, metavar="FILE",
              help="The plan testfleet made for this run's event ('testfleet plan --output').")
@click.option("--observed", "observed", multiple=True, required=True, metavar="PATH",
              type=click.Path(path_type=Path),
              help="A record the existing CI's jobs wrote ('== stage=S shard=I/N runs_on=a,b ==' "
                   "blocks of listing output or junit=FILE), or a directory of *.txt records "
                   "(repeatable).")
@stage_option("Compare only this stage (repeatable): the stages the recording workflow runs, "
              "when the existing CI spreads its stages over several workflows.", multiple=True,
              dest="stages")
@click.option("--history", "history_path", default=None, metavar="FILE",
              type=click.Path(path_type=Path, dir_okay=False),
              help="The shadow history to read for the verdict (and, with --record, to add this "
                   "run to). Convention: .testfleet/shadow-history.json, carried by the CI cache.")
@click.option("--record", is_flag=True,
              help="Add this run to --history. Ignored (with a note) for a pull request: pull "
                   "requests never write shared history.")
@click.option("--runs", "runs", default=10, show_default=True, type=click.IntRange(1, 200),
              metavar="N", help="Consecutive recorded runs without a difference that make the "
                                "switch safe.")
@click.option("--run-id", "run_id", default=None, metavar="ID",
              help="The CI run compared (default: $GITHUB_RUN_ID).")
@click.option("--commit", "commit", default=None, metavar="SHA",
              help="The commit compared (default: $GITHUB_SHA).")
@click.option("--fail-on-difference", "fail", is_flag=True,
              help="Exit 1 when a lane differs (for a local script; in CI shadow mode must "
                   "never fail the run).")
@format_option(list(FORMATS), "table: a line per stage; json: testfleet.shadow/1; markdown: "
                              "the step summary.")
@output_option()
@click.pass_context
def compare_cmd(ctx: click.Context, plan_path: Path, observed: tuple[Path, ...],
                stages: tuple[str, ...], history_path: Path | None, record: bool, runs: int, run_id: str | None,
                commit: str | None, fail: bool, fmt: str) -> int:
    """Compare this run's plan with what the existing CI ran in the same run.

    Nothing is run. Per stage (and variant): the files each side ran, the runner labels,
    the shard count. Under GitHub Actions the Markdown also goes to $GITHUB_STEP_SUMMARY.

    \b
    Examples:
      testfleet shadow compare --plan plan.json --observed shadow-records/
      testfleet shadow compare --plan plan.json --observed run.txt --format json -o shadow.json
      testfleet shadow compare --plan plan.json --observed shadow-records/ --history .testfleet/shadow-history.json --record --runs 10
    """
    from testfleet.planning.model import load_plan
    from testfleet.shadow.compare import compare, plan_files, render_markdown, render_text
    from testfleet.shadow.history import PR_EVENTS, add_run, load_history, save_history, verdict
    from testfleet.shadow.observed import read_records

    if record and history_path is None:
        raise UsageError("--record adds this run to the shadow history: add --history FILE")
    base: Path = ctx.find_root().obj.directory

    def here(p: Path) -> Path:
        return p if p.is_absolute() else base / p

    plan = load_plan(here(plan_path))
    lanes = read_records([here(p) for p in observed], plan_files(plan))
    doc = compare(plan, lanes, run_id=run_id or os.environ.get("GITHUB_RUN_ID", ""),
                  commit=commit or os.environ.get("GITHUB_SHA", ""), stages=stages)
    if history_path is not None:
        path = here(history_path)
        history = load_history(path)
        if record and doc["event"] in PR_EVENTS:
            doc["notes"].append(f"not recorded: a {doc['event']} run never writes shared history")
        elif record:
            history = add_run(history, doc)
            save_history(path, history)
            doc["recorded"] = True
            _verbosity.note(f"recorded this run in {path}")
        doc["verdict"] = verdict(history, runs)
    if fmt == "json":
        click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
    elif fmt == "markdown":
        click.echo(render_markdown(doc), nl=False)
    else:
        click.echo(render_text(doc), nl=False)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        if not doc["same"]:  # a notice, never an error: shadow mode does not fail the run
            differ = sum(1 for lane in doc["lanes"] if lane["differences"])
            click.echo(f"::notice title=testfleet shadow::{differ} stage(s) differ from the "
                       "existing CI; see the step summary", err=fmt == "json" or META_OUTPUT in ctx.meta)
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            try:
                with open(summary, "a", encoding="utf-8") as fh:
                    fh.write(render_markdown(doc))
            except OSError as exc:
                click.echo(f"testfleet: warning: cannot write $GITHUB_STEP_SUMMARY: {exc}", err=True)
    return 1 if fail and not doc["same"] else 0
