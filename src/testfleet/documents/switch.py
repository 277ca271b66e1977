"""The switch record (``testfleet.switch/1``, ``.github/testfleet-switch.json``): what
``testfleet init --switch`` changed in the existing workflows, committed with the change,
so ``testfleet init --unswitch`` puts every byte back from any checkout. Read back
strictly through these types."""

from __future__ import annotations

from typing import Literal

from typing_extensions import TypedDict

from testfleet.documents.base import boundary

#: What the switch did with one job of the existing workflows.
JobAction = Literal["replaced", "kept", "left-alone"]


@boundary
class EditDoc(TypedDict):
    """One hunk: at 1-based ``line`` of the switched file, ``added`` stands where
    ``removed`` stood in the original (each line with its own line ending)."""

    line: int
    removed: list[str]
    added: list[str]


@boundary
class SwitchedWorkflowDoc(TypedDict):
    path: str
    """Repository-relative."""
    before_sha256: str
    after_sha256: str
    edits: list[EditDoc]


@boundary
class JobDecisionDoc(TypedDict):
    workflow: str
    job: str
    action: JobAction
    why: str


@boundary
class SwitchRecordDoc(TypedDict):
    schema: Literal["testfleet.switch/1"]
    workflows: list[SwitchedWorkflowDoc]
    jobs: list[JobDecisionDoc]
