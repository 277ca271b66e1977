"""The I/O side of ``testfleet disable`` / ``enable``: find the registrations, plan every
edit, and write only when every edit is possible (a command that fails writes nothing)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testfleet.errors import UsageError
from testfleet.results.disabling import Edit, EditError, set_disabled


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


def plan_edits(project: Any, targets: list[tuple[Any, str | None]]) -> list[Planned]:
    """One edit per (registration, new reason or None); edits to one file are chained.
    Any problem is a usage error naming the file and line, and nothing is written."""
    current: dict[str, bytes] = {}
    out: list[Planned] = []
    problems: list[str] = []
    for reg, reason in targets:
        where = f"{reg.file}:{reg.line}" if reg.line else reg.file
        if reg.implicit:
            problems.append(f"{where} ({reg.suite}): an implicit registration has no marker "
                            "call to edit; add an explicit marker for its backend first")
            continue
        path = project.root / reg.file
        try:
            source = current[reg.file] if reg.file in current else path.read_bytes()
            data, edit = set_disabled(source, markers_of(project, reg.backend), reg.suite,
                                      reason, reg.line)
        except (OSError, EditError) as exc:
            problems.append(f"{where} ({reg.suite}): {exc}")
            continue
        current[reg.file] = data
        out.append(Planned(reg.file, reg.suite, path, data, edit))
    if problems:
        raise UsageError("nothing was changed:\n  " + "\n  ".join(problems))
    return out


def write_edits(edits: list[Planned]) -> None:
    from testfleet.planning.literals import write_in_place

    final: dict[Path, bytes] = {}
    for e in edits:
        final[e.path] = e.data  # chained: the last edit of a file holds all of them
    for path, data in final.items():
        try:
            write_in_place(path, data)
        except OSError as exc:
            raise UsageError(f"{path}: cannot write it: {exc.strerror or exc}") from None
