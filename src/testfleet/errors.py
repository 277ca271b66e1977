"""Exceptions for the truly exceptional, each carrying an exit status.

Everything a user can get wrong in their tree is a :class:`~testfleet.findings.Finding`;
these are for when a command cannot go on at all (no config, an unreadable plan).
"""

from __future__ import annotations

from testfleet.findings import Finding


class TestfleetError(Exception):
    """A clear, user-facing failure; the CLI prints it without a traceback."""

    exit_code = 2

    def __init__(self, message: str, findings: list[Finding] | None = None) -> None:
        super().__init__(message)
        self.findings = findings or []


class ConfigError(TestfleetError):
    """The configuration could not be loaded or is invalid."""


class UsageError(TestfleetError):
    """The command line or an input file named on it is wrong."""
