"""``testfleet check --format json`` (``testfleet.check/1``), and the finding every
document that reports problems uses."""

from __future__ import annotations

from typing import Literal

from typing_extensions import TypedDict

from testfleet.documents.base import closed
from testfleet.documents.vocabulary import Severity


@closed
class FindingDoc(TypedDict):
    """One problem, where it is: ``file`` repo-relative ("" for the project as a whole),
    ``line``/``col`` 0 when unknown, ``key`` the config key path for configuration."""

    file: str
    line: int
    col: int
    severity: Severity
    code: str
    """What kind of problem (``coverage-hole``, ``unknown-suite``, ...): the name a
    ``per-file-ignores`` entry or a suppression comment uses."""
    message: str
    key: str


@closed
class CheckDoc(TypedDict):
    """The configuration and every registration, checked."""

    schema: Literal["testfleet.check/1"]
    ok: bool
    """No finding is an error."""
    errors: int
    warnings: int
    files: int
    """Test files discovered (0 when the configuration itself is broken)."""
    registrations: int
    findings: list[FindingDoc]
