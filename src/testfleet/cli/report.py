"""``testfleet report``: coverage matrix, holes, disabled ledger, shard balance, trends."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from testfleet import color
from testfleet.cli import _verbosity
from testfleet.cli._common import database_option, project_from, write_output
from testfleet.cli._options import format_option

if TYPE_CHECKING:
    from testfleet.report.model import Report

FORMATS = ("table", "json", "markdown", "html")


@click.command("report")
@format_option(list(FORMATS), "table for a terminal, json for tools (schema testfleet.report/1), "
                              "markdown for a step summary or PR comment, html for a "
                              "self-contained dashboard.", aliases={"text": "table"})
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Write to FILE (atomically) instead of standard output ('-': standard output).")
@click.option("--plan", "plan_path", type=click.Path(dir_okay=False, path_type=Path),
              metavar="FILE", help="A plan file from 'testfleet plan --format json': adds the "
                                  "shard timeline per stage.")
@database_option("Read-only, for duration drift, gates and metric trends.")
@click.option("--no-history", is_flag=True, help="Do not read the history database.")
@click.option("--max-rows", type=click.IntRange(0), default=50, show_default=True, metavar="N",
              help="Markdown only: at most this many ledger and label rows (0 = all), so the "
                   "report fits a PR comment; the most urgent rows come first.")
@click.option("--width", type=click.IntRange(60, 400), default=None, metavar="N",
              help="Width of --format table, 60 to 400 columns (default: the terminal's).")
@click.pass_context
def command(ctx: click.Context, fmt: str, output: Path | None, plan_path: Path | None,
            database: str | None, no_history: bool, max_rows: int, width: int | None) -> int:
    """Show the state of the fleet's coverage: holes first, then dormant stages, the
    coverage matrix, the disabled ledger, shard balance (--plan) and metric history.

    \b
    Examples:
      testfleet report
      testfleet report --plan plan.json --format html -o report.html
      testfleet report --format markdown --max-rows 20 >> "$GITHUB_STEP_SUMMARY"
      testfleet report --format json --no-history -o report.json
    """
    from testfleet.app.report import gather

    project = project_from(ctx)
    base: Path = ctx.find_root().obj.directory  # -C DIR: relative paths are DIR's, as in plan/run
    if plan_path is not None and not plan_path.is_absolute():
        plan_path = base / plan_path
    report = gather(project, plan_path=plan_path, database=database, history=not no_history)
    to_stdout = output is None or str(output) == "-"
    if width is None:
        # The terminal's width within --width's range: COLUMNS=99999999 made rich render for minutes.
        width = min(max(shutil.get_terminal_size((120, 40)).columns, 60), 400) if to_stdout else 120
    text = render(report, fmt, color=to_stdout and color.wanted(), max_rows=max_rows, width=width)
    if to_stdout:
        _echo(text)
    else:
        assert output is not None
        write_output(output if output.is_absolute() else base / output, text.encode("utf-8"))
        _verbosity.note(f"wrote the {fmt} report to {output}")
    return 0


def render(report: Report, fmt: str, *, color: bool = False, width: int = 120,
           max_rows: int = 50) -> str:
    """The report in one format; renderers are imported only when used."""
    if fmt == "json":
        from testfleet.report.render_json import render_json

        return render_json(report)
    if fmt == "markdown":
        from testfleet.report.render_markdown import render_markdown

        return render_markdown(report, max_rows=max_rows)
    if fmt == "html":
        from testfleet.report.render_html import render_html

        return render_html(report)
    from testfleet.report.render_text import render_text

    return render_text(report, width=width, color=color)


def _echo(text: str) -> None:
    """Print; a terminal whose encoding cannot show a glyph gets '?' instead of a traceback."""
    # click strips ANSI from a pipe unless told: FORCE_COLOR's report keeps its colour
    try:
        click.echo(text, nl=False, color=color.wanted())
    except UnicodeEncodeError:
        # click.echo writes bytes to the binary stream under stdout, flushing the text layer first
        encoding = getattr(sys.stdout, "encoding", None) or "ascii"
        click.echo(text.encode(encoding, errors="replace"), nl=False, color=color.wanted())


