"""The report as GitHub-flavoured Markdown: a step summary or a PR comment.

Every value from the tree (reasons, file names, labels) is escaped: HTML is neutral,
table pipes cannot break a row, emphasis and links cannot be injected, ``@mentions``
do not ping anyone, and very long values are cut so one reason cannot flood a comment.
"""

from __future__ import annotations

from testfleet.report import fmt
from testfleet.report.markdown_cells import MAX_CELL as MAX_CELL
from testfleet.report.markdown_cells import code as code
from testfleet.report.markdown_cells import md as md
from testfleet.report.markdown_cells import table as _table
from testfleet.report.model import CATEGORIES, GroupRow, Report, StageRow
from testfleet.report.references import describe
from testfleet.report.render_results import generated_epoch, markdown_lines
from testfleet.report.trends import flat_line, moving_row
from testfleet.report.trends import split as split_trends


def render_markdown(report: Report, *, max_rows: int = 50) -> str:
    """``max_rows`` bounds the ledger and label tables (0 = no bound), so the whole
    text stays within a PR comment's 65,536 characters; the ledger is sorted by
    urgency, so what is cut is the least urgent."""
    out: list[str] = [f"## testfleet report — {md(report.project)}", "",
                      f"**{md(report.headline())}**", ""]
    if report.holes:
        out += [f"### 🚨 Coverage holes ({len(report.holes)})", ""]
        for h in report.holes:
            lost = f" — {fmt.lost(h.lost)}" if h.lost else ""
            out.append(f"- **{h.kind} {code(h.name)}** — {md(fmt.cause(h.cause))}: {md(h.detail)}{lost}")
        out.append("")
    else:
        out += ["✅ No coverage holes: every stage and backend has tests that can run.", ""]
    if report.dormant:
        out += ["### 💤 Dormant stages", ""]
        out += _table(["stage", "backend", "reason", "reference", "registrations", "would run",
                       "switch back on at"],
                      [[code(s.name), md(s.backend), md(s.reason or ""), md(describe(s.references)),
                        str(s.counts.total), str(s.counts.active), code(_where(report, s))]
                       for s in report.dormant],
                      "llllrrl")
        out.append("")
    out += ["### Coverage matrix", ""]
    rows = []
    for s in report.stages:
        hole = any(h.kind == "stage" and h.name == s.name for h in report.holes)
        status = {"active": "active", "dormant": "💤 dormant", "unconfigured": "⚠ unconfigured"}[s.status]
        rows.append([("🚨 " if hole else "") + code(s.name), md(s.backend), status,
                     *[str(s.counts.get(c)) for c in CATEGORIES], str(s.counts.total),
                     fmt.duration(s.counts.est_seconds)])
    t = report.totals
    rows.append(["**all stages**", "", "", *[f"**{t.get(c)}**" for c in CATEGORIES],
                 f"**{t.total}**", fmt.duration(t.est_seconds)])
    out += _table(["stage", "backend", "status", *CATEGORIES, "total", "est. time"], rows,
                  "lll" + "r" * (len(CATEGORIES) + 2))
    out += ["", _groups_md("Backends", report.backends, open_=True)]
    if report.labels:
        out += [_groups_md("Labels", report.labels, open_=False, max_rows=max_rows)]
    out += _ledger_md(report, max_rows)
    if report.plan is not None:
        out += _plan_md(report)
    out += _history_md(report)
    out += markdown_lines(report.results, generated_epoch(report))
    if report.findings:
        out += ["### Check rules", ""] + [f"- {md(f)}" for f in report.findings] + [""]
    out += [f"_{md(n)}_" for n in report.notes]
    return "\n".join(out).rstrip() + "\n"


def _where(report: Report, s: StageRow) -> str:
    return f"{report.config_file}:{s.config_line}" if s.config_line else (report.config_file or "config")


def _groups_md(title: str, rows: tuple[GroupRow, ...], open_: bool, max_rows: int = 0) -> str:
    more = ""
    if max_rows and len(rows) > max_rows:
        more = f"_{len(rows) - max_rows} more {title.lower()} in the JSON or HTML report._"
        rows = rows[:max_rows]
    body = _table([title[:-1].lower(), *CATEGORIES, "scheduled", "stages"],
                  [[("🚨 " if g.scheduled == 0 and g.counts.total else "") + code(g.name),
                    *[str(g.counts.get(c)) for c in CATEGORIES], str(g.scheduled),
                    md(", ".join(g.stages))] for g in rows], "l" + "r" * (len(CATEGORIES) + 1) + "l")
    return "\n".join([f"<details{' open' if open_ else ''}><summary><b>{title}</b></summary>", "",
                      *body, "", *([more, ""] if more else []), "</details>", ""])


def _ledger_md(report: Report, max_rows: int = 0) -> list[str]:
    if not report.ledger:
        return ["### Disabled ledger", "", "Nothing is disabled.", ""]
    out = [f"### Disabled ledger ({len(report.ledger)})", "",
           f"Ages from git ({md(report.git)}): when the `disabled=` line last changed.", ""]
    rows = []
    shown = report.ledger[:max_rows] if max_rows else report.ledger
    for e in shown:
        reason = md(e.reason)
        if e.shared_reason > 1:
            reason += f" ⚠ *same reason \u00d7{e.shared_reason}*"
        expiry = fmt.expiry(e)
        where = code(f"{e.file}:{e.reason_line or e.line}")
        if report.links is not None:
            where = f"[{where}]({report.links.file(e.file, e.reason_line or e.line)})"
        rows.append([where, md(e.backend),
                     code(e.suite) + (" 💤" if e.stage_dormant else ""), reason,
                     md(describe(e.references)) if e.references else "**none**", md(fmt.age(e)),
                     f"**{md(expiry)}**" if e.expired else md(expiry)])
    out += _table(["file", "backend", "suite", "reason", "reference", "age", "expiry"], rows)
    if len(shown) < len(report.ledger):
        out += ["", f"_{len(report.ledger) - len(shown)} more disabled registrations (less urgent: "
                    "newer, no expiry) in the JSON or HTML report._"]
    return [*out, ""]


def _plan_md(report: Report) -> list[str]:
    assert report.plan is not None
    out = [f"### Plan shard balance — {code(report.plan.source)}", ""]
    rows = []
    for t in report.plan.timelines:
        if not t.shards:
            reason = ("reason under Dormant stages" if t.status == "dormant" and report.dormant
                      else t.reason or "")
            rows.append([code(t.stage), md(t.status), "0", "—", "—", "—", md(reason)])
            continue
        loads = " · ".join(fmt.duration(b.estimate) for b in t.shards)
        ratio = f"{t.ratio:.3f}" if t.ratio is not None else "—"
        rows.append([code(t.stage), md(t.status), str(len(t.shards)), fmt.duration(t.makespan),
                     fmt.duration(t.lower_bound), ratio, loads])
    out += _table(["stage", "status", "shards", "makespan", "lower bound", "ratio", "shard loads"],
                  rows, "llrrrrl")
    out += [f"- plan warning: {md(w)}" for w in report.plan.warnings]
    return [*out, ""]


def _history_md(report: Report) -> list[str]:
    h = report.history
    if not h.available:
        return [f"_History: {md(h.note)}_", ""]
    out: list[str] = []
    if h.drift:
        out += [f"### Duration drift (factor ≥ {h.drift_factor:g})", ""]
        out += _table(["file", "stage", "est_time", "measured", "samples", "factor"],
                      [[code(d.file), code(d.stage), fmt.measured(d.literal), fmt.measured(d.measured),
                        str(d.samples), fmt.factor(d.factor)] for d in h.drift], "llrrrr")
        out.append("")
    if h.gates:
        out += ["### Metric gates", ""]
        out += _table(["file", "suite", "metric", "coordinates", "last verdict", "last run", "runs",
                       "untrusted"],
                      [[code(g.file), code(g.suite), code(g.metric), str(g.coordinates),
                        md(g.last_verdict or "—"), md(g.last_run or "—"), str(g.runs),
                        str(g.untrusted_runs)] for g in h.gates], "lllrllrr")
        out.append("")
    if h.trends:
        moving, flat = split_trends(h.trends)
        if moving:
            out += ["### Metric trends that moved", ""]
            out += _table(["metric", "file", "step", "runs", "range", "last", "untrusted"],
                          [[code(t.metric), code(t.file), *[md(c) for c in moving_row(t)]]
                           for t in moving], "lllrlrr")
            out.append("")
        if flat:
            out += [f"_{md(flat_line(flat))}_", ""]
    if h.note:
        out += [f"_History: {md(h.note)}_", ""]
    return out
