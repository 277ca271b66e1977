"""``testfleet results``: incidents first, dormant stages' probes, then the last N final
verdicts per (file, stage), with links to CI runs.

    testfleet results [--stage STAGE] [--file FILE] [--runs N] [--tests] [--format table|json]

Failures of one CI run that share a signature are one incident (``testfleet incident``):
the incidents of the newest N runs lead, so a night on which a runner class could not
start reads as one infrastructure incident, not one failure per file. A dormant stage
whose probe passed ``restore_after`` times in a row is announced as ready to restore.

Exit status: 0 (also when files are failing: this reads history, it judges nothing),
2 for bad options or a history database that cannot be read.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Final

import click

from testfleet import color
from testfleet.cli._common import database_option, project_from
from testfleet.cli._options import file_option, format_option, output_option, stage_option
from testfleet.errors import UsageError

if TYPE_CHECKING:
    from testfleet.documents.results import ResultsDoc

SCHEMA: Final = "testfleet.results/1"


@click.command("results")
@stage_option("Only this stage (or <stage>.<variant>).")
@file_option("Only this test file (repository-relative).")
@click.option("--runs", type=click.IntRange(1, 1000), default=10, show_default=True, metavar="N",
              help="Newest final verdicts per (file, stage); incidents of the newest N CI runs.")
@click.option("--tests", "tests", is_flag=True,
              help="Also per testcase (pytest stages), under each file.")
@format_option(["table", "json"], f"table for people, json for tools ({SCHEMA}).")
@output_option()
@database_option()
@click.pass_context
def command(ctx: click.Context, stage: str | None, file: str | None, runs: int, tests: bool,
            fmt: str, database: str | None) -> int:
    """Incidents, dormant stages' probes, and the last N outcomes per (file, stage).

    \b
    Examples:
      testfleet results
      testfleet results --stage stage-a-cpu --runs 20
      testfleet results --file tests/unit/test_rollout_buffer.py --tests
      testfleet results --format json -o results.json
    """
    from testfleet.app.results import read_results
    from testfleet.incidents.probes import probe_states
    from testfleet.incidents.render import dormancy, incident_json
    from testfleet.results.links import linker
    from testfleet.results.summary import by_file, summary_json

    project = project_from(ctx)
    from testfleet.planning.lanes import find_lane

    # a stage, or one variant's results (recorded under <stage>.<variant>, #12)
    if stage is not None and stage not in project.config.stages \
            and find_lane(project.config, stage) is None:
        raise UsageError(f"--stage {stage!r} is not a configured stage "
                         f"({', '.join(sorted(project.config.stages)) or 'none'})")
    read = read_results(project, database, stage=stage, file=file, runs=runs, tests=tests)
    results, probe_rows, cases, incidents = read.results, read.probe_rows, read.cases, read.incidents
    files = by_file(results)
    probes = [p for p in probe_states(project.config, probe_rows,
                                      pyproject=project.config_path.name == "pyproject.toml")
              if stage is None or p.stage == stage]
    cfg = project.config.results
    link = linker(cfg.run_url, cfg.github_repository, cfg.buildkite_pipeline, os.environ)

    def url(r: Any) -> str | None:
        return link.url(r.ci_run_id, r.commit)

    suggestions = {n: d for n, i in enumerate(incidents)
                   if (d := dormancy(project, i, link.url)) is not None}
    from testfleet.app.breaker import held_back_lanes

    held = [h for h in held_back_lanes(project, database)
            if stage is None or h[0] == stage or h[0].startswith(f"{stage}.")]
    if fmt == "json":
        doc: ResultsDoc = {"schema": SCHEMA, "runs": runs, "stage": stage, "file": file,
               "files": [summary_json(f, url) for f in files],
               "incidents": [incident_json(i, link.url, suggestions.get(n))
                             for n, i in enumerate(incidents)],
               "probes": [p.to_json() for p in probes]}
        if held:
            doc["held_back"] = [{"lane": lane, "detail": detail} for lane, detail in held]
        if tests:
            doc["testcases"] = [{"stage": c.stage, "file": c.file, **c.to_json()} for c in cases]
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    if held:
        from rich.markup import escape

        from testfleet.textsafe import printable

        for lane, detail in held:
            color.console().print(f"[bold red]coverage hole[/]: lane [bold]{escape(lane)}[/] is "
                                  f"held back by its breaker: {escape(printable(detail))}")
    _table(files, cases, url, runs, incidents, suggestions, probes, link.url)
    return 0


def _table(files: list[Any], cases: list[Any], url: Any, runs: int, incidents: list[Any],
           suggestions: dict[int, Any], probes: list[Any], link: Any) -> None:
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from testfleet.incidents.render import incidents_table
    from testfleet.results.summary import LETTERS
    from testfleet.textsafe import printable

    console = color.console()
    if incidents:
        console.print(incidents_table(incidents, link, suggestions,
                                      f"incidents of the newest {runs} run(s): failures that share "
                                      "a signature, one row per cause"))
    for p in probes:
        style = "bold green" if p.ready else "yellow"
        console.print(f"dormant stage [bold]{escape(p.stage)}[/] ({escape(printable(p.reason))}): "
                      f"probe [{style}]{escape(p.note)}[/]")
    if not files:
        console.print("no results recorded yet (run `testfleet run` with history on)")
        return
    by_file = {(f.lane, f.file): i.id for i in incidents[::-1] for f in i.failures}
    table = Table(title=f"results: newest {runs} run(s) per file (strip oldest -> newest: "
                        "P pass, R pass on retry, F fail, T timeout, E error)",
                  title_justify="left")
    for col in ("stage", "file", "pass rate", "strip", "last", "gate", "commit", "run"):
        table.add_column(col, overflow="fold")
    for f in files:
        last = f.last
        gate = f"{last.gate_status} ({last.gate_mode})" if last.gate_status else "-"
        incident = by_file.get((f.stage, f.file)) if last.failed else None
        outcome = last.outcome + (f" (incident {incident})" if incident else
                                  f": {last.reason}" if last.failed and last.reason else "")
        # history may come from merged bundles: data, one inert line each, never markup
        table.add_row(*(Text(printable(c)) for c in (
            f.stage, f.file, f"{f.passes}/{len(f.runs)}", f.strip, outcome, gate,
            (last.commit or "-")[:12], url(last) or (last.ci_run_id or "-"))))
    console.print(table)
    if cases:
        ct = Table(title="testcases (outcomes oldest -> newest, as the strips above)",
                   title_justify="left")
        for col in ("stage", "file", "test", "outcomes"):
            ct.add_column(col, overflow="fold")
        grouped: dict[tuple[str, str, str], list[str]] = {}
        for c in cases:
            grouped.setdefault((c.stage, c.file, c.test), []).append(
                LETTERS.get(c.outcome, c.outcome[:1]))
        for (stage, file, test), letters in grouped.items():
            ct.add_row(*(Text(printable(c)) for c in (stage, file, test, "".join(reversed(letters)))))
        console.print(ct)
