"""One test's result as the runner records it, without the database layer.

:class:`CaseRow` and its column payload live apart from the ``testcases`` table
(store.testcases, which imports SQLAlchemy) so the runner can build rows, and the
standard-library SQLite writer (store.sqlite_read) can store them, without importing
SQLAlchemy; store.testcases re-exports both.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from testfleet.store.durations import CASE_OUTCOMES
from testfleet.store.errors import InvalidExecution

NAME_MAX = 1024


@dataclass(frozen=True)
class CaseRow:
    """One test's result in one attempt of one file."""

    file: str
    stage: str
    backend: str
    name: str
    outcome: str
    duration: float = 0.0
    attempt: int = 1
    commit: str | None = None
    ci_run_id: str | None = None
    timestamp: float | None = None
    final: bool = True
    signature: str | None = None  # the failing test's signature digest (store.signatures)

    def problems(self) -> list[str]:
        out: list[str] = []
        for field_name in ("file", "stage", "backend", "name"):
            value = getattr(self, field_name)
            if not isinstance(value, str) or not value:
                out.append(f"{field_name} must be a non-empty string")
        if len(self.name or "") > NAME_MAX:
            out.append(f"name longer than {NAME_MAX} characters")
        if self.outcome not in CASE_OUTCOMES:
            out.append(f"outcome {self.outcome!r} is not one of {', '.join(CASE_OUTCOMES)}")
        if (isinstance(self.duration, bool) or not isinstance(self.duration, (int, float))
                or not math.isfinite(self.duration) or self.duration < 0):
            out.append(f"duration must be a finite number >= 0, got {self.duration!r}")
        if isinstance(self.attempt, bool) or not isinstance(self.attempt, int) or self.attempt < 1:
            out.append(f"attempt must be an integer >= 1, got {self.attempt!r}")
        if self.signature is not None and (not isinstance(self.signature, str)
                                           or len(self.signature) != 16
                                           or self.signature.strip("0123456789abcdef")):
            out.append(f"signature must be 16 lower-case hex digits or None, got "
                       f"{self.signature!r:.40}")
        return out


def case_payload(rows: Sequence[CaseRow], now: float | None = None) -> list[dict[str, Any]]:
    """The ``testcases`` columns of ``rows``, validated (also written by
    store.sqlite_read's writer); a bad row rejects them all."""
    bad = [f"{r.file}::{r.name}: {p}" for r in rows for p in r.problems()]
    if bad:
        raise InvalidExecution("refusing to record testcases:\n  " + "\n  ".join(bad[:20]))
    now = time.time() if now is None else now
    return [
        {"file": r.file, "stage": r.stage, "backend": r.backend, "name": r.name,
         "outcome": r.outcome, "duration": float(r.duration), "attempt": r.attempt,
         "final": bool(r.final),
         "commit_sha": r.commit, "ci_run_id": r.ci_run_id,
         "ts": now if r.timestamp is None else float(r.timestamp), "recorded_at": now,
         "signature": r.signature}
        for r in rows
    ]
