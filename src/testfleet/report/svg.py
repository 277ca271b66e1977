"""Inline SVG charts for the HTML report: no scripts, no external assets.

Every chart is a pure function from data to an SVG string. Text from the tree goes
through :func:`esc`; hover details use SVG ``<title>`` elements, which browsers show
as tooltips without JavaScript.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from testfleet.report import fmt
from testfleet.report.model import CATEGORIES, Counts, LedgerEntry, StageTimeline, TrendSeries

CAT_COLORS = {"enabled": "#2f9e66", "label-gated": "#3b82c4", "nightly-only": "#8b6fd6",
              "at-risk": "#e0a526", "disabled": "#d0574a"}
FILE_SHADES = ("#3b82c4", "#5b9bd5", "#2f6fa8", "#7fb2e3")
AGE_BINS: tuple[tuple[str, int, int], ...] = (
    ("< 1 wk", 0, 7), ("1\u20134 wk", 7, 30), ("1\u20133 mo", 30, 90),
    ("3\u20136 mo", 90, 182), ("6\u201312 mo", 182, 365), ("> 1 yr", 365, 10**9),
)


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _n(x: float) -> str:
    """Compact, locale-free coordinates."""
    return f"{x:.1f}".rstrip("0").rstrip(".") if math.isfinite(x) else "0"


def stacked_bar(counts: Counts, width: int = 200, height: int = 14) -> str:
    """One row of the coverage matrix as a bar split by category."""
    total = counts.total
    title = ", ".join(f"{c}: {counts.get(c)}" for c in CATEGORIES)
    # preserveAspectRatio none: in a narrow matrix the bar may shrink sideways, keeping its height
    parts = [f'<svg class="bar" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             'preserveAspectRatio="none" '
             f'role="img" aria-label="{esc(title)}">']
    parts.append(f'<rect width="{width}" height="{height}" rx="3" fill="var(--track)"/>')
    x = 0.0
    for cat in CATEGORIES:
        n = counts.get(cat)
        if not n or not total:
            continue
        w = width * n / total
        parts.append(f'<rect x="{_n(x)}" width="{_n(w)}" height="{height}" fill="{CAT_COLORS[cat]}">'
                     f"<title>{esc(cat)}: {n}</title></rect>")
        x += w
    parts.append("</svg>")
    return "".join(parts)


def age_histogram(entries: Sequence[LedgerEntry], width: int = 460, height: int = 170) -> str:
    """How long things have been disabled: a bar per age bin plus an "unknown" bar."""
    bins = [(label, sum(1 for e in entries if e.age_days is not None and lo <= e.age_days < hi))
            for label, lo, hi in AGE_BINS]
    unknown = sum(1 for e in entries if e.age_days is None)
    if unknown:
        bins.append(("unknown", unknown))
    top = max((c for _, c in bins), default=0) or 1
    pad_l, pad_b, pad_t = 8, 34, 18
    slot = (width - pad_l * 2) / len(bins)
    plot_h = height - pad_b - pad_t
    out = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'role="img" aria-label="disabled-age distribution">']
    out.append(f'<line x1="{pad_l}" y1="{height - pad_b}" x2="{width - pad_l}" '
               f'y2="{height - pad_b}" stroke="var(--grid)"/>')
    for i, (label, c) in enumerate(bins):
        h = plot_h * c / top
        x = pad_l + i * slot + slot * 0.15
        w = slot * 0.7
        color = "var(--muted)" if label == "unknown" else (
            "#d0574a" if i >= 3 else "#e39a3b" if i >= 2 else "#c7a93a")
        y = height - pad_b - h
        out.append(f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(max(h, 0))}" '
                   f'rx="2" fill="{color}"><title>{esc(label)}: {c}</title></rect>')
        out.append(f'<text x="{_n(x + w / 2)}" y="{_n(y - 4)}" text-anchor="middle" '
                   f'class="v">{c}</text>')
        out.append(f'<text x="{_n(x + w / 2)}" y="{height - pad_b + 14}" text-anchor="middle" '
                   f'class="t">{esc(label)}</text>')
    out.append("</svg>")
    return "".join(out)


def nice_ticks(hi: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``hi``."""
    if hi <= 0 or not math.isfinite(hi):
        return [0.0]
    raw = hi / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    n = math.ceil(hi / step - 1e-9)
    return [i * step for i in range(n + 1)]


def _time_ticks(hi: float) -> list[float]:
    """Ticks at round durations (seconds, minutes, hours), at most nine of them."""
    for unit in (1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0,
                 3600.0, 7200.0, 14400.0, 28800.0, 86400.0):
        if hi / unit <= 8:
            return [i * unit for i in range(int(hi // unit) + 1)]
    return nice_ticks(hi)


def shard_timeline(t: StageTimeline, width: int = 1060, row_h: int = 22) -> str:
    """Each shard as a horizontal bar of its files, against the lower bound and makespan."""
    label_w, pad_r, top, bottom = 64, 16, 8, 26
    scale_hi = max(t.makespan, t.lower_bound, 1.0) * 1.04
    plot_w = width - label_w - pad_r
    height = top + row_h * len(t.shards) + bottom

    def x(sec: float) -> float:
        return label_w + plot_w * sec / scale_hi

    out = [f'<svg class="chart wide" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" preserveAspectRatio="xMinYMin meet" '
           f'role="img" aria-label="shard timeline of {esc(t.stage)}">']
    for tick in _time_ticks(scale_hi):
        out.append(f'<line x1="{_n(x(tick))}" y1="{top}" x2="{_n(x(tick))}" '
                   f'y2="{height - bottom}" stroke="var(--grid)"/>')
        out.append(f'<text x="{_n(x(tick))}" y="{height - bottom + 14}" text-anchor="middle" '
                   f'class="t">{esc(fmt.duration(tick))}</text>')
    for i, bar in enumerate(t.shards):
        y = top + i * row_h
        out.append(f'<text x="{label_w - 8}" y="{y + row_h * 0.68:.1f}" text-anchor="end" '
                   f'class="t">shard {bar.shard}</text>')
        pos = 0.0
        for j, (file, est, source) in enumerate(bar.files):
            x0, x1 = x(pos), x(pos + est)
            out.append(f'<rect x="{_n(x0)}" y="{y + 3}" width="{_n(max(x1 - x0 - 0.6, 0.6))}" '
                       f'height="{row_h - 6}" fill="{FILE_SHADES[j % len(FILE_SHADES)]}">'
                       f"<title>{esc(file)} — {esc(fmt.duration(est))}"
                       f"{' (' + esc(source) + ')' if source else ''}</title></rect>")
            pos += est
        if not bar.files:  # a job without per-file detail: one block
            out.append(f'<rect x="{_n(x(0))}" y="{y + 3}" width="{_n(x(bar.estimate) - x(0))}" '
                       f'height="{row_h - 6}" fill="{FILE_SHADES[0]}"/>')
        out.append(f'<text x="{_n(x(bar.estimate) + 4)}" y="{y + row_h * 0.68:.1f}" '
                   f'class="v">{esc(fmt.duration(bar.estimate))}</text>')
    lb, mk = x(t.lower_bound), x(t.makespan)
    out.append(f'<line x1="{_n(lb)}" y1="{top - 4}" x2="{_n(lb)}" y2="{height - bottom}" '
               f'stroke="#2f9e66" stroke-width="2" stroke-dasharray="4 3">'
               f"<title>lower bound {esc(fmt.duration(t.lower_bound))}</title></line>")
    out.append(f'<line x1="{_n(mk)}" y1="{top - 4}" x2="{_n(mk)}" y2="{height - bottom}" '
               f'stroke="#d0574a" stroke-width="1.5"><title>makespan '
               f"{esc(fmt.duration(t.makespan))}</title></line>")
    out.append("</svg>")
    return "".join(out)


def _value_ticks(lo: float, hi: float, count: int = 4) -> list[float]:
    """Round values inside ``[lo, hi]`` (about ``count`` of them) for a y axis."""
    span = hi - lo
    if not (math.isfinite(span) and span > 0):
        return [lo]
    raw = span / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    ticks: list[float] = []
    v = first
    while v <= hi + step * 1e-9 and len(ticks) < 12:
        ticks.append(0.0 if abs(v) < step * 1e-9 else v)
        v += step
    return ticks


def trend_chart(s: TrendSeries, width: int = 340, height: int = 160) -> str:
    """One coordinate's values over runs: trusted points, untrusted points and the band."""
    pad_l, pad_r, pad_t, pad_b = 52, 10, 10, 22
    values = [p.value for p in s.points if math.isfinite(p.value)]
    extra = [v for v in ([s.reference] if s.reference is not None else []) if math.isfinite(v)]
    if s.band:
        extra += [v for v in s.band if math.isfinite(v)]
    allv = values + extra
    lo, hi = (min(allv), max(allv)) if allv else (0.0, 1.0)
    if hi - lo < 1e-12:
        lo, hi = lo - (abs(lo) * 0.05 or 1), hi + (abs(hi) * 0.05 or 1)
    margin = (hi - lo) * 0.08
    lo, hi = lo - margin, hi + margin
    n = max(len(s.points), 1)
    pw, ph = width - pad_l - pad_r, height - pad_t - pad_b

    def px(i: int) -> float:
        return pad_l + (pw * (i + 0.5) / n)

    def py(v: float) -> float:
        return pad_t + ph * (1 - (v - lo) / (hi - lo))

    out = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'role="img" aria-label="trend of {esc(s.metric)} step {s.step}">']
    for v in _value_ticks(lo, hi):
        out.append(f'<line x1="{pad_l}" y1="{_n(py(v))}" x2="{width - pad_r}" y2="{_n(py(v))}" '
                   f'stroke="var(--grid)"/>')
        out.append(f'<text x="{pad_l - 4}" y="{_n(py(v) + 3)}" text-anchor="end" class="t">'
                   f"{esc(_short_num(v))}</text>")
    if s.band:
        b0, b1 = sorted(s.band)
        out.append(f'<rect x="{pad_l}" y="{_n(py(b1))}" width="{pw}" '
                   f'height="{_n(max(py(b0) - py(b1), 1))}" fill="#2f9e66" fill-opacity="0.14">'
                   f"<title>band [{esc(_short_num(b0))}, {esc(_short_num(b1))}]</title></rect>")
    if s.reference is not None and math.isfinite(s.reference):
        out.append(f'<line x1="{pad_l}" y1="{_n(py(s.reference))}" x2="{width - pad_r}" '
                   f'y2="{_n(py(s.reference))}" stroke="#2f9e66" stroke-dasharray="5 3">'
                   f"<title>reference {esc(_short_num(s.reference))}</title></line>")
    trusted = [(px(i), py(p.value)) for i, p in enumerate(s.points)
               if p.trusted and math.isfinite(p.value)]
    if len(trusted) > 1:
        out.append('<polyline fill="none" stroke="#3b82c4" stroke-width="1.5" points="'
                   + " ".join(f"{_n(a)},{_n(b)}" for a, b in trusted) + '"/>')
    for i, p in enumerate(s.points):
        if not math.isfinite(p.value):
            continue
        cx, cy = px(i), py(p.value)
        tip = f"<title>{esc(p.when)} {esc(_short_num(p.value))} {'trusted' if p.trusted else 'untrusted'}" \
              f"{' ' + esc(p.run) if p.run else ''}</title>"
        if p.trusted:
            out.append(f'<circle cx="{_n(cx)}" cy="{_n(cy)}" r="3.5" fill="#3b82c4">{tip}</circle>')
        else:
            out.append(f'<g stroke="#d0574a" stroke-width="2"><line x1="{_n(cx - 4)}" '
                       f'y1="{_n(cy - 4)}" x2="{_n(cx + 4)}" y2="{_n(cy + 4)}"/><line '
                       f'x1="{_n(cx - 4)}" y1="{_n(cy + 4)}" x2="{_n(cx + 4)}" y2="{_n(cy - 4)}"/>'
                       f"{tip}</g>")
    out.append(f'<text x="{pad_l}" y="{height - 6}" class="t">runs →  '
               f"{esc(s.points[0].when if s.points else '')}</text>")
    out.append("</svg>")
    return "".join(out)


def _short_num(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.2e}"
    return f"{v:.4g}"
