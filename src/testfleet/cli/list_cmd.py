"""``testfleet list``: the registry as a table, JSON or CSV, one row per registration.

This is on the fast path (no full-file parse, cache on). When collection found
errors, ``list`` still prints every registration it could read, reports the
errors on stderr and exits 1, so a script never mistakes a broken tree for a
complete one. Filters combine with AND; a repeated filter option is an OR.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

import click

from testfleet import color
from testfleet.cli import _verbosity
from testfleet.cli._options import format_option, output_option, stage_option
from testfleet.cli.completion import complete_backends, complete_labels
from testfleet.registry.model import Registration
from testfleet.textsafe import printable

if TYPE_CHECKING:
    from testfleet.documents.registrations import ListDoc

COLUMNS = ("file", "line", "backend", "suite", "est_time", "labels", "nightly", "disabled", "implicit")


@click.command("list")
@format_option(["table", "json", "csv"], "table for people, json for tools (testfleet.list/1), "
                                         "csv for a spreadsheet.")
@output_option()
@stage_option("Only registrations for this stage (repeatable).", multiple=True, dest="stages")
@click.option("--backend", "backends", multiple=True, metavar="BACKEND",
              shell_complete=complete_backends, help="Only registrations for this backend (repeatable).")
@click.option("--label", "labels", multiple=True, metavar="LABEL", shell_complete=complete_labels,
              help="Only registrations carrying this label (repeatable).")
@click.option("--disabled", is_flag=True, help="Only disabled registrations.")
@click.option("--no-cache", is_flag=True, help="Ignore and do not write the collection cache.")
@click.pass_context
def command(ctx: click.Context, fmt: str, stages: tuple[str, ...], backends: tuple[str, ...],
            labels: tuple[str, ...], disabled: bool, no_cache: bool) -> int:
    """List registrations (one row per file and backend).

    \b
    Examples:
      testfleet list
      testfleet list --disabled
      testfleet list --stage stage-c-4-gpu-h200 --label megatron
      testfleet list --backend rocm --format csv -o rocm.csv
    """
    from testfleet.registry.collector import collect_settings
    from testfleet.registry.settings import fast, from_project, save_snapshot

    app = ctx.find_root().obj
    # With a current config snapshot, skip loading (and importing) the validating
    # config machinery; otherwise load and validate as every command does.
    settings = None if no_cache else fast(app.directory, app.config_file)
    displaced = None
    if settings is None:
        from testfleet.cli._common import project_from

        settings = from_project(project_from(ctx))
        if not no_cache:
            displaced = save_snapshot(settings)
    rules = settings.rules
    _known("--stage", stages, sorted(rules.stages))
    _known("--backend", backends, sorted(rules.gpu))
    _known("--label", labels, list(rules.labels))
    registry = collect_settings(settings, use_cache=not no_cache, gates=False)
    if displaced is not None:
        registry.findings.append(displaced)
    rows = [r for r in registry.registrations if _keep(r, stages, backends, labels, disabled)]
    if fmt == "json":
        click.echo(to_json(rows), nl=False)
    elif fmt == "csv":
        click.echo(to_csv(rows), nl=False)
    else:
        _table(rows, len(registry.registrations))
    errors = [f for f in registry.findings if f.severity == "error"]
    warnings = len(registry.findings) - len(errors)
    for f in errors:
        click.echo(f.render(), err=True)
    if errors:
        click.echo(f"testfleet list: {len(errors)} error(s); the list above may be incomplete "
                   "(run 'testfleet check')", err=True)
        return 1
    if warnings and _verbosity.verbose():
        for f in registry.findings:
            if f.severity != "error":
                click.echo(f.render(), err=True)
    elif warnings and fmt == "table":
        _verbosity.note(f"{warnings} warning(s): run 'testfleet check' to see them (or -v)")
    return 0


def _known(option: str, values: Iterable[str], valid: list[str]) -> None:
    import difflib

    from testfleet.errors import UsageError

    for v in values:
        if v not in valid:
            close = difflib.get_close_matches(v, valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"{option} {v!r} is not configured{hint}; valid: {', '.join(valid) or '(none)'}")


def _keep(r: Registration, stages: tuple[str, ...], backends: tuple[str, ...],
          labels: tuple[str, ...], disabled: bool) -> bool:
    if stages and r.suite not in stages:
        return False
    if backends and r.backend not in backends:
        return False
    if labels and not set(labels) & set(r.labels):
        return False
    return not (disabled and r.disabled is None)


def to_json(rows: list[Registration]) -> str:
    """The ``testfleet.list/1`` document, one registration object per line (grep- and
    diff-friendly).

    ``json.dumps(indent=...)`` falls back to the pure-Python encoder, several
    times slower on 10,000 rows. The compact C encoder is used instead and a
    newline put between objects: ``}, {"file"`` cannot occur inside a JSON
    string (its quote would be escaped), so the split is exact.
    """
    doc: ListDoc = {"schema": "testfleet.list/1", "registrations": [r.to_json() for r in rows]}
    rest = json.dumps({k: v for k, v in doc.items() if k != "registrations"}, ensure_ascii=False)
    head = rest[:-1] + ', "registrations": ['
    if not rows:
        return head + "]}\n"
    text = json.dumps(doc["registrations"], ensure_ascii=False)
    return head + "\n" + text[1:-1].replace('}, {"file"', '},\n{"file"') + "\n]}\n"


def _cell(value: object) -> str:
    """A CSV cell that a spreadsheet will not evaluate as a formula (OWASP CSV injection)."""
    text = "" if value is None else str(value)
    if text[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + text
    return text


def to_csv(rows: list[Registration]) -> str:
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in rows:
        d: dict[str, object] = dict(r.to_json())
        d["labels"] = ";".join(r.labels)
        d["nightly"] = "true" if r.nightly else "false"
        d["implicit"] = "true" if r.implicit else "false"
        writer.writerow([d[c] if isinstance(d[c], (int, float)) else _cell(d[c]) for c in COLUMNS])
    return buf.getvalue()


RICH_MAX_ROWS = 2000


def _cells(r: Registration) -> list[str]:
    status = []
    if r.implicit:
        status.append("implicit")
    if r.nightly:
        status.append("nightly")
    if r.disabled is not None:
        status.append("disabled: " + printable(r.disabled))
    where = f"{r.file}:{r.line}" if r.line else r.file
    return [printable(where), r.backend, r.suite, f"{r.est_time:g}s", ", ".join(r.labels), "; ".join(status)]


HEADERS = ("file", "backend", "suite", "est_time", "labels", "status")


def _table(rows: list[Registration], total: int) -> None:
    """rich on a terminal; plain aligned columns when piped or for very large trees
    (rich needs seconds for 10,000 rows, and a log wants no box drawing)."""
    if not color.terminal() or len(rows) > RICH_MAX_ROWS:
        click.echo(plain_table(rows, total), nl=False)
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for name in HEADERS[:-1]:
        table.add_column(name, justify="right" if name == "est_time" else "left", no_wrap=True)
    table.add_column("status", overflow="fold", min_width=20)
    for r in rows:
        table.add_row(*(Text(c) for c in _cells(r)))
    console = color.console(highlight=False, soft_wrap=False)
    console.print(table)
    console.print(f"{len(rows)} of {total} registrations", highlight=False, markup=False)


def plain_table(rows: list[Registration], total: int) -> str:
    body = [list(HEADERS)] + [_cells(r) for r in rows]
    widths = [max(len(row[i]) for row in body) for i in range(len(HEADERS) - 1)]
    lines = []
    for row in body:
        cols = [c.rjust(w) if i == 3 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False))]
        lines.append("  ".join([*cols, row[-1]]).rstrip())
    lines.append(f"{len(rows)} of {total} registrations")
    return "\n".join(lines) + "\n"


