"""What the history database adds to the report: duration drift, gates, metric trends.

Derived here from what the application floor read (:mod:`testfleet.app.report_history`
opens the history once per report); nothing here opens a database.

Every part is optional. A missing, locked, foreign or newer-schema database is a note
in the report ("no history yet"), never a failure: the report must work on a fresh
checkout. The database is opened read-only; nothing is created or migrated.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from testfleet.config import Config
from testfleet.registry.model import Registration
from testfleet.report.model import DriftRow


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
