"""When a ``disabled=`` line last changed, and what git says about the project: the values
the report and ``check``'s rules derive ages from. Reading them (``git blame``) is the
application floor's job (:mod:`testfleet.app.gitage`); the report only receives them."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from testfleet.documents.vocabulary import AgeStatus


@dataclass(frozen=True)
class LineAge:
    """When a line last changed, or why that is not known."""

    status: AgeStatus
    changed: dt.datetime | None = None
    commit: str | None = None
    boundary: bool = False
    note: str = ""
    line: int = 0  # the line of the ``disabled=`` keyword, when located

    def days(self, now: dt.datetime) -> int | None:
        """Calendar days (UTC) since the change; 0 for uncommitted edits; ``None`` when unknown."""
        if self.status == "uncommitted":
            return 0
        if self.changed is None:
            return None
        utc = dt.timezone.utc
        return max(0, (now.astimezone(utc).date() - self.changed.astimezone(utc).date()).days)


@dataclass(frozen=True)
class RepoInfo:
    """What git says about the project directory."""

    is_repo: bool
    shallow: bool = False
    note: str = ""
