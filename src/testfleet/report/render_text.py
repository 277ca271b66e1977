"""The report for a terminal, drawn with rich: the headline, then :data:`SECTIONS` in
the order of :data:`testfleet.report.sections.ORDER` (failing now, holes, the matrix,
the ledger, ...)."""

from __future__ import annotations

import io
from collections.abc import Callable

from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from testfleet.report import fmt
from testfleet.report.health import StageHealth
from testfleet.report.model import CATEGORIES, GroupRow, Report, StageTimeline, TrendSeries
from testfleet.report.references import describe
from testfleet.report.render_failing import text_parts as failing_parts
from testfleet.report.render_results import generated_epoch, path_column, text_parts
from testfleet.report.sections import ORDER
from testfleet.report.trends import flat_line, moving_row
from testfleet.report.trends import split as split_trends
from testfleet.textsafe import printable

# a path column in a table with many columns: longer paths wrap after a "/"
NARROW_PATH = 32

_CAT_STYLE = {"enabled": "green", "label-gated": "cyan", "nightly-only": "blue",
              "at-risk": "yellow", "disabled": "red"}


def render_text(report: Report, *, width: int = 120, color: bool = False) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=color, no_color=not color,
                      color_system="standard" if color else None, highlight=False,
                      emoji=False, markup=False)
    for part in renderables(report):
        console.print(part)
        console.print()
    return buf.getvalue().rstrip() + "\n"


def renderables(report: Report) -> list[object]:
    parts: list[object] = []
    title = Text(f"testfleet report · {report.project} · {report.generated}", style="bold")
    headline = Text(report.headline(), style="bold red" if report.failing_stages else "")
    parts.append(Group(title, headline))
    for ident in ORDER:
        if ident in SECTIONS:
            parts.extend(SECTIONS[ident](report))
    for note in report.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    return parts


def _holes(report: Report) -> list[object]:
    if not report.holes:
        return [Text("✔ No coverage holes: every stage and backend has tests that can run.",
                     style="green")]
    lines = [Text.assemble((f"✖ {h.kind} {h.name}", "bold red"), f" — {fmt.cause(h.cause)}: ",
                           h.detail, (f" ({fmt.lost(h.lost)})" if h.lost else ""))
             for h in report.holes]
    return [Panel(Group(*lines), title=f"COVERAGE HOLES ({len(report.holes)})",
                  border_style="red", title_align="left")]


def _dormant(report: Report) -> list[object]:
    if not report.dormant:
        return []
    table = Table(title="Dormant stages", title_justify="left", expand=False)
    for col in ("stage", "backend", "reason", "reference", "registrations", "would run",
                "switch back on at"):
        table.add_column(col)
    for s in report.dormant:
        where = (f"{report.config_file}:{s.config_line}" if s.config_line
                 else report.config_file or "config")
        table.add_row(Text(s.name, style="yellow"), s.backend, Text(s.reason or ""),
                      describe(s.references), str(s.counts.total), str(s.counts.active),
                      Text(where))
    return [table]


def _findings(report: Report) -> list[object]:
    if not report.findings:
        return []
    return [Panel(Group(*[Text(f) for f in report.findings]), title="Check rules",
                  title_align="left", border_style="yellow")]


#: Category headers split where a narrow terminal may break them (rich would cut a long
#: header word to "label…", which reads as nothing).
_CAT_HEAD = {"enabled": "en-\nabled", "label-gated": "label-\ngated",
             "nightly-only": "nightly-\nonly", "at-risk": "at-\nrisk", "disabled": "dis-\nabled"}


def _matrix(report: Report) -> Table:
    # twelve columns in 120 characters: no vertical rules, one space between columns
    table = Table(title="Coverage matrix (registrations per stage)", title_justify="left",
                  box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False)
    # a stage's name is never cut: two stages differing only at the end must stay apart
    table.add_column("stage", no_wrap=True, min_width=max((len(s.name) for s in report.stages),
                                                          default=5))
    table.add_column("back-\nend", overflow="fold")
    table.add_column("status", no_wrap=True)
    with_health = report.results is not None and report.results.available
    if with_health:
        table.add_column("last run", overflow="fold")
    for cat in CATEGORIES:
        table.add_column(_CAT_HEAD[cat], justify="right", style=_CAT_STYLE[cat])
    table.add_column("total", justify="right")
    table.add_column("est.\ntime", justify="right")
    for s in report.stages:
        health = report.health_of(s.name)
        hole = any(h.kind == "stage" and h.name == s.name for h in report.holes)
        failing = s.status == "active" and health is not None and health.failing
        table.add_row(Text(s.name, style="bold red" if hole or failing else ""), s.backend,
                      _status(s.status, health),
                      *([_last_run(health)] if with_health else []),
                      *[str(s.counts.get(c)) for c in CATEGORIES], str(s.counts.total),
                      fmt.duration(s.counts.est_seconds))
    t = report.totals
    table.add_row(Text("all stages", style="bold"), "", "", *([""] if with_health else []),
                  *[str(t.get(c)) for c in CATEGORIES],
                  str(t.total), fmt.duration(t.est_seconds), end_section=True)
    return table


def _status(status: str, health: StageHealth | None) -> Text:
    if status != "active" or health is None or not health.failing:
        return Text(status, style={"active": "", "dormant": "bold yellow",
                                   "unconfigured": "magenta"}[status])
    bound = "" if health.complete else "≥"
    return Text(f"{health.state}\n{bound}{health.streak} in a row",
                style="bold red" if health.state == "broken" else "red")


def _last_run(health: StageHealth | None) -> Text:
    """Outcome and date of the stage's newest run, and the run (its link is under Failing
    now, or in the other formats)."""
    if health is None:
        return Text("no results", style="dim")
    last = health.last
    text = Text(last.outcome.lower(), style="red" if last.outcome == "FAILED" else "green")
    text.append(f" {last.when[:10]}")
    if last.ci_run_id or last.commit:
        text.append(f"\n{last.label}", style="dim")
    return text


def _groups(title: str, rows: tuple[GroupRow, ...]) -> Table:
    table = Table(title=f"{title} (scheduled = can run, not in a dormant stage)", title_justify="left")
    table.add_column(title[:-1].lower())
    for cat in CATEGORIES:
        table.add_column(cat, justify="right", style=_CAT_STYLE[cat])
    table.add_column("scheduled", justify="right")
    table.add_column("stages")
    for g in rows:
        table.add_row(Text(g.name, style="bold red" if g.scheduled == 0 and g.counts.total else ""),
                      *[str(g.counts.get(c)) for c in CATEGORIES],
                      Text(str(g.scheduled), style="bold red" if g.scheduled == 0 else ""),
                      Text(", ".join(g.stages)))
    return table


def _ledger(report: Report) -> object:
    if not report.ledger:
        return Text("Disabled ledger: nothing is disabled.", style="green")
    table = Table(title=f"Disabled ledger ({len(report.ledger)}; git: {report.git})",
                  title_justify="left")
    # seven columns do not fit 120 characters with whole names: the backend and suite go
    # under the path, which is only as wide as its longest name
    cell = path_column(table, "file:line · backend suite",
                       [f"{e.file}:{e.reason_line or e.line}" for e in report.ledger]
                       + [f"{e.backend} · {e.suite}" for e in report.ledger], limit=NARROW_PATH)
    for col in ("reason", "reference", "age", "expiry"):
        table.add_column(col, overflow="fold")
    for e in report.ledger:
        reason = Text(e.reason)
        if e.shared_reason > 1:
            reason.append(f"  [same reason \u00d7{e.shared_reason}]", style="yellow")
        where = cell(f"{e.file}:{e.reason_line or e.line}")
        where.append(f"\n{e.backend} · {e.suite}" + (" (dormant)" if e.stage_dormant else ""),
                     style="dim")
        table.add_row(where, reason,
                      Text(describe(e.references), style="" if e.references else "red"),
                      fmt.age(e), Text(fmt.expiry(e), style="bold red" if e.expired else ""))
    return table


def _timelines(report: Report) -> list[object]:
    assert report.plan is not None
    parts: list[object] = [Text(f"Plan {report.plan.source} — estimated shard timelines",
                                style="bold")]
    for t in report.plan.timelines:
        # a dormant stage's reason is in the Dormant stages table already
        parts.append(_timeline(t, dormant_listed=bool(report.dormant)))
    for w in report.plan.warnings:
        parts.append(Text(f"plan warning: {w}", style="yellow"))
    return parts


def _timeline(t: StageTimeline, bar_width: int = 50, dormant_listed: bool = False) -> object:
    head = Text.assemble((t.stage, "bold"), f" [{t.status}]")
    if not t.shards:
        reason = ("reason under Dormant stages" if t.status == "dormant" and dormant_listed
                  else t.reason)
        head.append(f" — no jobs{': ' + reason if reason else ''}", style="yellow")
        return head
    ratio = f"{t.ratio:.3f}" if t.ratio is not None else "n/a"
    head.append(f"  makespan {fmt.duration(t.makespan)}, lower bound "
                f"{fmt.duration(t.lower_bound)}, ratio {ratio}")
    lines = [head]
    scale = max(t.makespan, 1e-9)
    for b in t.shards:
        n = max(1, round(bar_width * b.estimate / scale))
        lines.append(Text.assemble(f"  shard {b.shard:>2} ", ("█" * n, "cyan"),
                                   f" {fmt.duration(b.estimate)} ({fmt.plural(len(b.files), 'file')})"))
    return Group(*lines)


def _history(report: Report) -> list[object]:
    h = report.history
    if not h.available:
        return [Text(f"History: {h.note}", style="dim")]
    return [Text(f"History: {h.note}", style="dim")] if h.note else []


def _drift(report: Report) -> list[object]:
    h = report.history
    if not h.available or not h.drift:
        return []
    table = Table(title=f"Duration drift (measured vs est_time, factor ≥ {h.drift_factor:g})",
                  title_justify="left")
    cell = path_column(table, "file", [d.file for d in h.drift])
    for col in ("stage", "est_time", "measured", "samples", "factor"):
        table.add_column(col, overflow="ellipsis")
    for d in h.drift:
        table.add_row(cell(d.file), Text(printable(d.stage)), fmt.measured(d.literal), fmt.measured(d.measured),
                      str(d.samples), fmt.factor(d.factor))
    return [table]


def _gates(report: Report) -> list[object]:
    h = report.history
    if not h.available or not h.gates:
        return []
    table = Table(title="Metric gates (last verdict: the file's last gated run, as \"Failing "
                        "now\" reads it)", title_justify="left")
    cell = path_column(table, "file", [g.file for g in h.gates], limit=NARROW_PATH)
    table.add_column("suite", no_wrap=True)
    metric = path_column(table, "metric", [g.metric for g in h.gates])
    table.add_column("coords", justify="right", min_width=6)
    table.add_column("last\nverdict", no_wrap=True)
    table.add_column("last run", no_wrap=True)
    table.add_column("baseline\nruns", justify="right", min_width=8)
    table.add_column("un-\ntrusted", justify="right", min_width=7)
    for g in h.gates:
        style = {"FAIL": "bold red", "ERROR": "bold red", "PASS": "green"}.get(g.last_verdict or "", "")
        verdict = Text(g.last_verdict or "—", style=style)
        if g.last_mode:
            verdict.append(f"\n{g.last_mode}", style="dim")
        if g.last_source == "baseline":
            verdict.append("\nbaseline run", style="dim")
        when = (g.last_run or "—").replace(" ", "\n", 1) + (
            f"\nrun {g.last_ci_run_id}" if g.last_ci_run_id else "")
        table.add_row(cell(g.file), Text(printable(g.suite)), metric(g.metric), str(g.coordinates), verdict,
                      when, str(g.runs), str(g.untrusted_runs))
    return [table]


def _trends_section(report: Report) -> list[object]:
    h = report.history
    return _trends(h.trends) if h.available and h.trends else []


def _trends(trends: tuple[TrendSeries, ...]) -> list[object]:
    """The series that moved, one row each; the flat ones in one line."""
    moving, flat = split_trends(trends)
    parts: list[object] = []
    if moving:
        table = Table(title="Metric trends that moved (values over runs, oldest first)",
                      title_justify="left")
        metric = path_column(table, "metric", [t.metric for t in moving])
        cell = path_column(table, "file", [t.file for t in moving], limit=NARROW_PATH)
        for col in ("step", "runs", "range", "last", "untrusted"):
            table.add_column(col, overflow="fold")
        for t in moving:
            table.add_row(metric(t.metric), cell(t.file), *moving_row(t))
        parts.append(table)
    if flat:
        parts.append(Text(flat_line(flat), style="dim"))
    return parts


#: Each section of :data:`testfleet.report.sections.ORDER` as rich renderables.
SECTIONS: dict[str, Callable[[Report], list[object]]] = {
    "failing": failing_parts,
    "holes": _holes,
    "dormant": _dormant,
    "matrix": lambda r: [_matrix(r)],
    "backends": lambda r: [_groups("Backends", r.backends)],
    "labels": lambda r: [_groups("Labels", r.labels)] if r.labels else [],
    "ledger": lambda r: [_ledger(r)],
    "plan": lambda r: _timelines(r) if r.plan is not None else [],
    "drift": _drift,
    "gates": _gates,
    "trends": _trends_section,
    "history": _history,
    "results": lambda r: text_parts(r.results, generated_epoch(r)),
    "findings": _findings,
}
