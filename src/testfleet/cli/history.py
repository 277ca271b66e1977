"""``testfleet history``: portable history bundles, so history survives ephemeral CI runners.

- ``history export [--run-id ID] --output FILE``: one job's records (by CI run id) or
  the whole database as a bundle (see ``testfleet.history.bundle``).
- ``history merge FILE...``: every bundle into the history database, in one
  transaction, idempotently; prunes like ``db prune``; prints size and row counts.
  Refuses bundles from pull requests (see ``testfleet.history.trust``).
- ``history show FILE``: a bundle's header and counts, after verifying it.

A bad bundle is exit 2 naming the file and the problem, with nothing changed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from testfleet.cli import _verbosity
from testfleet.cli._common import (
    database_option,
    human_format_option,
    project_from,
    single_line,
    write_output,
)
from testfleet.cli._options import RenamedOption, output_option
from testfleet.textsafe import printable

if TYPE_CHECKING:
    from testfleet.documents.history import HistoryMergeDoc, HistoryShowDoc
    from testfleet.store.core import Store


@click.group("history")
def command() -> None:
    """Export, merge and inspect portable history bundles.

    \b
    Examples:
      testfleet history export -o testfleet-history/records.bundle
      testfleet history show testfleet-history/records.bundle
      testfleet history merge --require-ref refs/heads/main testfleet-history/records.bundle
    """


@command.command("export")
@database_option()
@click.option("--run-id", "run_id", metavar="ID", default=None, callback=single_line,
              help="Only the records of this CI run (the GITHUB_RUN_ID the runner recorded) or "
                   "of this gate run id; default: the whole database.")
@click.option("-o", "--output", "output", required=True, metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="Bundle file to write (its directory is created).")
@click.option("--plan", "plan_file", metavar="FILE", default=None,
              type=click.Path(dir_okay=False, path_type=Path),
              help="The plan the job ran: its event, cadence and whether it writes metric "
                   "baselines are recorded in the bundle.")
@click.option("--event", default=None, callback=single_line, metavar="EVENT",
              help="Event the records come from (default: GITHUB_EVENT_NAME, Buildkite's).")
@click.option("--git-ref", "ref", default=None, callback=single_line, metavar="REF",
              cls=RenamedOption, old=("--ref",),
              help="Git ref the records come from (default: GITHUB_REF, BUILDKITE_BRANCH); "
                   "'history merge --require-ref' compares it.")
@click.option("--cadence", default=None, callback=single_line, metavar="CADENCE",
              help="Cadence of the run (default: the plan's).")
@click.option("--write-baseline/--no-write-baseline", "write_baseline", default=None,
              help="Whether the run's cadence writes metric baselines (default: the plan's).")
@click.pass_context
def export_cmd(ctx: click.Context, database: str | None, run_id: str | None, output: Path,
               plan_file: Path | None, event: str | None, ref: str | None, cadence: str | None,
               write_baseline: bool | None) -> int:
    """Write one job's (or the whole database's) records as a bundle.

    \b
    Examples:
      testfleet history export -o testfleet-history/records.bundle
      testfleet history export --run-id 9876543210 --plan plan.json -o testfleet-history/records.bundle
    """
    from testfleet.history.bundle import Payload, encode
    from testfleet.history.export import export_payload
    from testfleet.history.trust import source_from_env
    from testfleet.store import open_store, resolve_target

    project = project_from(ctx)
    output = _here(ctx, output)
    plan_file = _here(ctx, plan_file) if plan_file is not None else None
    if plan_file is not None:
        from testfleet.planning.model import load_plan

        policy = load_plan(plan_file).policy
        event = event if event is not None else policy.get("event")
        cadence = cadence if cadence is not None else policy.get("cadence")
        if write_baseline is None and "write_baseline" in policy:
            write_baseline = bool(policy["write_baseline"])
    source = source_from_env(event=event, ref=ref, cadence=cadence, write_baseline=write_baseline)
    target = resolve_target(project, database)
    if target.path is not None and not target.path.exists() and target.default:
        # A job that recorded nothing (history off, nothing ran) still hands on a bundle.
        from testfleet import __version__
        from testfleet.store.schema import latest_version

        _verbosity.note(f"no history database at {target.display}; writing an empty bundle")
        payload = Payload(store_schema=latest_version(), created_at=0.0, testfleet=__version__,
                          source=source)
    else:
        with open_store(project, database) as store:
            payload = export_payload(store, run_id=run_id, source=source)
    data = encode(payload)
    _make_parent(output)
    write_output(output, data)
    what = f"run {run_id}" if run_id is not None else "the whole database"
    click.echo(f"exported {len(payload.executions)} execution(s) ({len(payload.testcases)} "
               f"testcase result(s)), {len(payload.gate_runs)} gate "
               f"run(s) ({len(payload.gate_values)} value(s)) of {what} from {target.display} "
               f"to {printable(str(output))} ({_size(len(data))})")
    return 0


def _here(ctx: click.Context, path: Path) -> Path:
    """A relative path given to a command is relative to ``-C DIR`` (as every command's
    paths are), not to the directory testfleet was started in."""
    if path.is_absolute():
        return path
    return Path(ctx.find_root().obj.directory) / path


def _make_parent(output: Path) -> None:
    """The bundle's folder is the artifact a CI job uploads next: create it, so the job's
    step needs no ``mkdir`` of its own (a file in the way is a usage error)."""
    from testfleet.errors import UsageError

    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--output {printable(str(output))}: cannot create its directory: "
                         f"{exc.strerror or exc}") from None


def _expand(files: tuple[Path, ...], base: Path) -> list[Path]:
    """The bundles ``files`` name: a directory stands for every file under it, in sorted
    order (downloaded artifacts, one folder each); a file that is not there stays, for
    reading to say so."""
    out: list[Path] = []
    for path in files:
        where = path if path.is_absolute() else base / path
        if where.is_dir():
            out += sorted(p for p in where.rglob("*") if p.is_file())
        else:
            out.append(path)
    return out


@command.command("merge")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path),
                metavar="BUNDLE...")
@database_option()
@click.option("--allow-untrusted", is_flag=True,
              help="Merge bundles from pull requests or other refs too (their gate runs are "
                   "stored untrusted). Never in a default-branch workflow.")
@click.option("--require-ref", default=None, metavar="REF", callback=single_line,
              help="Refuse bundles exported on another ref (e.g. refs/heads/main).")
@click.option("--keep", type=click.IntRange(min=1), default=50, show_default=True, metavar="N",
              help="Prune as 'db prune --keep': executions kept per stage and file.")
@click.option("--older-than", "older_than_days", type=click.FloatRange(min=0, min_open=True),
              default=None, metavar="DAYS", help="Also prune executions older than DAYS.")
@click.option("--no-prune", is_flag=True, help="Do not prune after merging.")
@click.option("--wait", "wait_seconds", type=click.FloatRange(min=0), default=600.0,
              show_default=True, metavar="SECONDS",
              help="While other merges hold the history database, wait for it this long "
                   "(saying so) before giving up.")
@click.option("--skip-empty", is_flag=True,
              help="No bundle at all (a run whose jobs exported nothing) is a notice and exit 0, "
                   "not an error.")
@click.option("--plan", "plan_path", type=click.Path(path_type=Path, dir_okay=False),
              default=None, metavar="FILE",
              help="The run's plan: a lane it gave jobs that recorded nothing counts as one "
                   "whose jobs never started or never reported, for its runner-class breaker.")
@human_format_option("testfleet.history-merge/1")
@output_option()
@click.pass_context
def merge_cmd(ctx: click.Context, files: tuple[Path, ...], database: str | None,
              allow_untrusted: bool, require_ref: str | None, keep: int,
              older_than_days: float | None, no_prune: bool, wait_seconds: float,
              skip_empty: bool, plan_path: Path | None, fmt: str) -> int:
    """Merge bundles into the history database in one transaction (idempotent). A
    directory stands for every file under it (downloaded artifacts, one folder each).

    \b
    Examples:
      testfleet history merge testfleet-history-in/*/records.bundle
      testfleet history merge --require-ref refs/heads/main --keep 20 a.bundle b.bundle
      testfleet history merge --format json -o merged.json testfleet-history/records.bundle
    """
    import time

    from testfleet.history.merge import (
        MERGE_BUSY_TIMEOUT,
        merge_bundles,
        read_bundles,
        wait_while_locked,
    )
    from testfleet.store import open_store, resolve_target

    project = project_from(ctx)
    base = Path(ctx.find_root().obj.directory)
    paths = _expand(files, base)
    if not paths:
        if skip_empty:
            click.echo("::notice title=testfleet::no history bundles to merge"
                       if os.environ.get("GITHUB_ACTIONS") == "true"
                       else "testfleet: no history bundles to merge")
            return 0
        from testfleet.errors import UsageError

        raise UsageError(f"no history bundle in {', '.join(map(str, files))}")
    # every file verified before the database is touched
    bundles = read_bundles(paths, base)
    plan = None
    if plan_path is not None:
        from testfleet.planning.model import load_plan

        plan = load_plan(plan_path if plan_path.is_absolute() else base / plan_path)
    cutoff = time.time() - older_than_days * 86400 if older_than_days is not None else None
    # one deadline for opening (a first merge creates the schema) and merging
    deadline = time.monotonic() + wait_seconds

    def say(message: str) -> None:
        click.echo(f"testfleet: {printable(message)}", err=True)

    # SQLite only: for PostgreSQL the same number is the connect timeout, kept as it is
    sqlite = resolve_target(project, database).dialect == "sqlite"

    def opened() -> Store:
        if sqlite:
            return open_store(project, database, busy_timeout=MERGE_BUSY_TIMEOUT)
        return open_store(project, database)

    with wait_while_locked(opened, deadline=deadline, say=say) as store:
        result = merge_bundles(store, bundles, allow_untrusted=allow_untrusted,
                               require_ref=require_ref, keep=None if no_prune else keep,
                               older_than=cutoff, deadline=deadline, say=say)
        where = store.target.display
        # the runner-class breakers (#41): only default-branch runs' records move them
        from testfleet.app.breaker import observe_runs, run_sources

        breaker_lines = observe_runs(project, store, run_sources(bundles, require_ref), plan=plan)
    for line in breaker_lines:
        click.echo(f"testfleet: {printable(line)}", err=True)
    for note in result.notes:
        click.echo(f"testfleet: warning: {printable(note)}", err=True)
    if fmt == "json":
        doc: HistoryMergeDoc = {"schema": "testfleet.history-merge/1", "database": where,
                                **result.to_json()}
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    a, k = result.added, result.known
    click.echo(f"merged {result.bundles} bundle(s) into {where}: "
               f"+{a['executions']} execution(s) ({k['executions']} already present), "
               f"+{a['gate_runs']} gate run(s) ({k['gate_runs']} already present) with "
               f"{a['gate_values']} value(s), +{a['testcases']} testcase result(s), "
               f"+{a['signatures']} failure signature(s); "
               + (f"{result.untrusted} stored gate run(s) untrusted as the bundles say; "
                  if result.untrusted else "")
               + f"pruned {result.pruned}")
    rows = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in result.rows.items())
    size = _size(result.size_bytes) if result.size_bytes is not None else "size unknown"
    click.echo(f"history: {size}; {rows}")
    return 0


@command.command("show")
@click.argument("file", type=click.Path(path_type=Path), metavar="BUNDLE")
@human_format_option("testfleet.history-show/1")
@output_option()
@click.pass_context
def show_cmd(ctx: click.Context, file: Path, fmt: str) -> int:
    """Verify a bundle and print its header and record counts.

    \b
    Examples:
      testfleet history show testfleet-history/records.bundle
      testfleet history show --format json testfleet-history/records.bundle
    """
    from testfleet.history.bundle import read_file
    from testfleet.history.trust import admit

    bundle = read_file(file, Path(ctx.find_root().obj.directory))
    verdict = admit(bundle.payload.source)
    header: HistoryShowDoc = {
        "schema": "testfleet.history-show/1", "file": str(file), **bundle.header(),
        "merge": ("refused without --allow-untrusted: " + verdict.refused if verdict.refused
                  else verdict.note or "accepted; gate runs keep their trust")}
    if fmt == "json":
        click.echo(json.dumps(header, indent=2, sort_keys=True))
        return 0
    # Everything below but the counts came from the bundle: one inert line each.
    src = header["source"]
    counts = header["counts"]
    click.echo(printable(f"{file}: {header['format']}, history schema {header['store_schema']}, "
                         f"testfleet {header['testfleet']}, sha256 {header['sha256'][:16]}..."))
    click.echo(printable("source: " + ", ".join(f"{k}={v}" for k, v in sorted(src.items())
                                                if v is not None))
               if any(v is not None for v in src.values()) else "source: not recorded (local export)")
    click.echo(f"records: {counts['executions']} execution(s), {counts['gate_runs']} gate run(s), "
               f"{counts['gate_values']} gate value(s), {counts['testcases']} testcase result(s)")
    click.echo(printable(f"merge: {header['merge']}"))
    return 0


def _size(n: int) -> str:
    return f"{n} bytes" if n < 10 * 1024 else f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 \
        else f"{n / 1024:.1f} KiB"
