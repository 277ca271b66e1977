"""The rescue file (``testfleet.rescue/1``): the planned files a CI run's first reconcile
found unreported because their runner was lost, and the rescue jobs that run them once.

It is written by ``testfleet reconcile --rescue-out`` and read by ``testfleet run
--rescue`` and the second ``testfleet reconcile --rescue``; it travels as a CI artifact,
so it is read back through these types, strictly, with its own digest checked (like the
plan's) and pinned to the plan's digest."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from typing_extensions import TypedDict

from testfleet.documents.base import boundary

Name = Annotated[str, Field(min_length=1, max_length=500)]
Digest = Annotated[str, Field(min_length=1, max_length=100)]
#: far beyond any plan (a job holds at most a lane's files)
MAX_RESCUE_FILES = 100_000


@boundary
class RescueJobDoc(TypedDict):
    """One rescue job: the unreported files of one planned job (its *origin*), run on the
    origin's runner class with the origin's settings."""

    id: Name
    origin: Name
    stage: Name
    variant: Annotated[str, Field(max_length=500)]
    why: Annotated[str, Field(max_length=4096)]
    files: Annotated[list[Annotated[str, Field(min_length=1, max_length=4096)]],
                     Field(min_length=1, max_length=MAX_RESCUE_FILES)]


@boundary
class RescueDoc(TypedDict):
    """The rescue wave of one plan; ``digest`` is over the canonical document without it."""

    schema: Literal["testfleet.rescue/1"]
    plan_digest: Digest
    digest: Digest
    jobs: list[RescueJobDoc]
