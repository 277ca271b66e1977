"""``testfleet durations``: seed history from JUnit, compare literals with what was
measured, and correct literals that drifted."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from testfleet.cli import _verbosity
from testfleet.cli._common import (
    database_option,
    finite,
    history_location_problem,
    project_from,
    single_line,
)
from testfleet.cli._options import format_option, output_option, stage_option
from testfleet.errors import UsageError
from testfleet.textsafe import printable

if TYPE_CHECKING:
    from collections.abc import Mapping

    from testfleet.config import Project
    from testfleet.documents.durations import (
        DurationsDoc,
        DurationsSuggestDoc,
        EstimateRowDoc,
        SuggestionDoc,
    )
    from testfleet.documents.registrations import InvalidDoc
    from testfleet.planning.estimates import EstimateRow
    from testfleet.registry.model import Registration



@click.group("durations")
def command() -> None:
    """Import, show and correct test durations.

    \b
    Examples:
      testfleet durations show --stage stage-a-cpu
      testfleet durations suggest --factor 2
      testfleet durations import --stage stage-c-4-gpu-h200 junit/*.xml
    """


def _registrations(project: Project) -> list[Registration]:
    """The valid registrations. A tree with registration errors is not refused (#12: errors
    are fates, as in check/list/plan/report): each rejected call is reported on stderr,
    ``_invalid`` keeps them for the output, and the command exits 1 (see ``_tree_status``)."""
    from testfleet.registry import collect

    registry = collect(project, gates=False)
    errors = [f for f in registry.findings if f.severity == "error"]
    _TREE["errors"] = len(errors)
    invalid: list[InvalidDoc] = [{"file": bad.file, "backend": bad.backend, "suite": bad.suite,
                                  "line": bad.line, "code": bad.code, "message": bad.message}
                                 for bad in registry.invalid]
    _TREE["invalid"] = invalid
    shown, left_out = _verbosity.cap(errors)
    for f in shown:
        click.echo(f.render(), err=True)
    if left_out:
        click.echo(_verbosity.more(left_out), err=True)
    return list(registry.registrations)


# What the last _registrations() found wrong with the tree (one command per process).
_TREE: dict[str, Any] = {"errors": 0, "invalid": []}


def _tree_status(status: int) -> int:
    """1 when the tree has registration errors (the output above left them out), as
    ``list`` and ``plan`` do; else the command's own status."""
    n = int(_TREE["errors"])
    if n:
        click.echo(f"testfleet durations: the tree has {n} registration error(s); their "
                   "registrations are not in the output ('testfleet check' lists them all)",
                   err=True)
        return 1
    return status


def _check_stage(project: Project, stage: str | None) -> None:
    from testfleet.planning.lanes import find_lane

    if stage is not None and stage not in project.config.stages \
            and find_lane(project.config, stage) is None:  # a variant's history: <stage>.<variant>
        import difflib

        close = difflib.get_close_matches(stage, list(project.config.stages), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UsageError(f"--stage {stage!r} is not a configured stage{hint} "
                         f"(valid: {', '.join(sorted(project.config.stages))})")


# -- import --------------------------------------------------------------------------


@command.command("import")
@click.argument("files", nargs=-1, required=True, metavar="JUNIT_XML...",
                type=click.Path(path_type=Path, dir_okay=False))
@stage_option("The stage these results ran in.", required=True)
@click.option("--commit", default=None, callback=single_line, metavar="SHA",
              help="Commit the results belong to.")
@click.option("--run-id", default=None, callback=single_line, metavar="ID",
              help="CI run id to record (default: a hash of the file, which also prevents "
                   "importing the same file twice).")
@click.option("--force", is_flag=True, help="Import even if this run id is already recorded.")
@click.option("--dry-run", is_flag=True, help="Show what would be imported, store nothing.")
@click.option("--strict", is_flag=True, help="Exit 1 when any testcase matches no registered file.")
@database_option()
@click.pass_context
def import_cmd(ctx: click.Context, files: tuple[Path, ...], stage: str, commit: str | None,
               run_id: str | None, force: bool, dry_run: bool, strict: bool,
               database: str | None) -> int:
    """Seed history from JUnit XML files a project already archives.

    Each testcase maps to a registered file by its 'file' attribute or its
    'classname' (tests.e2e.foo.TestX -> tests/e2e/foo.py); a file's cases are summed
    into one execution. Unmatched cases are listed. Files are validated completely
    before anything is stored.

    \b
    Examples:
      testfleet durations import --stage stage-a-cpu junit/stage-a-cpu-1-of-4.xml
      testfleet durations import --stage stage-c-4-gpu-h200 --commit 4f2a9c1 --dry-run junit/*.xml
    """
    from testfleet.store import open_store
    from testfleet.store.junit_import import (
        FileMatcher,
        content_digest,
        parse_cases,
        read_bytes,
        to_executions,
    )

    project = project_from(ctx)
    _check_stage(project, stage)
    if run_id is not None and len(files) > 1:
        raise UsageError("--run-id applies to one file; import several files without it "
                         "(each gets its own id) or one at a time")
    base = ctx.find_root().obj.directory
    from testfleet.planning.estimates import lane_registrations
    from testfleet.planning.lanes import find_lane

    registered: dict[str, set[str]] = {}
    regs = _registrations(project)
    for reg in [*regs, *lane_registrations(project.config, regs)]:  # a variant's too
        registered.setdefault(reg.file, set()).add(reg.suite)
    matcher = FileMatcher(registered, project.root)
    lane = find_lane(project.config, stage)
    backend = lane.backend if lane is not None else project.config.stages[stage].backend
    from testfleet.failures.patterns import matcher_for

    spec = project.config.backend_specs().get(backend)
    infra = matcher_for(backend, spec.infra_patterns if spec else (),
                        spec.infra_defaults if spec else True)
    now = time.time()
    batches = []
    for path in files:
        full = path if path.is_absolute() else base / path
        data = read_bytes(full)  # read once: what is parsed is what is hashed
        cases = parse_cases(data, full)
        digest = content_digest(data)
        rid = run_id or f"junit:{digest[:16]}"
        # --force imports again on purpose: those rows get new identities of their own.
        result = to_executions(cases, matcher, stage=stage, backend=backend, commit=commit,
                               ci_run_id=rid, default_time=now, content=None if force else digest,
                               infra=infra)
        batches.append((path, rid, result))

    unmatched = 0
    stored = 0
    store = None if dry_run else open_store(project, database)
    try:
        skip = set() if store is None or force else _already_imported(store, batches, stage)
        for n, (path, rid, result) in enumerate(batches):
            where = printable(str(path))
            for line in result.unmatched:  # testcase names come from the file: one inert line each
                click.echo(f"testfleet: warning: {where}: unmatched testcase {printable(line)}",
                           err=True)
            unmatched += len(result.unmatched)
            head = (f"{where}: {result.cases} testcase(s), {result.matched_cases} matched, "
                    f"{len(result.unmatched)} unmatched -> {len(result.executions)} file execution(s)")
            if n in skip or (store is not None and not force and store.run_executions(rid, stage)):
                click.echo(f"{head}; already imported as {printable(rid)}, skipped (use --force "
                           "to import again)")
                continue
            if store is not None:
                store.record_executions(result.executions, result.signatures)
                stored += len(result.executions)
            click.echo(f"{head}{' (dry run)' if dry_run else ''} [{stage}, run {printable(rid)}]")
            if dry_run:
                for e in result.executions:
                    click.echo(f"  {e.file}: {e.duration:.1f}s {e.outcome}")
    finally:
        if store is not None:
            store.close()
    if not dry_run:
        click.echo(f"recorded {stored} execution(s) for {stage}")
    return _tree_status(1 if strict and unmatched else 0)


def _already_imported(store: Any, batches: list[tuple[Path, str, Any]], stage: str) -> set[int]:
    """The batches to skip: content already imported under the same run id, or given twice
    in this command. Content already imported under another run id is refused as a whole
    (nothing stored): its durations would count twice and outweigh every other run."""
    uids = [e.uid for _, _, result in batches for e in result.executions]
    stored = store.runs_of_uids(uids) if uids else {}
    skip: set[int] = set()
    first: dict[frozenset[str], Path] = {}
    refused: list[str] = []
    for n, (path, rid, result) in enumerate(batches):
        mine = frozenset(e.uid for e in result.executions)
        if mine and mine in first:
            skip.add(n)  # the same content twice on the command line
            continue
        first[mine] = path
        earlier = sorted({str(stored[u]) for u in mine if u in stored})
        if not earlier:
            continue
        if earlier == [rid]:
            skip.add(n)
        else:
            refused.append(printable(f"{path}: the same content was already imported for stage "
                                     f"{stage} as run {', '.join(earlier)}; importing it again "
                                     f"as run {rid} would count its durations twice"))
    if refused:
        raise UsageError("\n".join(refused) + "\nnothing imported (use --force to import "
                         "the same results again on purpose)")
    return skip


# -- show / suggest ------------------------------------------------------------------


def _rows(project: Project, stage: str | None, database: str | None) -> tuple[list[EstimateRow], list[str]]:
    from testfleet.app.estimates import estimate_rows

    _check_stage(project, stage)
    rows, warnings = estimate_rows(project, _registrations(project), url=database,
                                   stages=None if stage is None else [stage])
    problem = history_location_problem(project, database)
    if problem is not None:  # no history could be read: say why, not "no database yet"
        warnings = [f"{problem}; all estimates are est_time literals"]
    rows.sort(key=lambda r: (r.stage, r.file))
    return rows, warnings


def _fmt(value: float | None, suffix: str = "") -> str:
    return "-" if value is None else f"{value:,.0f}{suffix}" if value >= 100 else f"{value:.1f}{suffix}"


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> str:
    """The house table (rich, as list/plan/report use), without box drawing so that a log
    or a pipe reads it as plain aligned columns."""
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for i, head in enumerate(headers):
        table.add_column(head, justify="right" if i in right else "left",
                         overflow="fold", no_wrap=i != 1)
    for row in rows:
        table.add_row(*(Text(c) for c in row))
    buf = io.StringIO()
    Console(file=buf, width=max(120, *(sum(map(len, r)) + 2 * len(r) for r in [headers, *rows])),
            highlight=False, color_system=None).print(table)
    return buf.getvalue().rstrip("\n")


def _row_json(row: EstimateRow) -> EstimateRowDoc:
    return {
        "file": row.file, "stage": row.stage, "backend": row.backend, "est_time": row.literal,
        "history": row.history, "samples": row.samples, "estimate": row.estimate,
        "source": row.source, "drift": row.drift, "implicit": row.implicit,
        "timeout": row.timeout, "history_from": row.history_from,
    }


@command.command("show")
@stage_option("Only this stage.")
@format_option(["table", "json"], "table for people, json for tools (testfleet.durations/1).")
@output_option()
@database_option()
@click.pass_context
def show_cmd(ctx: click.Context, stage: str | None, fmt: str, database: str | None) -> int:
    """Per file and stage: literal est_time, history estimate, samples and drift.

    \b
    Examples:
      testfleet durations show
      testfleet durations show --stage stage-a-cpu
      testfleet durations show --format json -o durations.json
    """
    project = project_from(ctx)
    rows, warnings = _rows(project, stage, database)
    for w in warnings:
        click.echo(f"testfleet: warning: {w}", err=True)
    settings = project.config.durations
    if fmt == "json":
        invalid: list[InvalidDoc] = _TREE["invalid"]
        doc: DurationsDoc = {
            "schema": "testfleet.durations/1", "statistic": settings.statistic,
            "window": settings.window, "min_samples": settings.min_samples,
            "rows": [_row_json(r) for r in rows], "warnings": warnings,
            "invalid": [bad for bad in invalid if stage is None or bad["suite"] == stage],
        }
        click.echo(json.dumps(doc, indent=2))
        return _tree_status(0)
    if not rows:
        click.echo("no registrations" + (f" in {stage}" if stage else ""))
        return _tree_status(0)
    table = [[r.stage, r.file, _fmt(r.literal), _fmt(r.history), str(r.samples),
              "-" if r.drift is None else f"{r.drift:.2f}x",
              r.source if r.history_from is None else f"{r.source} ({r.history_from})"] for r in rows]
    click.echo(_table(["stage", "file", "est_time", settings.statistic, "samples", "drift", "used"],
                      table, right={2, 3, 4, 5}))
    with_history = sum(1 for r in rows if r.source == "history")
    raised = sum(1 for r in rows if r.timeout is not None and r.estimate == r.timeout)
    click.echo(f"\n{with_history}/{len(rows)} registration(s) estimated from history "
               f"({settings.statistic} of the last {settings.window} passing runs, "
               f"at least {settings.min_samples} sample(s))"
               + (f"; {raised} raised to a recent timed-out duration" if raised else ""))
    return _tree_status(0)


@command.command("suggest")
@stage_option("Only this stage.")
@click.option("--factor", type=click.FloatRange(min=1.0, min_open=True), default=None,
              callback=finite, metavar="X",
              help="Flag literals off by more than this factor (default: durations.drift_factor).")
@click.option("--write", is_flag=True,
              help="Rewrite the est_time literals in the test files (only those bytes change).")
@format_option(["table", "json"], "table for people, json for tools "
                                "(testfleet.durations-suggest/1).")
@output_option()
@database_option()
@click.pass_context
def suggest_cmd(ctx: click.Context, stage: str | None, factor: float | None, write: bool,
                fmt: str, database: str | None) -> int:
    """List registrations whose literal est_time is off from history by more than a factor.

    Exit status 1 when there are drifted literals and --write was not given (so CI can
    flag them), 0 otherwise.

    \b
    Examples:
      testfleet durations suggest
      testfleet durations suggest --stage stage-c-4-gpu-h200 --factor 1.5
      testfleet durations suggest --write
    """
    from testfleet.planning.literals import format_seconds

    project = project_from(ctx)
    rows, warnings = _rows(project, stage, database)
    for w in warnings:
        click.echo(f"testfleet: warning: {w}", err=True)
    limit = factor or project.config.durations.drift_factor
    # a variant's rows (<stage>.<variant>) are shown by `show`; the literal is the stage's
    rows = [r for r in rows if r.stage in project.config.stages]
    # A literal already at what would be written (1 s, the floor, for a sub-second file)
    # cannot be improved: flagging it would fail CI forever and "rewrite" 1 -> 1.
    drifted = [r for r in rows if r.drift is not None and (r.drift > limit or r.drift < 1 / limit)
               and float(format_seconds(r.estimate)) != r.literal]
    outcomes: dict[tuple[str, str], str] = {}
    if write:
        outcomes = _write(project, drifted)
    if fmt == "json":
        suggestions: list[SuggestionDoc] = [
            {**_row_json(r), "suggested": int(format_seconds(r.estimate)),
             "written": outcomes.get((r.file, r.stage))} for r in drifted]
        suggested: DurationsSuggestDoc = {"schema": "testfleet.durations-suggest/1",
                                          "factor": limit, "suggestions": suggestions,
                                          "warnings": warnings}
        click.echo(json.dumps(suggested, indent=2))
    elif not drifted:
        click.echo(f"no literal is off by more than {limit:g}x from history")
    else:
        table = [[r.stage, r.file, _fmt(r.literal), format_seconds(r.estimate),
                  f"{r.drift:.2f}x", str(r.samples)]
                 + ([outcomes.get((r.file, r.stage), "")] if write else [])
                 for r in drifted if r.drift is not None]
        headers = ["stage", "file", "est_time", "suggested", "drift", "samples"]
        click.echo(_table(headers + (["written"] if write else []), table, right={2, 3, 4, 5}))
    if write:
        failed = sum(1 for v in outcomes.values() if not v.startswith("updated"))
        return _tree_status(1 if failed else 0)
    return _tree_status(1 if drifted else 0)


def _write(project: Project, rows: list[EstimateRow]) -> dict[tuple[str, str], str]:
    """Rewrite each drifted literal; per row, what happened.

    The files are edited in place under the lock ``disable`` and ``enable`` take, from
    their content at the moment of writing (``results/inplace.py``): a rename would lose
    an editor's or another run's edit, the file's owner and its hard links (#27 D1)."""
    from testfleet.planning.literals import LiteralNotFound, rewrite_est_time
    from testfleet.results.inplace import edit_in_place, edit_lock

    markers_by_backend: dict[str, set[str]] = {}
    for marker, backend in project.config.marker_backends().items():
        markers_by_backend.setdefault(backend, set()).add(marker)
    out: dict[tuple[str, str], str] = {}
    by_file: dict[str, list[EstimateRow]] = {}
    for row in rows:
        if row.implicit:
            out[(row.file, row.stage)] = ("skipped: implicit registration (change est_time "
                                          "of its [[implicit]] entry)")
        else:
            by_file.setdefault(row.file, []).append(row)

    def plan(current: Mapping[str, bytes]) -> dict[str, bytes]:
        new: dict[str, bytes] = {}
        for rel, source in current.items():
            for row in by_file[rel]:
                try:
                    source, edit = rewrite_est_time(source, markers_by_backend.get(row.backend, set()),
                                                    row.stage, row.estimate, row.line)
                except LiteralNotFound as exc:
                    out[(row.file, row.stage)] = f"skipped: {exc}"
                    continue
                out[(row.file, row.stage)] = f"updated line {edit.line}: {edit.old} -> {edit.new}"
            if source != current[rel]:
                new[rel] = source
        return new

    for rel in sorted(by_file):  # one file at a time: a file that cannot be written skips its rows only
        try:
            with edit_lock(project.root):
                edit_in_place(project.root, [rel], plan)
        except (UsageError, OSError) as exc:
            why = str(exc) if isinstance(exc, UsageError) else (exc.strerror or str(exc))
            for row in by_file[rel]:
                out[(row.file, row.stage)] = f"skipped: {why}"
    return out
