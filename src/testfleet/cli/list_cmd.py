"""``testfleet list``: the registry as a table, JSON or CSV, one row per registration.

This is on the fast path (no full-file parse, cache on). When collection found
errors, ``list`` still prints every registration it could read, reports the
errors on stderr and exits 1, so a script never mistakes a broken tree for a
complete one. Filters combine with AND; a repeated filter option is an OR.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable

import click

from testfleet.registry.model import Registration

COLUMNS = ("file", "line", "backend", "suite", "est_time", "labels", "nightly", "disabled", "implicit")


@click.command("list")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table",
              show_default=True, help="Output format.")
@click.option("--stage", "stages", multiple=True, metavar="STAGE",
              help="Only registrations for this stage (repeatable).")
@click.option("--backend", "backends", multiple=True, metavar="BACKEND",
              help="Only registrations for this backend (repeatable).")
@click.option("--label", "labels", multiple=True, metavar="LABEL",
              help="Only registrations carrying this label (repeatable).")
@click.option("--disabled", is_flag=True, help="Only disabled registrations.")
@click.option("--no-cache", is_flag=True, help="Ignore and do not write the collection cache.")
@click.pass_context
def command(ctx: click.Context, fmt: str, stages: tuple[str, ...], backends: tuple[str, ...],
            labels: tuple[str, ...], disabled: bool, no_cache: bool) -> int:
    """List registrations (one row per file and backend)."""
    from testfleet.registry.collector import collect_settings
    from testfleet.registry.settings import fast, from_project, save_snapshot

    app = ctx.find_root().obj
    # With a current config snapshot, skip loading (and importing) the validating
    # config machinery; otherwise load and validate as every command does.
    settings = None if no_cache else fast(app.directory, app.config_file)
    if settings is None:
        from testfleet.cli._common import project_from

        settings = from_project(project_from(ctx))
        if not no_cache:
            save_snapshot(settings)
    rules = settings.rules
    _known("--stage", stages, sorted(rules.stages))
    _known("--backend", backends, sorted(rules.gpu))
    _known("--label", labels, list(rules.labels))
    registry = collect_settings(settings, use_cache=not no_cache)
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
    if warnings and fmt == "table":
        click.echo(f"{warnings} warning(s): run 'testfleet check' to see them", err=True)
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
    """A JSON array with one registration object per line (grep- and diff-friendly).

    ``json.dumps(indent=...)`` falls back to the pure-Python encoder, several
    times slower on 10,000 rows. The compact C encoder is used instead and a
    newline put between objects: ``}, {"file"`` cannot occur inside a JSON
    string (its quote would be escaped), so the split is exact.
    """
    if not rows:
        return "[]\n"
    text = json.dumps([r.to_json() for r in rows], ensure_ascii=False)
    return "[\n" + text[1:-1].replace('}, {"file"', '},\n{"file"') + "\n]\n"


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
        d = r.to_json()
        d["labels"] = ";".join(r.labels)
        d["nightly"] = "true" if r.nightly else "false"
        d["implicit"] = "true" if r.implicit else "false"
        writer.writerow([d[c] if isinstance(d[c], (int, float)) else _cell(d[c]) for c in COLUMNS])
    return buf.getvalue()


def _table(rows: list[Registration], total: int) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for name, justify in (("file", "left"), ("backend", "left"), ("suite", "left"),
                          ("est_time", "right"), ("labels", "left")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    table.add_column("status", overflow="fold", min_width=20)
    for r in rows:
        status = []
        if r.implicit:
            status.append(Text("implicit", style="dim"))
        if r.nightly:
            status.append(Text("nightly", style="cyan"))
        if r.disabled is not None:
            status.append(Text("disabled: " + _safe(r.disabled), style="yellow"))
        where = f"{r.file}:{r.line}" if r.line else r.file
        table.add_row(Text(_safe(where)), Text(r.backend), Text(r.suite), Text(f"{r.est_time:g}s"),
                      Text(", ".join(r.labels)), Text("; ").join(status))
    # Piped output is read by people too (CI logs): do not squeeze it to 80 columns.
    width = None if sys.stdout.isatty() else 200
    console = Console(file=sys.stdout, highlight=False, soft_wrap=False, width=width)
    console.print(table)
    console.print(f"{len(rows)} of {total} registrations", highlight=False, markup=False)


def _safe(value: str) -> str:
    if value.isprintable():
        return value
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in value)
