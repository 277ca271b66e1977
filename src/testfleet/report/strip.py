"""The pass/fail strip of one file over its recent runs: inline SVG, no script.

One cell per run, oldest left; the colour says the outcome and a ``<title>`` (shown by
browsers as a tooltip) says outcome, date, commit and reason. A cell links to its CI
run when the run's URL is known.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

from testfleet.report.svg import esc
from testfleet.results.model import RunResult

COLORS = {"PASSED": "#2f9e66", "FLAKY": "#e0a526", "FAILED": "#d0574a", "TIMEOUT": "#9c2f24",
          "ERROR": "#7a4fb5"}
CELL, GAP, HEIGHT = 10, 2, 14


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


def result_strip(runs: Sequence[RunResult], url: Callable[[RunResult], str | None] | None = None,
                 slots: int = 0) -> str:
    """``runs`` newest first (as read); ``slots`` pads the strip to a common width."""
    ordered = list(reversed(runs))
    n = max(len(ordered), slots)
    width = n * (CELL + GAP) - GAP if n else CELL
    summary = ", ".join(f"{sum(1 for r in runs if r.outcome == o)} {o.lower()}"
                        for o in COLORS if any(r.outcome == o for r in runs))
    parts = [f'<svg class="strip" width="{width}" height="{HEIGHT}" viewBox="0 0 {width} {HEIGHT}" '
             f'role="img" aria-label="{esc(f"last {len(runs)} runs: {summary}")}">']
    offset = (n - len(ordered)) * (CELL + GAP)
    for i, r in enumerate(ordered):
        x = offset + i * (CELL + GAP)
        title = f"{r.outcome} {_when(r.ts)}"
        if r.commit:
            title += f" {r.commit[:10]}"
        if r.gate_status:
            title += f" (gate {r.gate_status}, {r.gate_mode})"
        if r.reason and not r.passed:
            title += f": {r.reason[:200]}"
        cell = (f'<rect class="run {r.outcome.lower()}" x="{x}" y="1" width="{CELL}" '
                f'height="{HEIGHT - 2}" rx="2" fill="{COLORS.get(r.outcome, "#888")}">'
                f"<title>{esc(title)}</title></rect>")
        link = url(r) if url else None
        parts.append(f'<a href="{esc(link)}">{cell}</a>' if link else cell)
    parts.append("</svg>")
    return "".join(parts)
