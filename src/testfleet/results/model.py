"""What the results views read: one final verdict of one file (or test) in one run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from testfleet.documents.results import RunDoc
    from testfleet.documents.vocabulary import GateMode, GateStatus, ResultOutcome

PASSING = ("PASSED", "FLAKY")
FAILING = ("FAILED", "TIMEOUT", "ERROR")


@dataclass(frozen=True)
class RunResult:
    """The final verdict of one file (``test`` empty) or one test in one run, newest first
    in every list that holds them."""

    file: str
    stage: str
    outcome: ResultOutcome  # NOT_RUN rows are not results
    ts: float
    commit: str | None = None
    ci_run_id: str | None = None
    attempt: int = 1
    duration: float = 0.0
    gate_status: GateStatus | None = None
    gate_mode: GateMode | None = None
    reason: str | None = None
    test: str = ""
    signature: str | None = None  # a failure's signature digest (incidents, schema step 8)

    @property
    def passed(self) -> bool:
        return self.outcome in PASSING

    @property
    def failed(self) -> bool:
        return self.outcome in FAILING

    @property
    def clean(self) -> bool:
        """Passed on its first attempt (a pass on a retry is evidence of flakiness)."""
        return self.outcome == "PASSED"

    def to_json(self) -> RunDoc:
        out: RunDoc = {
            "outcome": self.outcome, "ts": self.ts, "commit": self.commit,
            "ci_run_id": self.ci_run_id, "attempt": self.attempt,
            "duration": round(self.duration, 3),
            "gate": None if self.gate_status is None else {"status": self.gate_status,
                                                           "mode": self.gate_mode},
            "reason": self.reason,
        }
        if self.test:
            out["test"] = self.test
        if self.signature:
            out["signature"] = self.signature
        return out
