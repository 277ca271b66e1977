"""What the history database adds to the report: duration drift, gates, metric trends.

Every part is optional. A missing, locked, foreign or newer-schema database is a note
in the report ("no history yet"), never a failure: the report must work on a fresh
checkout. The database is opened read-only; nothing is created or migrated.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from testfleet.config import Config, Project
from testfleet.registry.model import Registration
from testfleet.report.model import DriftRow, GateRow, HistorySection, TrendSeries


def load_history(project: Project, registrations: Sequence[Registration],
                 url: str | None = None, gate_files: Sequence[str] = ()) -> HistorySection:
    """Read durations (and metric history when the store has it); notes instead of errors."""
    cfg = project.config
    try:
        from testfleet.store import StoreError, open_store
    except ImportError as exc:  # pragma: no cover - the store ships with testfleet
        return HistorySection(False, f"history store unavailable: {exc}", drift_factor=cfg.durations.drift_factor)
    try:
        store = open_store(project, url, readonly=True)
    except StoreError as exc:
        return HistorySection(False, f"no history: {exc}", drift_factor=cfg.durations.drift_factor)
    notes: list[str] = []
    try:
        with store:
            measured = _durations(store, registrations, cfg.durations.window)
            gates, trends, gate_note = _metrics(store, project, gate_files)
            if gate_note:
                notes.append(gate_note)
    except StoreError as exc:
        return HistorySection(False, f"history unreadable: {exc}", drift_factor=cfg.durations.drift_factor)
    drift = drift_rows(registrations, measured, cfg)
    if not measured:
        notes.insert(0, "no durations recorded yet")
    return HistorySection(True, "; ".join(notes), drift=tuple(drift),
                          drift_factor=cfg.durations.drift_factor, gates=gates, trends=trends)


def _durations(store: Any, regs: Sequence[Registration], window: int) -> dict[tuple[str, str], list[float]]:
    by_stage: dict[str, set[str]] = defaultdict(set)
    for reg in regs:
        if reg.disabled is None:
            by_stage[reg.suite].add(reg.file)
    out: dict[tuple[str, str], list[float]] = {}
    for stage, files in sorted(by_stage.items()):
        for file, values in store.durations(stage, sorted(files), window).items():
            out[(stage, file)] = list(values)
    return out


def statistic(values: Sequence[float], kind: str) -> float:
    """The configured robust statistic (``median`` or ``p90``) of measured durations."""
    vals = sorted(v for v in values if math.isfinite(v) and v >= 0)
    if not vals:
        return math.nan
    if kind == "p90":
        k = max(0, math.ceil(0.9 * len(vals)) - 1)
        return vals[k]
    return float(statistics.median(vals))


def drift_rows(regs: Sequence[Registration], measured: Mapping[tuple[str, str], Sequence[float]],
               cfg: Config) -> list[DriftRow]:
    """Registrations whose literal is off from history by ``durations.drift_factor`` or more."""
    factor = cfg.durations.drift_factor
    rows = []
    for reg in regs:
        values = measured.get((reg.suite, reg.file))
        if reg.disabled is not None or not values or len(values) < cfg.durations.min_samples:
            continue
        m = statistic(values, cfg.durations.statistic)
        if not math.isfinite(m) or reg.est_time <= 0:
            continue
        ratio = m / reg.est_time if m > 0 else 0.0
        if ratio >= factor or (ratio > 0 and 1 / ratio >= factor) or ratio == 0:
            rows.append(DriftRow(reg.file, reg.suite, reg.est_time, m, len(values), ratio))
    rows.sort(key=lambda d: (-abs(math.log(d.factor)) if d.factor > 0 else -math.inf, d.file, d.stage))
    return rows


def _metrics(store: Any, project: Project, gate_files: Sequence[str]
             ) -> tuple[tuple[GateRow, ...], tuple[TrendSeries, ...], str]:
    """Gate rows and trend series; a database without the gate tables yet is a note."""
    if not gate_files:
        return (), (), ""
    from sqlalchemy.exc import SQLAlchemyError

    from testfleet.report.gates import gate_history
    from testfleet.store import StoreError

    try:
        return gate_history(store, project, gate_files)
    except (SQLAlchemyError, StoreError) as exc:
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return (), (), f"metric history unreadable ({first}); run 'testfleet db upgrade'"
