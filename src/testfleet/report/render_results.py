"""The results section in each report format (text, Markdown, JSON, HTML).

One place for the section so every format says the same: per stage the pass rate over
the runs read and the last run's outcome; a strip per file (SVG in HTML, letters
elsewhere); flaky, recovered and broken files; and, per dormant stage, its probe
history. The files failing now are the report's first section, not part of this one
(:mod:`testfleet.report.render_failing`); the JSON keeps them here as ``failing``.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING, Any

from testfleet.report.fmt import PATH_COLUMN, path_lines, path_width
from testfleet.report.htmlparts import path as html_path
from testfleet.report.htmlparts import scroll
from testfleet.report.results import ResultsSection
from testfleet.report.svg import esc
from testfleet.results.summary import LETTERS
from testfleet.textsafe import printable

if TYPE_CHECKING:
    from testfleet.documents.report import ReportResultsDoc

LEGEND = "P pass, R pass on retry, F fail, T timeout, E error; oldest left"


def generated_epoch(report: Any) -> float:
    """The report's time as epoch seconds ("failing for N days" counts to it)."""
    try:
        return dt.datetime.fromisoformat(report.generated.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError):
        return dt.datetime.now(dt.timezone.utc).timestamp()


def _date(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d")


def since(f: Any, now: float) -> str:
    """How long a file has been failing: ``≥7 runs since 2026-05-01 (≥6d)``."""
    days = max(0, int((now - f.since) // 86400))
    bound = "" if f.complete else "≥"
    return f"{bound}{f.streak} run{'s' if f.streak != 1 else ''} since {_date(f.since)} ({bound}{days}d)"


def _state(v: Any) -> str:
    return str(v.state) + (" (quarantined)" if v.quarantined else "")


def _probe_state(p: Any) -> str:
    if not p.files:
        return "no probe results yet"
    if p.ready:
        return f"READY TO RESTORE: {p.clean_streak} clean probe(s) in a row"
    return f"not ready: {p.clean_streak} of {p.restore_after} clean probe(s) in a row"


def _evidence(v: Any) -> str:
    parts = []
    if v.retry_passes:
        parts.append(f"{v.retry_passes} pass(es) on retry")
    if v.split_commits:
        parts.append(f"failed and passed on {len(v.split_commits)} commit(s)")
    if v.state == "broken":
        parts.append(f"failed all {v.runs} runs")
    if v.state == "recovered":
        parts.append(f"{v.clean_streak} clean passes in a row")
    return "; ".join(parts) or "-"


# --------------------------------------------------------------------------- text


def path_column(table: Any, header: str, paths: list[str], limit: int = PATH_COLUMN) -> Any:
    """Add a column for ``paths`` to a rich table; returns the cell maker: each path is
    wrapped after a '/' only (rich itself would fold it mid-name)."""
    from rich.text import Text

    width = path_width([printable(p) for p in paths], limit)
    # a name that fits PATH_COLUMN is never split; a longer one may fold, or the table
    # would squeeze every other column to nothing in a narrow terminal
    table.add_column(header, overflow="fold", no_wrap=width <= PATH_COLUMN)
    # a file or metric name may come from history (a merged bundle): one inert line
    return lambda p: Text(path_lines(printable(p), width))


def text_parts(r: ResultsSection | None, now: float) -> list[object]:
    from rich.table import Table
    from rich.text import Text

    if r is None:
        return []
    if not r.available or not r.files:
        return [Text(f"Results: {r.note or 'no results recorded yet'}", style="dim")]
    parts: list[object] = []
    t = Table(title=f"Results per stage (last {r.runs} runs per file)", title_justify="left")
    for col in ("stage", "files", "pass rate", "last run"):
        t.add_column(col, overflow="fold")
    for s in r.stages:
        t.add_row(Text(printable(s.stage)), str(s.files), f"{s.pass_rate:.0%} ({s.passes}/{s.runs})",
                  Text(s.last_outcome, style="red" if s.last_outcome == "FAILED" else "green"))
    parts.append(t)
    t = Table(title=f"Result strips ({LEGEND})", title_justify="left")
    t.add_column("stage", overflow="fold")
    cell = path_column(t, "file", [f.file for f in r.files])
    t.add_column("runs", overflow="fold")
    for fs in r.files:
        t.add_row(Text(printable(fs.stage)), cell(fs.file), fs.strip)
    parts.append(t)
    if r.flaky:
        t = Table(title="Flaky, recovered and broken", title_justify="left")
        t.add_column("stage", overflow="fold")
        cell = path_column(t, "file", [v.file for v in r.flaky])
        for col in ("test", "state", "rate", "evidence"):
            t.add_column(col, overflow="fold")
        for v in r.flaky:
            t.add_row(Text(printable(v.stage)), cell(v.file), Text(printable(v.test or "-")), _state(v),
                      f"{v.evidence_runs}/{v.runs}", _evidence(v))
        parts.append(t)
    for p in r.probes:
        t = Table(title=f"Probes of dormant stage {p.stage}: {_probe_state(p)}",
                  title_justify="left")
        cell = path_column(t, "file", [fs.file for fs in p.files])
        t.add_column("probes", overflow="fold")
        for fs in p.files:
            t.add_row(cell(fs.file), fs.strip)
        parts.append(t)
    return parts


# --------------------------------------------------------------------------- markdown


def markdown_lines(r: ResultsSection | None, now: float) -> list[str]:
    from testfleet.report.markdown_cells import code, md
    from testfleet.report.markdown_cells import table as _table

    if r is None:
        return []
    if not r.available or not r.files:
        return ["### Results", "", md(r.note or "no results recorded yet"), ""]
    out = ["### Results", "", f"Last {r.runs} runs per file.", ""]
    out += _table(["stage", "files", "pass rate", "last run"],
                  [[code(s.stage), str(s.files), f"{s.pass_rate:.0%} ({s.passes}/{s.runs})",
                    f"**{s.last_outcome}**" if s.last_outcome == "FAILED" else s.last_outcome]
                   for s in r.stages], "lrrl")
    out.append("")
    out += [f"#### Result strips ({md(LEGEND)})", ""]
    out += _table(["stage", "file", "runs"],
                  [[code(f.stage), code(f.file), code(f.strip)] for f in r.files])
    out.append("")
    if r.flaky:
        out += ["#### Flaky, recovered and broken", ""]
        out += _table(["stage", "file", "test", "state", "rate", "evidence"],
                      [[code(v.stage), code(v.file), code(v.test) if v.test else "-",
                        md(_state(v)), f"{v.evidence_runs}/{v.runs}", md(_evidence(v))]
                       for v in r.flaky], "llllrl")
        out.append("")
    for p in r.probes:
        out += [f"#### Probes of dormant stage {code(p.stage)}: {md(_probe_state(p))}", ""]
        if p.files:
            out += _table(["file", "probes"], [[code(fs.file), code(fs.strip)] for fs in p.files])
            out.append("")
    return out


# --------------------------------------------------------------------------- json


def json_data(r: ResultsSection | None) -> ReportResultsDoc | None:
    if r is None:
        return None
    from testfleet.results.summary import summary_json

    return {
        "available": r.available, "note": r.note, "runs": r.runs,
        "stages": [{"stage": s.stage, "files": s.files, "runs": s.runs, "passes": s.passes,
                    "pass_rate": round(s.pass_rate, 4), "last_outcome": s.last_outcome,
                    "last_run_id": s.last_run_id} for s in r.stages],
        "failing": [{"stage": f.stage, "file": f.file, "streak": f.streak, "since": f.since,
                     "complete": f.complete, "first_commit": f.first_commit,
                     "first_run_id": f.first_run_id, "last_reason": f.last.reason,
                     "last_outcome": f.last.outcome, "last_ts": f.last.ts,
                     "last_ci_run_id": f.last.ci_run_id, "last_url": r.url(f.last)}
                    for f in r.failing],
        "files": [summary_json(f, r.url) for f in r.files],
        "flaky": [v.to_json() for v in r.flaky],
        "probes": [{"stage": p.stage, "reason": p.reason, "restore_after": p.restore_after,
                    "clean_streak": p.clean_streak, "ready": p.ready,
                    "files": [{"file": fs.file, "strip": fs.strip} for fs in p.files]}
                   for p in r.probes],
    }


# --------------------------------------------------------------------------- html


CSS = (".strip{vertical-align:middle} .strip rect.run{stroke:none} "
       "td.strip-cell{white-space:nowrap}")


def html_section(r: ResultsSection | None, now: float, path: Any = html_path) -> str:
    from testfleet.report.strip import result_strip

    if r is None:
        return ""
    if not r.available or not r.files:
        return (f'<section id="results"><h2>Results</h2><p class="note">'
                f"{esc(r.note or 'no results recorded yet')}</p></section>")
    stage_rows = "".join(
        f'<tr><td class="mono nw">{esc(s.stage)}</td><td class="num">{s.files}</td>'
        f'<td class="num">{s.pass_rate:.0%} ({s.passes}/{s.runs})</td>'
        f'<td><span class="pill {"bad" if s.last_outcome == "FAILED" else "pass"}">'
        f"{esc(s.last_outcome)}</span></td></tr>" for s in r.stages)
    parts = [f'<section id="results"><h2>Results <span class="count">(last {r.runs} runs per '
             f'file)</span></h2><table class="results-stages"><thead><tr><th>stage</th>'
             f'<th class="num">files</th><th class="num">pass rate</th><th>last run</th></tr>'
             f"</thead><tbody>{stage_rows}</tbody></table>"]
    slots = max((len(f.runs) for f in r.files), default=0)
    rows = "".join(
        f'<tr><td class="mono">{esc(f.stage)}</td><td class="file">{path(f.file)}</td>'
        f'<td class="num">{f.passes}/{len(f.runs)}</td>'
        f'<td class="strip-cell">{result_strip(f.runs, r.url, slots)}</td></tr>'
        for f in r.files)
    legend = "".join(f'<span><span class="sw" style="background:{c}"></span>{esc(o.lower())}'
                     f"</span>" for o, c in _colors().items())
    parts.append(f'<h3 id="strips">Result strips</h3><table class="results-strips"><thead><tr>'
                 f'<th>stage</th><th>file</th><th class="num">passed</th><th>runs (oldest left)'
                 f'</th></tr></thead><tbody>{rows}</tbody></table><div class="legend">{legend}</div>')
    if r.flaky:
        rows = "".join(
            f'<tr><td class="mono">{esc(v.stage)}</td><td class="file">{path(v.file)}</td>'
            f'<td class="mono">{esc(v.test or "—")}</td><td><span class="pill '
            f'{"bad" if v.state == "broken" else "warn" if v.state == "flaky" else "pass"}">'
            f"{esc(_state(v))}</span></td><td class=\"num\">{v.evidence_runs}/{v.runs}</td>"
            f"<td>{esc(_evidence(v))}</td></tr>" for v in r.flaky)
        parts.append(f'<h3 id="flaky">Flaky, recovered and broken</h3><table class="results-flaky">'
                     f"<thead><tr><th>stage</th><th>file</th><th>test</th><th>state</th>"
                     f'<th class="num">rate</th><th>evidence</th></tr></thead><tbody>{rows}'
                     f"</tbody></table>")
    for p in r.probes:
        rows = "".join(
            f'<tr><td class="file">{path(fs.file)}</td><td class="strip-cell">'
            f"{result_strip(fs.runs, r.url, slots)}</td></tr>" for fs in p.files)
        pill = "pass" if p.ready else "warn"
        parts.append(f'<h3 class="probe">Probes of dormant stage <span class="mono">{esc(p.stage)}'
                     f'</span> <span class="pill {pill}">{esc(_probe_state(p))}</span></h3>'
                     + (f'<table class="results-probe"><thead><tr><th>file</th><th>probes '
                        f"(oldest left)</th></tr></thead><tbody>{rows}</tbody></table>"
                        if rows else ""))
    parts.append("</section>")
    # every table scrolls sideways in a narrow window instead of clipping its columns
    return re.sub(r"<table\b.*?</table>", lambda m: scroll(m.group(0)), "".join(parts), flags=re.S)


def _colors() -> dict[str, str]:
    from testfleet.report.strip import COLORS

    return COLORS


__all__ = ["LETTERS", "html_section", "json_data", "markdown_lines", "text_parts"]
