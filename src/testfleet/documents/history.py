"""``testfleet history merge`` and ``history show``, ``--format json``
(``testfleet.history-merge/1``, ``testfleet.history-show/1``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from typing_extensions import TypedDict

from testfleet.documents.base import closed


@closed
class RecordCountsDoc(TypedDict):
    """Records per kind: those a merge added, or those a bundle holds."""

    executions: int
    gate_runs: int
    gate_values: int
    testcases: int
    signatures: int


@closed
class AlreadyPresentDoc(TypedDict):
    """Records a merge found already stored (a merge is idempotent)."""

    executions: int
    gate_runs: int


#: tables whose rows a merge leaves out when they claim a time after it
FutureTable = Literal["executions", "testcase_results", "gate_runs", "gate_values"]


@closed
class HistoryRowsDoc(TypedDict):
    """Rows per table of the history after the merge."""

    executions: int
    gate_runs: int
    gate_series: int
    gate_values: int
    testcases: int
    failure_signatures: int


@closed
class MergeResultDoc(TypedDict):
    """What a merge added (and found already stored), what pruning removed, and the
    history after it."""

    bundles: int
    added: RecordCountsDoc
    already_present: AlreadyPresentDoc
    untrusted: int
    """Stored gate runs a bundle's untrust mark took out of the baseline."""
    future_dated: dict[FutureTable, int]
    """Rows left out because they claim a time after the merge, per table (only the
    tables that had some)."""
    pruned: int
    """Executions pruning removed."""
    notes: list[str]
    rows: HistoryRowsDoc
    size_bytes: int | None
    """The history's size after the merge (null: the database cannot say)."""


@closed
class HistoryMergeDoc(MergeResultDoc):
    """``history merge``: the result, and where it was merged."""

    schema: Literal["testfleet.history-merge/1"]
    database: str


@closed
class BundleSourceDoc(TypedDict):
    """Where a bundle's records came from, as the exporting job saw it."""

    event: str | None
    ref: str | None
    cadence: str | None
    write_baseline: bool | None
    ci_run_id: str | None
    repository: str | None


@closed
class BundleHeaderDoc(TypedDict):
    """A verified bundle, without its rows."""

    format: Annotated[str, Field(pattern=r"^testfleet\.bundle/[0-9]+$")]
    """The bundle's own schema (``testfleet.bundle/N``)."""
    sha256: str
    store_schema: int
    """The history schema of its records."""
    created_at: float
    testfleet: str
    """The version that wrote it."""
    source: BundleSourceDoc
    counts: RecordCountsDoc


@closed
class HistoryShowDoc(BundleHeaderDoc):
    """``history show``: a verified bundle's header, and what a merge would do with it."""

    schema: Literal["testfleet.history-show/1"]
    file: str
    merge: str
    """Whether ``history merge`` would accept it, and how its gate runs would count."""
