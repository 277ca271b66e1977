"""What a ``testfleet plan`` invocation asks for, as one value.

Built by :mod:`testfleet.cli._trigger` from flags or a GitHub event; consumed by
:func:`testfleet.planning.make_plan`. Paths in ``files`` are already checked to
be repo-relative, inside the repository and not symlinks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from testfleet.planning.changes import ChangeSet
from testfleet.planning.policy import Trigger
from testfleet.planning.trust import Trust


@dataclass(frozen=True)
class PlanRequest:
    """A trigger plus the narrowing a user may add on top of it."""

    trigger: Trigger = field(default_factory=Trigger)
    files: tuple[str, ...] = ()
    stages: tuple[str, ...] = ()
    include_disabled: bool = False
    changes: ChangeSet | None = None
    #: for a fork pull request: the base commit's configuration (see planning/trust.py)
    trust: Trust | None = None
