"""``testfleet results``, ``flaky`` and ``incident list``, ``--format json``
(``testfleet.results/1``, ``testfleet.flaky/1``, ``testfleet.incidents/1``), and the parts
of them the report's results section repeats."""

from __future__ import annotations

from typing import Literal

from typing_extensions import NotRequired, TypedDict

from testfleet.documents.base import closed
from testfleet.documents.vocabulary import (
    FlakyState,
    GateMode,
    GateStatus,
    IncidentCategory,
    ResultOutcome,
    SignatureKind,
)


@closed
class RunGateDoc(TypedDict):
    """The gate's verdict recorded beside the file's outcome."""

    status: GateStatus
    mode: GateMode | None


@closed
class RunDoc(TypedDict):
    """The final verdict of one file (or one test) in one run."""

    outcome: ResultOutcome
    ts: float
    commit: str | None
    ci_run_id: str | None
    attempt: int
    """The attempt the verdict is from (a pass on attempt 2 is ``FLAKY``)."""
    duration: float
    gate: RunGateDoc | None
    reason: str | None
    """Why it failed, as the runner said it (timeout, exit status, ...)."""
    test: NotRequired[str]
    """A test case's verdict: the test's name."""
    signature: NotRequired[str]
    """A failure's signature digest: the incident it belongs to."""


@closed
class FileRunDoc(RunDoc):
    url: str | None
    """The CI run's page, where the configuration says how to link it."""


@closed
class ResultFileDoc(TypedDict):
    """One (stage, file): its newest runs, newest first."""

    stage: str
    file: str
    pass_rate: float
    last: ResultOutcome
    strip: str
    """One letter per run, oldest first: P pass, R pass on retry, F fail, T timeout,
    E error."""
    runs: list[FileRunDoc]


@closed
class TestcaseDoc(RunDoc):
    """One test case's verdict in one run (``results --tests``)."""

    stage: str
    file: str


@closed
class SignatureDoc(TypedDict):
    signature: str
    """The digest of the normalized failure text."""
    kind: SignatureKind
    label: str
    text: str


@closed
class LaneShareDoc(TypedDict):
    """How much of one lane's run an incident took."""

    stage: str
    backend: str
    files: int
    """Files of the lane that failed with the incident's signature."""
    ran: int
    """Files of the lane with a verdict in the run."""


@closed
class IncidentBaseDoc(TypedDict):
    """Failures of one CI run that share a signature."""

    id: str
    run: str
    ci_run_id: str | None
    commit: str | None
    ts: float
    category: IncidentCategory
    why: str
    signature: str
    kind: SignatureKind
    label: str
    text: str
    lanes: list[LaneShareDoc]
    files: list[str]
    tests: list[str]


@closed
class DormancyDoc(TypedDict):
    """The one config line that makes a stage dormant for an infrastructure incident."""

    stage: str
    table: str
    line: str
    command: str
    already_dormant: str | None


@closed
class IncidentDoc(IncidentBaseDoc):
    url: str | None
    dormancy: DormancyDoc | None


@closed
class ProbeDoc(TypedDict):
    """A dormant stage's probe: clean probes in a row, and whether it can be restored."""

    stage: str
    reason: str
    restore_after: int
    clean_streak: int
    probed_files: int
    ready: bool
    note: str


@closed
class HeldBackDoc(TypedDict):
    """A lane its open runner-class breaker holds back: a coverage hole."""

    lane: str
    detail: str
    """The incident (or who forced it), since when, the runs."""


@closed
class ResultsDoc(TypedDict):
    """The newest runs per (file, stage), the incidents of the newest runs and the probes
    of dormant stages."""

    schema: Literal["testfleet.results/1"]
    runs: int
    stage: str | None
    file: str | None
    files: list[ResultFileDoc]
    incidents: list[IncidentDoc]
    probes: list[ProbeDoc]
    testcases: NotRequired[list[TestcaseDoc]]
    """With ``--tests``."""
    held_back: NotRequired[list[HeldBackDoc]]
    """Lanes an open runner-class breaker holds back (#41): coverage holes until their
    probe passes."""


@closed
class IncidentsDoc(TypedDict):
    """Incidents of the newest runs, newest first: infrastructure before test."""

    schema: Literal["testfleet.incidents/1"]
    runs: int
    stage: str | None
    incidents: list[IncidentDoc]


@closed
class EvidenceDoc(TypedDict):
    """A run that counts as evidence of flakiness."""

    ci_run_id: str | None
    commit: str | None
    outcome: ResultOutcome
    ts: float


@closed
class FlakyVerdictDoc(TypedDict):
    """The state of one (file, stage[, test]) and the evidence behind it."""

    file: str
    stage: str
    state: FlakyState
    rate: float
    """Runs with evidence / runs."""
    runs: int
    evidence_runs: int
    retry_passes: int
    failures: int
    split_commits: list[str]
    """Commits on which it both failed and passed."""
    clean_streak: int
    quarantined: bool
    evidence: list[EvidenceDoc]
    test: NotRequired[str]


@closed
class FlakyCauseDoc(FlakyVerdictDoc):
    signature: str | None
    """The signature most of its failing runs share."""


@closed
class FlakyGroupDoc(TypedDict):
    """Files (and tests) of one stage in one state whose failures share a signature."""

    state: FlakyState
    stage: str
    signature: str
    label: str
    text: str
    files: list[str]
    tests: list[str]


@closed
class FlakyPolicyDoc(TypedDict):
    """``[tool.testfleet.flaky]`` as applied."""

    window: int
    threshold: float
    min_runs: int
    quarantine: bool
    restore_after: int


@closed
class FlakyDoc(TypedDict):
    """Flaky, recovered and broken files (and tests), and the groups of them that fail
    for one cause."""

    schema: Literal["testfleet.flaky/1"]
    policy: FlakyPolicyDoc
    files: list[FlakyCauseDoc]
    tests: list[FlakyCauseDoc]
    incidents: list[FlakyGroupDoc]
