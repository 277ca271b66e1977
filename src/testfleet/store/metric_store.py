"""The metric-gate contract on an open :class:`~testfleet.store.core.Store`.

Kept apart from :mod:`testfleet.store.metrics` (the tables and their queries): the
facade needs the ``Store``, and the store's schema needs the metric tables, so in one
module the three made a circle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from testfleet.store.metrics import (
    GateRun,
    HistoryRow,
    StoredValue,
    history,
    mark_untrusted,
    read_baseline_one,
    read_baselines,
    validate_run,
    write_run,
)

if TYPE_CHECKING:
    from testfleet.store.core import Store


class MetricStore:
    """The metric-gate contract on an open :class:`~testfleet.store.core.Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def write_run(self, run: GateRun, values: Sequence[StoredValue], *, trusted: bool) -> int:
        """One transaction; invalid input (non-finite values, ...) is refused before any write."""
        values = list(values)
        validate_run(run, values)
        with self.store.write() as conn:
            return write_run(conn, run, values, trusted)

    def baselines(self, identity: tuple[str, str, str, str],
                  coordinates: Sequence[tuple[str, str, str, int]],
                  limit: int) -> dict[tuple[str, str, str, int], list[float]]:
        if not coordinates:
            return {}
        with self.store.read() as conn:
            return read_baselines(conn, identity, coordinates, limit)

    def baselines_per_coordinate(self, identity: tuple[str, str, str, str],
                                 coordinates: Sequence[tuple[str, str, str, int]],
                                 limit: int) -> dict[tuple[str, str, str, int], list[float]]:
        """One query per coordinate (the benchmark's reference point)."""
        out: dict[tuple[str, str, str, int], list[float]] = {}
        with self.store.read() as conn:
            for c in coordinates:
                values = read_baseline_one(conn, identity, c, limit)
                if values:
                    out[tuple(c)] = values  # type: ignore[index]
        return out

    def mark_untrusted(self, *, run_id: str | None = None, ci_run_id: str | None = None,
                       commit: str | None = None) -> int:
        with self.store.write() as conn:
            return mark_untrusted(conn, run_id=run_id, ci_run_id=ci_run_id, commit=commit)

    def history(self, test_path: str, *, metric_key: str | None = None,
                runs: int = 20) -> list[HistoryRow]:
        with self.store.read() as conn:
            return history(conn, test_path, metric_key=metric_key, runs=runs)
