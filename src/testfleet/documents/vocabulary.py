"""Closed vocabularies the documents share, as literal types (no imports: the store and
the runner take their tuples from here, so a schema's enum and the code cannot differ)."""

from __future__ import annotations

from typing import Literal

#: a file's final outcome in one execution (history; ``NOT_RUN``: planned, not executed)
Outcome = Literal["PASSED", "FAILED", "TIMEOUT", "FLAKY", "ERROR", "NOT_RUN"]
#: a test case's outcome (``testcases``)
CaseOutcome = Literal["PASSED", "FLAKY", "FAILED", "ERROR", "SKIPPED", "XFAILED"]
#: what the results views show: a file's executed outcome, or a test case's
ResultOutcome = Literal["PASSED", "FLAKY", "FAILED", "TIMEOUT", "ERROR", "SKIPPED", "XFAILED"]
#: a gate coordinate's (and a gated file's) verdict
GateStatus = Literal["PASS", "FAIL", "ERROR", "INACTIVE"]
GateMode = Literal["enforced", "shadow"]
FlakyState = Literal["flaky", "broken", "recovered", "healthy"]
IncidentCategory = Literal["infrastructure", "test"]
SignatureKind = Literal["infra", "timeout", "exception", "fatal", "output", "exit"]
