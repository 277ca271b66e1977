"""Errors as values: every problem found in config, registrations or inputs.

Findings are collected and shown together instead of raising on the first one,
so that a user fixes a whole tree in one pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from testfleet.documents.vocabulary import Severity as Severity
from testfleet.textsafe import printable

if TYPE_CHECKING:
    from testfleet.documents.check import FindingDoc



@dataclass(frozen=True, order=True)
class Finding:
    """One problem, located as precisely as we know it.

    ``file`` is repo-relative with forward slashes (or the config file's name);
    ``key`` is a dotted key path for configuration findings.
    """

    file: str
    line: int
    col: int
    severity: Severity
    code: str
    message: str
    key: str = ""

    def location(self) -> str:
        loc = self.file
        if self.line:
            loc += f":{self.line}"
            if self.col:
                loc += f":{self.col}"
        return loc

    def render(self) -> str:
        """One line, whatever the file name or message holds (see :mod:`testfleet.textsafe`)."""
        where = self.location()
        key = f" [{self.key}]" if self.key else ""
        return printable(f"{where}: {self.severity}: {self.message}{key} ({self.code})")

    def github_annotation(self) -> str:
        """A GitHub Actions workflow command; escapes per the runner's rules so that
        a message cannot inject a second command."""
        props = [f"file={_escape_property(self.file)}"]
        if self.line:
            props.append(f"line={self.line}")
        if self.col:
            props.append(f"col={self.col}")
        props.append(f"title={_escape_property('testfleet ' + self.code)}")
        return f"::{self.severity} {','.join(props)}::{_escape_data(self.message)}"

    def to_json(self) -> FindingDoc:
        return {"file": self.file, "line": self.line, "col": self.col,
                "severity": self.severity, "code": self.code, "message": self.message,
                "key": self.key}


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def errors(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]


def findings_json(findings: Iterable[Finding]) -> str:
    return json.dumps([f.to_json() for f in sorted(findings)], indent=2)
