"""Which metric trends are worth a chart, and a one-row summary of the rest.

A gate declared over every step of a deterministic curve yields one trend per step, all
flat: drawn one chart each they bury the one series that moved. So a trend is drawn only
when there is something to see — its values differ, or a run in it is untrusted or not
finite — and the flat ones are summarised per (file, metric) in one table row each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from testfleet.report.model import TrendSeries
from testfleet.textsafe import printable

# Values closer than this (relative to their magnitude) are "the same": float noise of a
# deterministic run is far below it, a real change of a training metric far above.
FLAT_TOLERANCE = 1e-6


@dataclass(frozen=True)
class FlatTrends:
    """The flat coordinates of one (file, metric, label): not drawn, counted."""

    file: str
    metric: str
    label: str
    steps: tuple[int, ...]
    runs: int  # most runs any of the coordinates has
    low: float
    high: float

    def steps_text(self) -> str:
        """``last step``, ``step 7``, ``steps 0, 10, 20`` or ``30 steps (0\u201329)``."""
        named = [s for s in self.steps if s >= 0]
        last = len(named) < len(self.steps)
        parts = []
        if len(named) == 1:
            parts.append(f"step {named[0]}")
        elif 1 < len(named) <= 5:
            parts.append("steps " + ", ".join(str(n) for n in named))
        elif named:
            parts.append(f"{len(named)} steps ({min(named)}\u2013{max(named)})")
        if last:
            parts.append("last step")
        return " + ".join(parts)

    def values_text(self) -> str:
        if self.low == self.high:
            return f"{self.low:.6g}"
        return f"{self.low:.6g} \u2026 {self.high:.6g}"


def worth_drawing(series: TrendSeries) -> bool:
    """Pure: True when the chart would show something: a change, or a run that is untrusted
    or not finite. One trusted run alone, or trusted runs of one value, is flat."""
    if any(not p.trusted or not math.isfinite(p.value) for p in series.points):
        return True
    values = [p.value for p in series.points]
    if len(values) < 2:
        return False
    low, high = min(values), max(values)
    return high - low > FLAT_TOLERANCE * max(abs(low), abs(high))


def split(trends: Sequence[TrendSeries]) -> tuple[list[TrendSeries], list[FlatTrends]]:
    """Pure: (the series to draw, in order; the flat ones grouped per file, metric, label)."""
    moving = [t for t in trends if worth_drawing(t)]
    groups: dict[tuple[str, str, str], list[TrendSeries]] = {}
    for t in trends:
        if not worth_drawing(t):
            groups.setdefault((t.file, t.metric, t.label), []).append(t)
    flat = []
    for (file, metric, label), items in groups.items():
        values = [p.value for t in items for p in t.points]
        flat.append(FlatTrends(file, metric, label, tuple(sorted(t.step for t in items)),
                               max(len(t.points) for t in items),
                               min(values, default=math.nan), max(values, default=math.nan)))
    return moving, flat


def moving_row(t: TrendSeries) -> list[str]:
    """The cells the text formats show for a series that moved: step, runs, range, last value
    and how many of its runs are untrusted."""
    values = [p.value for p in t.points]
    finite = [v for v in values if math.isfinite(v)]
    span = f"{min(finite):.6g} \u2026 {max(finite):.6g}" if finite else "-"
    step = "last step" if t.step < 0 else f"step {t.step}"
    last = f"{values[-1]:.6g}" if values else "-"
    return [step, str(len(values)), span, last, str(sum(1 for p in t.points if not p.trusted))]


def flat_line(flat: Sequence[FlatTrends]) -> str:
    """One sentence for the formats that do not draw charts."""
    n = sum(len(f.steps) for f in flat)
    # metric keys and files come from history (a merged bundle): one inert line
    names = "; ".join(f"{printable(f.metric)} {f.steps_text()} in {printable(f.file)}"
                      for f in flat)
    return f"{n} flat trend coordinate(s) (every run the same value, all trusted): {names}"
