"""The I/O side of ``testfleet disable`` / ``enable``: find the registrations, plan every
edit from the files as they are, and write them in place only when every edit is
possible (a command that fails writes nothing; see :mod:`testfleet.results.inplace`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testfleet.errors import UsageError
from testfleet.results.disabling import Edit, EditError, set_disabled
from testfleet.textsafe import printable


@dataclass(frozen=True)
class Planned:
    file: str
    suite: str
    path: Path
    data: bytes
    edit: Edit


def registrations(project: Any) -> list[Any]:
    from testfleet.registry import collect

    return list(collect(project).registrations)


def markers_of(project: Any, backend: str) -> set[str]:
    return {m for m, b in project.config.marker_backends().items() if b == backend}


def plan_edits(project: Any, targets: list[tuple[Any, str | None]],
               contents: Mapping[str, bytes],
               keep_none: Collection[tuple[str, str]] = ()) -> list[Planned]:
    """One edit per (registration, new reason or None) on ``contents`` (file -> bytes);
    edits to one file are chained. Enabling a (file, suite) of ``keep_none`` writes
    ``disabled=None`` back instead of removing the argument (it was there before).
    Any problem is a usage error naming the file and line, and nothing is written."""
    current: dict[str, bytes] = {}
    out: list[Planned] = []
    problems: list[str] = []
    for reg, reason in targets:
        where = printable(f"{reg.file}:{reg.line}" if reg.line else reg.file)
        if reg.implicit:
            problems.append(f"{where} ({reg.suite}): an implicit registration has no marker "
                            "call to edit; add an explicit marker for its backend first")
            continue
        try:
            source = current.get(reg.file, contents[reg.file])
            data, edit = set_disabled(source, markers_of(project, reg.backend), reg.suite,
                                      reason, reg.line,
                                      restore_none=(reg.file, reg.suite) in keep_none)
        except EditError as exc:
            problems.append(f"{where} ({reg.suite}): {exc}")
            continue
        current[reg.file] = data
        out.append(Planned(reg.file, reg.suite, project.root / reg.file, data, edit))
    if problems:
        raise UsageError("nothing was changed:\n  " + "\n  ".join(problems))
    return out


def apply_edits(project: Any, targets: list[tuple[Any, str | None]],
                keep_none: Collection[tuple[str, str]] = ()) -> list[Planned]:
    """Plan and write every edit in place, all or nothing; the caller holds
    :func:`testfleet.results.inplace.edit_lock` since before it read the registrations."""
    from testfleet.results.inplace import edit_in_place

    planned: list[Planned] = []

    def plan(contents: Mapping[str, bytes]) -> dict[str, bytes]:
        planned[:] = plan_edits(project, targets, contents, keep_none)
        return {e.file: e.data for e in planned}  # chained: the last edit holds all of them

    edit_in_place(project.root, [reg.file for reg, _ in targets if not reg.implicit], plan)
    return planned
