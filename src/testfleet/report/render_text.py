"""The report for a terminal, drawn with rich: holes first, then the matrix and ledger."""

from __future__ import annotations

import io

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from testfleet.report import fmt
from testfleet.report.model import CATEGORIES, GroupRow, Report, StageTimeline, TrendSeries
from testfleet.report.references import describe
from testfleet.report.render_results import generated_epoch, path_column, text_parts
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
    parts.append(Group(title, Text(report.headline())))
    if report.holes:
        lines = [Text.assemble((f"✖ {h.kind} {h.name}", "bold red"), f" — {fmt.cause(h.cause)}: ",
                               h.detail, (f" ({fmt.lost(h.lost)})" if h.lost else ""))
                 for h in report.holes]
        parts.append(Panel(Group(*lines), title=f"COVERAGE HOLES ({len(report.holes)})",
                           border_style="red", title_align="left"))
    else:
        parts.append(Text("✔ No coverage holes: every stage and backend has tests that can run.",
                          style="green"))
    if report.dormant:
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
        parts.append(table)
    parts.append(_matrix(report))
    parts.append(_groups("Backends", report.backends))
    if report.labels:
        parts.append(_groups("Labels", report.labels))
    parts.append(_ledger(report))
    if report.plan is not None:
        parts.extend(_timelines(report))
    parts.extend(_history(report))
    parts.extend(text_parts(report.results, generated_epoch(report)))
    if report.findings:
        parts.append(Panel(Group(*[Text(f) for f in report.findings]), title="Check rules",
                           title_align="left", border_style="yellow"))
    for note in report.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    return parts


def _matrix(report: Report) -> Table:
    table = Table(title="Coverage matrix (registrations per stage)", title_justify="left")
    table.add_column("stage")
    table.add_column("backend")
    table.add_column("status")
    for cat in CATEGORIES:
        table.add_column(cat, justify="right", style=_CAT_STYLE[cat])
    table.add_column("total", justify="right")
    table.add_column("est. time", justify="right")
    for s in report.stages:
        status_style = {"active": "", "dormant": "bold yellow", "unconfigured": "magenta"}[s.status]
        hole = any(h.kind == "stage" and h.name == s.name for h in report.holes)
        table.add_row(Text(s.name, style="bold red" if hole else ""), s.backend,
                      Text(s.status, style=status_style),
                      *[str(s.counts.get(c)) for c in CATEGORIES], str(s.counts.total),
                      fmt.duration(s.counts.est_seconds))
    t = report.totals
    table.add_row(Text("all stages", style="bold"), "", "", *[str(t.get(c)) for c in CATEGORIES],
                  str(t.total), fmt.duration(t.est_seconds), end_section=True)
    return table


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
    parts: list[object] = []
    if h.drift:
        table = Table(title=f"Duration drift (measured vs est_time, factor ≥ {h.drift_factor:g})",
                      title_justify="left")
        cell = path_column(table, "file", [d.file for d in h.drift])
        for col in ("stage", "est_time", "measured", "samples", "factor"):
            table.add_column(col, overflow="ellipsis")
        for d in h.drift:
            table.add_row(cell(d.file), Text(printable(d.stage)), fmt.measured(d.literal),
                          fmt.measured(d.measured),
                          str(d.samples), fmt.factor(d.factor))
        parts.append(table)
    if h.gates:
        table = Table(title="Metric gates", title_justify="left")
        cell = path_column(table, "file", [g.file for g in h.gates], limit=NARROW_PATH)
        table.add_column("suite", overflow="fold")
        metric = path_column(table, "metric", [g.metric for g in h.gates])
        for col in ("coords", "last verdict", "last run", "runs", "untrusted"):
            table.add_column(col, overflow="ellipsis")
        for g in h.gates:
            style = {"FAIL": "bold red", "ERROR": "bold red", "PASS": "green"}.get(g.last_verdict or "", "")
            table.add_row(cell(g.file), Text(printable(g.suite)), metric(g.metric), str(g.coordinates),
                          Text(g.last_verdict or "—", style=style), g.last_run or "—",
                          str(g.runs), str(g.untrusted_runs))
        parts.append(table)
    if h.trends:
        parts.extend(_trends(h.trends))
    if h.note:
        parts.append(Text(f"History: {h.note}", style="dim"))
    return parts


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
