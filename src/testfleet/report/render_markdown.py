"""The report as GitHub-flavoured Markdown: a step summary or a PR comment.

Every value from the tree (reasons, file names, labels) is escaped: HTML is neutral,
table pipes cannot break a row, emphasis and links cannot be injected, ``@mentions``
do not ping anyone, and very long values are cut so one reason cannot flood a comment.
"""

from __future__ import annotations

from collections.abc import Callable

from testfleet.report import fmt
from testfleet.report.health import StageHealth
from testfleet.report.markdown_cells import MAX_CELL as MAX_CELL
from testfleet.report.markdown_cells import code as code
from testfleet.report.markdown_cells import link
from testfleet.report.markdown_cells import md as md
from testfleet.report.markdown_cells import table as _table
from testfleet.report.model import CATEGORIES, GroupRow, Report, StageRow
from testfleet.report.references import describe
from testfleet.report.render_failing import markdown_lines as failing_lines
from testfleet.report.render_results import generated_epoch, markdown_lines
from testfleet.report.sections import ORDER
from testfleet.report.trends import flat_line, moving_row
from testfleet.report.trends import split as split_trends


def render_markdown(report: Report, *, max_rows: int = 50) -> str:
    """``max_rows`` bounds the ledger and label tables (0 = no bound), so the whole
    text stays within a PR comment's 65,536 characters; the ledger is sorted by
    urgency, so what is cut is the least urgent. Sections follow
    :data:`testfleet.report.sections.ORDER`."""
    out: list[str] = [f"## testfleet report — {md(report.project)}", "",
                      f"**{md(report.headline())}**", ""]
    for ident in ORDER:
        if ident in SECTIONS:
            out += SECTIONS[ident](report, max_rows)
    out += [f"_{md(n)}_" for n in report.notes]
    return "\n".join(out).rstrip() + "\n"


def _holes(report: Report, max_rows: int = 0) -> list[str]:
    if not report.holes:
        return ["✅ No coverage holes: every stage and backend has tests that can run.", ""]
    out = [f"### 🚨 Coverage holes ({len(report.holes)})", ""]
    for h in report.holes:
        lost = f" — {fmt.lost(h.lost)}" if h.lost else ""
        out.append(f"- **{h.kind} {code(h.name)}** — {md(fmt.cause(h.cause))}: {md(h.detail)}{lost}")
    return [*out, ""]


def _dormant(report: Report, max_rows: int = 0) -> list[str]:
    if not report.dormant:
        return []
    out = ["### 💤 Dormant stages", ""]
    out += _table(["stage", "backend", "reason", "reference", "registrations", "would run",
                   "switch back on at"],
                  [[code(s.name), md(s.backend), md(s.reason or ""), md(describe(s.references)),
                    str(s.counts.total), str(s.counts.active), code(_where(report, s))]
                   for s in report.dormant],
                  "llllrrl")
    return [*out, ""]


def _matrix(report: Report, max_rows: int = 0) -> list[str]:
    with_health = report.results is not None and report.results.available
    rows = []
    for s in report.stages:
        hole = any(h.kind == "stage" and h.name == s.name for h in report.holes)
        health = report.health_of(s.name)
        rows.append([("🚨 " if hole else "") + code(s.name), md(s.backend), _status(s, health),
                     *([_last_run(health)] if with_health else []),
                     *[str(s.counts.get(c)) for c in CATEGORIES], str(s.counts.total),
                     fmt.duration(s.counts.est_seconds)])
    t = report.totals
    rows.append(["**all stages**", "", "", *([""] if with_health else []),
                 *[f"**{t.get(c)}**" for c in CATEGORIES], f"**{t.total}**",
                 fmt.duration(t.est_seconds)])
    head = ["stage", "backend", "status", *(["last run"] if with_health else []), *CATEGORIES,
            "total", "est. time"]
    out = ["### Coverage matrix", ""]
    out += _table(head, rows, ("llll" if with_health else "lll") + "r" * (len(CATEGORIES) + 2))
    return [*out, ""]


def _status(s: StageRow, health: StageHealth | None) -> str:
    if s.status == "active" and health is not None and health.failing:
        return f"✖ **{health.state}** ({md(health.streak_text)})"
    return {"active": "active", "dormant": "💤 dormant", "unconfigured": "⚠ unconfigured"}[s.status]


def _last_run(health: StageHealth | None) -> str:
    if health is None:
        return "no results"
    last = health.last
    text = f"{last.outcome.lower()} {md(last.when)}"
    if last.url:
        return f"{text} · {link(last.label, last.url)}"
    return f"{text} · {md(last.label)}" if last.ci_run_id or last.commit else text


def _findings(report: Report, max_rows: int = 0) -> list[str]:
    if not report.findings:
        return []
    return ["### Check rules", ""] + [f"- {md(f)}" for f in report.findings] + [""]


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


def _history_md(report: Report, max_rows: int = 0) -> list[str]:
    h = report.history
    if not h.available:
        return [f"_History: {md(h.note)}_", ""]
    return [f"_History: {md(h.note)}_", ""] if h.note else []


def _drift_md(report: Report, max_rows: int = 0) -> list[str]:
    h = report.history
    if not h.available or not h.drift:
        return []
    out = [f"### Duration drift (factor ≥ {h.drift_factor:g})", ""]
    out += _table(["file", "stage", "est_time", "measured", "samples", "factor"],
                  [[code(d.file), code(d.stage), fmt.measured(d.literal), fmt.measured(d.measured),
                    str(d.samples), fmt.factor(d.factor)] for d in h.drift], "llrrrr")
    return [*out, ""]


def _gates_md(report: Report, max_rows: int = 0) -> list[str]:
    h = report.history
    if not h.available or not h.gates:
        return []
    out = ["### Metric gates", "",
           "Last verdict: the gate's verdict on the file in its last gated run, as recorded "
           "with the file's result (what *Failing now* reads); baseline runs: runs stored in "
           "the gate's history.", ""]
    rows = []
    for g in h.gates:
        verdict = f"**{md(g.last_verdict)}**" if g.last_verdict in ("FAIL", "ERROR") else \
            md(g.last_verdict or "—")
        verdict += f" ({md(g.last_mode)})" if g.last_mode else ""
        verdict += " (baseline run)" if g.last_source == "baseline" else ""
        when = md(g.last_run or "—")
        if g.last_url:
            when += f" · {link(f'run {g.last_ci_run_id or chr(63)}', g.last_url)}"
        rows.append([code(g.file), code(g.suite), code(g.metric), str(g.coordinates), verdict,
                     when, str(g.runs), str(g.untrusted_runs)])
    out += _table(["file", "suite", "metric", "coordinates", "last verdict", "last run",
                   "baseline runs", "untrusted"], rows, "lllrllrr")
    return [*out, ""]


def _trends_md(report: Report, max_rows: int = 0) -> list[str]:
    h = report.history
    if not h.available or not h.trends:
        return []
    out: list[str] = []
    moving, flat = split_trends(h.trends)
    if moving:
        out += ["### Metric trends that moved", ""]
        out += _table(["metric", "file", "step", "runs", "range", "last", "untrusted"],
                      [[code(t.metric), code(t.file), *[md(c) for c in moving_row(t)]]
                       for t in moving], "lllrlrr")
        out.append("")
    if flat:
        out += [f"_{md(flat_line(flat))}_", ""]
    return out


#: Each section of :data:`testfleet.report.sections.ORDER` as Markdown lines
#: (``max_rows`` bounds the long tables).
SECTIONS: dict[str, Callable[[Report, int], list[str]]] = {
    "failing": lambda r, n: failing_lines(r),
    "holes": _holes,
    "dormant": _dormant,
    "matrix": _matrix,
    "backends": lambda r, n: [_groups_md("Backends", r.backends, open_=True)],
    "labels": lambda r, n: ([_groups_md("Labels", r.labels, open_=False, max_rows=n)]
                            if r.labels else []),
    "ledger": lambda r, n: _ledger_md(r, n),
    "plan": lambda r, n: _plan_md(r) if r.plan is not None else [],
    "drift": _drift_md,
    "gates": _gates_md,
    "trends": _trends_md,
    "history": _history_md,
    "results": lambda r, n: markdown_lines(r.results, generated_epoch(r)),
    "findings": _findings,
}
