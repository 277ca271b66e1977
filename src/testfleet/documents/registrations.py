"""``testfleet list --format json`` (``testfleet.list/1``), and a marker call the registry
rejected, as ``durations`` reports it."""

from __future__ import annotations

from typing import Literal

from typing_extensions import NotRequired, TypedDict

from testfleet.documents.base import closed


@closed
class RegistrationDoc(TypedDict):
    """One registration (a file may have several, one per stage)."""

    file: str
    line: int
    """0 for an implicit registration (no marker call)."""
    backend: str
    suite: str
    """The stage it names ("" for a file run by path only)."""
    est_time: float
    labels: list[str]
    nightly: bool
    disabled: str | None
    """The reason it is disabled, or null."""
    implicit: bool
    """Registered by an ``[[implicit]]`` directory rather than a marker call."""
    disabled_on: NotRequired[list[str]]
    """Runner label patterns (fnmatch) that narrow ``disabled`` to the lanes whose
    ``runs_on`` has a matching label; absent when ``disabled`` applies everywhere."""
    disabled_on_reason: NotRequired[str]
    """Present when ``disabled_on`` is a per-runner disable of its own, independent of
    ``disabled``: the reason on a matching lane (``{pattern}``: the pattern that matched)."""


@closed
class ListDoc(TypedDict):
    """The registry (as filtered by the command's options)."""

    schema: Literal["testfleet.list/1"]
    registrations: list[RegistrationDoc]


@closed
class InvalidDoc(TypedDict):
    """A marker call the registry rejected: reported (its fate is ``invalid``), never a
    reason to refuse the rest of the tree."""

    file: str
    backend: str
    suite: str
    line: int
    code: str
    message: str
