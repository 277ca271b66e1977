"""The machine outputs, one pydantic model each, and their published JSON Schemas.

Every ``--format json`` document carries a top-level ``schema`` field
``testfleet.<kind>/<n>``: a tool reading it checks the kind and refuses a newer ``n``.
The models here are the contract (``testfleet schema KIND`` prints the JSON Schema of
one); a test runs every command and validates its real output against them, so an
output that grows a field without the model saying so fails the suite.

The plan's model is the one ``load_plan`` validates plan files with
(``planning/plan_file.py``), so the published schema and the reader cannot drift. Nested
parts whose shape is owned elsewhere (the report's sections) stay open here: the schema
pins their presence and type, not every key.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from testfleet.planning.plan_file import PlanFile
from testfleet.reconcile.render import ReconcileOutput
from testfleet.reconcile.status import JobStatusFile


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class FindingOut(_Closed):
    """A finding with its location: file (repo-relative, "" for the project), line, column,
    and the config key path when it concerns configuration."""

    file: str
    line: int
    col: int
    severity: str
    code: str
    message: str
    key: str


class CheckOutput(_Closed):
    """``testfleet check --format json``."""

    schema_: Literal["testfleet.check/1"] = Field(alias="schema")
    ok: bool
    errors: int
    warnings: int
    files: int
    registrations: int
    findings: list[FindingOut]


class RegistrationOut(_Open):
    """One registration (a file may have several, one per stage)."""

    file: str
    line: int
    backend: str
    suite: str
    est_time: float
    labels: list[str]
    nightly: bool
    disabled: str | None
    implicit: bool
    disabled_on: list[str] = Field(default_factory=list,
                                   description="runner label patterns that narrow 'disabled'")


class ListOutput(_Closed):
    """``testfleet list --format json``."""

    schema_: Literal["testfleet.list/1"] = Field(alias="schema")
    registrations: list[RegistrationOut]


class InvalidOut(_Open):
    """A marker call the registry rejected (#12: reported, never a reason to refuse)."""

    file: str
    backend: str
    suite: str
    line: int
    code: str
    message: str


class EstimateRowOut(_Open):
    file: str
    stage: str
    backend: str
    est_time: float
    history: float | None
    samples: int
    estimate: float
    source: str
    drift: float | None
    implicit: bool
    timeout: float | None
    # the stage whose history a variant without its own is planned on (#12), else null
    history_from: str | None = None


class DurationsOutput(_Closed):
    """``testfleet durations show --format json``."""

    schema_: Literal["testfleet.durations/1"] = Field(alias="schema")
    statistic: str
    window: int
    min_samples: int
    rows: list[EstimateRowOut]
    warnings: list[str]
    # #12: rejected registrations (no estimate; the command exits 1), as plan's 'invalid' fates
    invalid: list[InvalidOut] = Field(default_factory=list)


class SuggestionOut(EstimateRowOut):
    suggested: int
    written: str | None


class DurationsSuggestOutput(_Closed):
    """``testfleet durations suggest --format json``."""

    schema_: Literal["testfleet.durations-suggest/1"] = Field(alias="schema")
    factor: float
    suggestions: list[SuggestionOut]
    warnings: list[str]


class GateEvaluateOutput(_Open):
    """``testfleet gate evaluate --format json``: the gate's verdict on one test's records."""

    schema_: Literal["testfleet.gate-evaluate/1"] = Field(alias="schema")
    fails_test: bool
    trusted: bool | None
    written: bool
    status: str | None
    mode: str | None
    history_available: bool
    specs: list[dict[str, Any]]
    declaration_errors: list[dict[str, Any]]
    lines: list[str]


class GateHistoryOutput(_Closed):
    """``testfleet gate history --format json``: stored values, newest run first."""

    schema_: Literal["testfleet.gate-history/1"] = Field(alias="schema")
    test: str
    metric: str | None
    values: list[dict[str, Any]]


class DbStatusOutput(_Closed):
    """``testfleet db status --format json``. ``schema_version`` is the database's own
    migration level (``code_schema_version`` is what this testfleet expects)."""

    schema_: Literal["testfleet.db-status/1"] = Field(alias="schema")
    database: str
    origin: str
    dialect: str
    code_schema_version: int
    schema_version: int | None
    state: Literal["missing", "uninitialised", "outdated", "ready", "newer-than-code"]
    stages: list[dict[str, Any]]
    pending: list[str] = Field(default_factory=list)


class ReportOutput(_Open):
    """``testfleet report --format json``."""

    schema_: Literal["testfleet.report/1"] = Field(alias="schema")
    project: str
    headline: Any
    totals: dict[str, Any]
    holes: list[dict[str, Any]]
    stages: list[dict[str, Any]]
    dormant: list[dict[str, Any]]
    ledger: list[dict[str, Any]]


class HistoryMergeOutput(_Closed):
    """``testfleet history merge --format json``: what the merge added (and found already
    stored), how many executions pruning removed, and the history after it."""

    schema_: Literal["testfleet.history-merge/1"] = Field(alias="schema")
    database: str
    bundles: int
    added: dict[str, int]
    already_present: dict[str, int]
    untrusted: int  # stored gate runs a bundle's untrust mark took out of the baseline
    # rows left out because they claim a time after the merge, per table (executions,
    # testcase_results, gate_runs, gate_values); empty when none were
    future_dated: dict[str, int] = Field(default_factory=dict)
    pruned: int
    notes: list[str]
    rows: dict[str, int]
    size_bytes: int | None


class HistoryShowOutput(_Closed):
    """``testfleet history show --format json``: a verified bundle's header (``format`` is
    the bundle's own schema, ``store_schema`` the history schema of its records)."""

    schema_: Literal["testfleet.history-show/1"] = Field(alias="schema")
    file: str
    format: str
    sha256: str
    store_schema: int
    created_at: float
    testfleet: str
    source: dict[str, Any]
    counts: dict[str, int]
    merge: str


class RunOut(_Closed):
    """One final verdict of a file in a run (results, #14)."""

    outcome: str
    ts: float
    commit: str | None
    ci_run_id: str | None
    attempt: int
    duration: float
    gate: dict[str, Any] | None
    reason: str | None
    url: str | None = None
    test: str | None = None
    signature: str | None = None  # the failure's signature digest (#29)


class ResultFileOut(_Closed):
    stage: str
    file: str
    pass_rate: float
    last: str
    strip: str
    runs: list[RunOut]


class LaneShareOut(_Closed):
    stage: str
    backend: str
    files: int  # files of the stage that failed with the incident's signature
    ran: int  # files of the stage with a verdict in the run


class DormancyOut(_Closed):
    """The one config line that makes a stage dormant for an infrastructure incident."""

    stage: str
    table: str
    line: str
    command: str
    already_dormant: str | None


class IncidentOut(_Closed):
    """Failures of one CI run that share a signature (#29)."""

    id: str
    run: str
    ci_run_id: str | None
    commit: str | None
    ts: float
    category: Literal["infrastructure", "test"]
    why: str
    signature: str
    kind: Literal["infra", "timeout", "exception", "fatal", "output", "exit"]
    label: str
    text: str
    lanes: list[LaneShareOut]
    files: list[str]
    tests: list[str]
    url: str | None
    dormancy: DormancyOut | None


class IncidentsOutput(_Closed):
    """``testfleet incident list --format json``: incidents of the newest runs."""

    schema_: Literal["testfleet.incidents/1"] = Field(alias="schema")
    runs: int
    stage: str | None
    incidents: list[IncidentOut]


class ProbeOut(_Closed):
    """A dormant stage's probe: clean probes in a row, and whether it can be restored."""

    stage: str
    reason: str
    restore_after: int
    clean_streak: int
    probed_files: int
    ready: bool
    note: str


class ResultsOutput(_Closed):
    """``testfleet results --format json``: the newest runs per (file, stage), the incidents
    of the newest runs (#29) and the probes of dormant stages."""

    schema_: Literal["testfleet.results/1"] = Field(alias="schema")
    runs: int
    stage: str | None
    file: str | None
    files: list[ResultFileOut]
    testcases: list[dict[str, Any]] | None = None
    incidents: list[IncidentOut] = Field(default_factory=list)
    probes: list[ProbeOut] = Field(default_factory=list)


class FlakyOut(_Open):
    file: str
    stage: str
    state: Literal["flaky", "broken", "recovered", "healthy"]
    rate: float
    runs: int
    evidence_runs: int
    quarantined: bool


class FlakyGroupOut(_Closed):
    """Files (and tests) of one stage in one state whose failures share a signature (#29)."""

    state: str
    stage: str
    signature: str
    label: str
    text: str
    files: list[str]
    tests: list[str]


class FlakyOutput(_Closed):
    """``testfleet flaky --format json``: flaky, recovered and broken files (and tests), and
    the groups of them that fail for one cause."""

    schema_: Literal["testfleet.flaky/1"] = Field(alias="schema")
    policy: dict[str, Any]
    files: list[FlakyOut]
    tests: list[FlakyOut]
    incidents: list[FlakyGroupOut] = Field(default_factory=list)


OUTPUTS: dict[str, type[BaseModel]] = {
    "check": CheckOutput,
    "list": ListOutput,
    "plan": PlanFile,
    "report": ReportOutput,
    "durations": DurationsOutput,
    "durations-suggest": DurationsSuggestOutput,
    "gate-evaluate": GateEvaluateOutput,
    "gate-history": GateHistoryOutput,
    "db-status": DbStatusOutput,
    "history-merge": HistoryMergeOutput,
    "history-show": HistoryShowOutput,
    "results": ResultsOutput,
    "flaky": FlakyOutput,
    "job-status": JobStatusFile,
    "reconcile": ReconcileOutput,
    "incidents": IncidentsOutput,
}


def output_json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of one output kind (generated from its model, never hand-kept)."""
    model = OUTPUTS[kind]
    schema = model.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"testfleet.{kind}",
        **{k: v for k, v in schema.items() if k != "title"},
    }


def output_json_text(kind: str) -> str:
    text: str = json.dumps(output_json_schema(kind), indent=2, sort_keys=True)
    return text + "\n"


def validate_output(kind: str, document: Any) -> None:
    """Raise pydantic's ValidationError when ``document`` is not a valid ``kind`` output."""
    OUTPUTS[kind].model_validate(document)
