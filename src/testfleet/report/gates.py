"""Metric-gate history for the report: gated tests, last verdicts, untrusted runs, trends.

Derived from the gate tables of the history database (``testfleet.store.metrics``), read
once by the application floor, for every file that declares a gate. A run is stored with ``trusted`` = its verdict on baseline
cadences, or flipped later by ``testfleet gate untrust``; so the latest run of a
metric reads as PASS (trusted), FAIL (the gate rejected it) or UNTRUSTED (marked).
The band drawn for a coordinate is the corridor the next run will be judged against:
the mean of the last ``gate.window`` trusted values, widened by the declared
constraint (the same formula as :meth:`testfleet.gate.spec.GateSpec.corridor`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from testfleet.report.model import GateRow, TrendPoint, TrendSeries
from testfleet.report.trends import worth_drawing

MAX_TRENDS = 36
RUNS_PER_TEST = 60

Coord = tuple[str, str, str, str, str, str, int]  # backend, suite, env, metric, steps, constraint, step


def gate_section(histories: Mapping[str, Sequence[Any]], window: int
                 ) -> tuple[tuple[GateRow, ...], tuple[TrendSeries, ...], str]:
    """(gate rows, trend series, note) from each gated file's metric history (newest run
    first, at most :data:`RUNS_PER_TEST` runs, read by the application floor); empty when
    nothing was recorded."""
    rows: list[GateRow] = []
    series: list[TrendSeries] = []
    files = sorted(histories)
    for file in files:
        file_rows, file_series = summarize(file, histories[file], window)
        rows.extend(file_rows)
        series.extend(file_series)
    note = ""
    if files and not rows:
        note = f"{len(files)} gated test file(s), no baseline runs of their gates stored yet"
    # what moved first, so the cap below drops flat coordinates before a series that moved
    series.sort(key=lambda s: (not _latest_untrusted(s), not worth_drawing(s), s.file,
                               s.metric, s.step))
    if len(series) > MAX_TRENDS:
        more = len(series) - MAX_TRENDS
        note = "; ".join(x for x in (note, f"{more} more trend coordinate(s) not drawn") if x)
        series = series[:MAX_TRENDS]
    return tuple(rows), tuple(series), note


def summarize(file: str, history: Sequence[Any], window: int
              ) -> tuple[list[GateRow], list[TrendSeries]]:
    """Pure: one file's history rows (newest run first) as gate rows and trend series."""
    by_metric: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    by_coord: dict[Coord, list[Any]] = defaultdict(list)
    for h in history:
        by_metric[(h.backend, h.suite, h.metric_key)].append(h)
        by_coord[(h.backend, h.suite, h.env_key, h.metric_key, h.steps_key, h.constraint_key,
                  h.step)].append(h)
    rows = []
    for (backend, suite, metric), items in sorted(by_metric.items()):
        latest_pk = max(h.run_pk for h in items)
        latest = [h for h in items if h.run_pk == latest_pk]
        runs: dict[int, Any] = {}
        for h in items:
            runs.setdefault(h.run_pk, h)
        rows.append(GateRow(
            file=file, backend=backend, suite=suite, metric=metric,
            coordinates=len({(h.steps_key, h.constraint_key, h.step) for h in latest}),
            last_verdict=verdict(latest[0]), last_run=_when(latest[0].recorded_at),
            runs=len(runs), untrusted_runs=sum(1 for h in runs.values() if not h.trusted),
            last_source="baseline", last_ts=latest[0].recorded_at,
            last_ci_run_id=getattr(latest[0], "ci_run_id", None),
        ))
    series = []
    for coord, items in sorted(by_coord.items()):
        items = sorted(items, key=lambda h: h.run_pk)  # oldest first
        trusted_newest = [h.value for h in reversed(items) if h.trusted and math.isfinite(h.value)]
        used = trusted_newest[:window]
        reference = math.fsum(used) / len(used) if used else None
        band = corridor(_constraint(coord[5]), reference) if reference is not None else None
        env = f" · env {coord[2]}" if coord[2] else ""
        series.append(TrendSeries(
            file=file, metric=coord[3], step=coord[6],
            points=tuple(TrendPoint(_when(h.recorded_at), h.value, h.trusted, h.run_id) for h in items),
            reference=reference, band=band, label=f"{coord[1]}{env}",
        ))
    return rows, series


def verdict(h: Any) -> Literal["PASS", "FAIL", "UNTRUSTED"]:
    if h.trusted:
        return "PASS"
    return "UNTRUSTED" if getattr(h, "untrusted_by", None) else "FAIL"


def corridor(constraint: Mapping[str, float], reference: float) -> tuple[float, float] | None:
    """``[ref - max(rel_down*|ref|, abs_floor_down), ref + max(rel_up*|ref|, abs_floor_up)]``."""
    if not constraint:
        return None
    down = max(constraint.get("rel_down", 0.0) * abs(reference), constraint.get("abs_floor_down", 0.0))
    up = max(constraint.get("rel_up", 0.0) * abs(reference), constraint.get("abs_floor_up", 0.0))
    return reference - down, reference + up


def _constraint(key: str) -> dict[str, float]:
    try:
        data = json.loads(key)
    except (TypeError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def _when(epoch: float) -> str:
    try:
        return dt.datetime.fromtimestamp(epoch, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return "?"


def _latest_untrusted(s: TrendSeries) -> bool:
    return bool(s.points) and not s.points[-1].trusted
