"""One file's contribution to the registry (what the per-file cache stores)."""

from __future__ import annotations

from testfleet.findings import Finding
from testfleet.registry.model import GateCall, InvalidRegistration, Registration


class FileResult:
    """Registrations, gate calls and findings of one file.

    A plain class rather than a dataclass: it is created on the warm path for
    thousands of files and defining a dataclass costs start-up time there.
    """

    __slots__ = ("findings", "gates", "invalid", "registrations", "suppressions")

    def __init__(self, registrations: list[Registration] | None = None) -> None:
        self.registrations: list[Registration] = registrations if registrations is not None else []
        self.gates: list[GateCall] = []
        self.findings: list[Finding] = []
        self.invalid: list[InvalidRegistration] = []
        self.suppressions: dict[int, tuple[str, ...]] = {}
