""""Failing now" in every format: the first section after the headline (#26).

One row per file whose last run failed, grouped by its stage's health (broken stages
first, then failing, each longest-failing first): the stage, its state, the file, how
long it has been failing, the first failing commit, its last run (when, with the CI run
link where known) and the last reason. The same rows decide each stage's health
(:mod:`testfleet.report.health`) and feed the gate table's verdicts, so the page can
never show a stage green while a file of it fails here.
"""

from __future__ import annotations

from typing import Any

from testfleet.report.health import when
from testfleet.report.htmlparts import path as html_path
from testfleet.report.htmlparts import scroll
from testfleet.report.model import Report
from testfleet.report.render_results import generated_epoch, path_column, since
from testfleet.report.svg import esc
from testfleet.textsafe import printable

#: Rows shown before the rest folds away (HTML ``<details>``, Markdown: counted), so that
#: a night where everything broke does not push the rest of the page out of reach.
SHOWN = 12


def rows(report: Report) -> list[tuple[Any, str]]:
    """(failing file, its stage's state), most urgent first; empty without results."""
    r = report.results
    if r is None or not r.available:
        return []
    rank = {h.stage: i for i, h in enumerate(report.failing_stages)}
    dormant = {s.name for s in report.dormant}
    broken = {b.lane for b in report.broken}
    state = {h.stage: h.state for h in report.health}
    ordered = sorted(r.failing, key=lambda f: (rank.get(f.stage, len(rank)), f.since, f.file))
    return [(f, "dormant" if f.stage in dormant else "runner-broken" if f.stage in broken
             else state.get(f.stage, "failing")) for f in ordered]


def held_back_html(report: Report) -> str:
    """Lanes an open breaker holds back (#41), at the top of "failing now": a runner class
    that failed at start-up is the first thing to fix, and its files are a hole until the
    probe passes."""
    if not report.broken:
        return ""
    items = "".join(
        f'<li><span class="pill runner-broken">runner-broken</span> <span class="mono">'
        f"{esc(b.lane)}</span> ({esc(b.backend)}): {esc(b.detail)} · <b>{b.lost} "
        f"registration(s) held back</b></li>" for b in report.broken)
    return (f'<div class="held-back" id="held-back"><h3>Held back by a runner-class breaker '
            f'({len(report.broken)})</h3><ul>{items}</ul></div>')


def count_line(report: Report) -> str:
    failing = rows(report)
    stages = {f.stage for f, _ in failing}
    broken = sum(1 for h in report.failing_stages if h.state == "broken")
    out = (f"{len(failing)} file{'s' if len(failing) != 1 else ''} in {len(stages)} "
           f"stage{'s' if len(stages) != 1 else ''}")
    return out + (f", {broken} broken" if broken else "")


def nothing_failing(report: Report) -> str | None:
    """The sentence for a report with results and nothing failing; None otherwise."""
    r = report.results
    if r is None or not r.available or r.failing:
        return None
    if not r.files:
        return f"Failing now: nothing known, {r.note or 'no results recorded yet'}"
    return (f"Nothing failing now: every file passed its last run "
            f"({len(report.health)} stage{'s' if len(report.health) != 1 else ''} with results).")


def _reason(f: Any, limit: int) -> str:
    return str(f.last.reason or f.last.outcome)[:limit]


def _url(report: Report, run: Any) -> str | None:
    return report.results.url(run) if report.results is not None else None


# --------------------------------------------------------------------------- text


def text_parts(report: Report) -> list[object]:
    from rich.table import Table
    from rich.text import Text

    r = report.results
    if r is None:
        return []
    if not r.available:
        return [Text(f"Failing now: unknown ({r.note})", style="dim")]
    ok = nothing_failing(report)
    if ok is not None:
        return [Text(("✔ " if r.files else "") + ok, style="green" if r.files else "dim")]
    failing = rows(report)
    t = Table(title=f"FAILING NOW ({count_line(report)})", title_justify="left",
              title_style="bold red", border_style="red")
    t.add_column("stage", no_wrap=True)
    t.add_column("state", overflow="fold")
    cell = path_column(t, "file", [f.file for f, _ in failing])
    for col in ("failing for", "first failing commit", "last run", "last reason"):
        t.add_column(col, overflow="fold")
    now = generated_epoch(report)
    links: dict[str, str] = {}
    for f, state in failing:
        url = _url(report, f.last)
        if url:
            links.setdefault(_run_label(f.last), url)
        # stage, commit, run id and reason come from history (a merged bundle): inert text
        t.add_row(Text(printable(f.stage)), Text(state, style="bold red" if state == "broken" else "red"),
                  cell(f.file), since(f, now), Text(printable((f.first_commit or "-")[:12])),
                  Text(f"{when(f.last.ts)}\n{printable(_run_label(f.last))}" if f.last.ci_run_id
                       else when(f.last.ts)), Text(printable(_reason(f, 200))))
    parts: list[object] = [t]
    parts += [Text(printable(f"{label}: {url}"), style="dim") for label, url in links.items()]
    return parts


# --------------------------------------------------------------------------- markdown


def markdown_lines(report: Report) -> list[str]:
    from testfleet.report.markdown_cells import code, link, md
    from testfleet.report.markdown_cells import table as _table

    r = report.results
    if r is None:
        return []
    if not r.available:
        return [f"_Failing now: unknown ({md(r.note)})_", ""]
    ok = nothing_failing(report)
    if ok is not None:
        return [("✅ " if r.files else "_") + md(ok) + ("" if r.files else "_"), ""]
    failing = rows(report)
    now = generated_epoch(report)
    out = [f"### ✖ Failing now ({md(count_line(report))})", ""]
    body = []
    for f, state in failing[:SHOWN]:
        url = _url(report, f.last)
        last = md(when(f.last.ts)) + (f" · {link(_run_label(f.last), url)}" if url else "")
        body.append([code(f.stage), f"**{state}**" if state == "broken" else state, code(f.file),
                     md(since(f, now)), code((f.first_commit or "-")[:12]), last,
                     md(_reason(f, 200))])
    out += _table(["stage", "state", "file", "failing for", "first failing commit", "last run",
                   "last reason"], body)
    if len(failing) > SHOWN:
        out += ["", f"_{len(failing) - SHOWN} more failing files in the JSON or HTML report._"]
    return [*out, ""]


def _run_label(run: Any) -> str:
    return f"run {run.ci_run_id}" if run.ci_run_id else "run"


# --------------------------------------------------------------------------- html


def html_section(report: Report, path: Any = html_path) -> str:
    r = report.results
    if r is None:
        return ""
    held = held_back_html(report)
    if not r.available:
        return (f'<section class="failing-unknown" id="failing">{held}<p class="note">Failing '
                f"now: unknown ({esc(r.note)})</p></section>")
    ok = nothing_failing(report)
    if ok is not None:
        return (f'<section class="{"failing-now" if held else "ok"}" id="failing">{held}'
                f'{"✔ " if r.files else ""}{esc(ok)}</section>')
    failing = rows(report)
    now = generated_epoch(report)

    def row(f: Any, state: str) -> str:
        url = _url(report, f.last)
        run = (f'<br><a href="{esc(url)}" rel="noopener noreferrer">{esc(_run_label(f.last))}</a>'
               if url else "")
        return (f'<tr class="frow {esc(state)}"><td class="mono nw">{esc(f.stage)}</td>'
                f'<td><span class="pill {esc(state)}">{esc(state)}</span></td>'
                f'<td class="file">{path(f.file)}</td><td>{esc(since(f, now))}</td>'
                f'<td class="mono">{esc((f.first_commit or "—")[:12])}</td>'
                f'<td class="nw">{esc(when(f.last.ts))}{run}</td>'
                f'<td class="reason">{esc(_reason(f, 300))}</td></tr>')

    head = ("<thead><tr><th>stage</th><th>state</th><th>file</th><th>failing for</th>"
            "<th>first failing commit</th><th>last run</th><th>last reason</th></tr></thead>")
    shown = "".join(row(f, s) for f, s in failing[:SHOWN])
    out = [f'<section class="failing-now" id="failing"><h2>✖ Failing now <span class="count">'
           f"({esc(count_line(report))})</span></h2>{held}"
           + scroll(f'<table class="results-failing">{head}<tbody>{shown}</tbody></table>')]
    if len(failing) > SHOWN:
        rest = "".join(row(f, s) for f, s in failing[SHOWN:])
        out.append(f"<details><summary>{len(failing) - SHOWN} more failing files</summary>"
                   + scroll(f'<table class="results-failing">{head}<tbody>{rest}</tbody></table>')
                   + "</details>")
    out.append("</section>")
    return "".join(out)
