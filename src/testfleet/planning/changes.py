"""Which stages a pull request's changed files can affect (PR pruning of GPU stages).

The rule is conservative: a changed registered test file affects its own stages,
a path matching a no-impact glob (docs, markdown) affects none, and anything else
(library code, conftest, a deleted test, a diff we could not read) affects every
stage. Parsing is pure; reading a file or running git is kept in two small
functions that turn every failure into a :class:`ChangeSet` with an ``error``
(the documented fallback: prune nothing) rather than an exception.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from testfleet.fileio import read_capped

#: ``git diff --name-status`` status letters; R and C carry a score and two paths.
_ONE_PATH = set("AMDTUX")
_TWO_PATHS = set("RC")
MAX_DIFF_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ChangeSet:
    """Changed paths (repo-relative, posix), or why they are unknown.

    ``error`` set means the diff could not be used; every stage counts as affected.
    """

    paths: tuple[str, ...] = ()
    source: str = ""
    error: str | None = None
    #: changed paths outside the project directory (a project inside a larger git
    #: repository), relative to the repository's top level: they can be no-impact
    #: or affect everything, never be one of the project's test files.
    outside: tuple[str, ...] = ()


def within_project(changes: ChangeSet, prefix: str) -> ChangeSet:
    """Re-base top-level-relative diff paths onto a project living at ``prefix``
    (``git rev-parse --show-prefix``, e.g. ``services/train/``) inside its repository."""
    prefix = prefix.strip("/")
    if not prefix or changes.error is not None:
        return changes
    inside, outside = [], list(changes.outside)
    for path in changes.paths:
        if path.startswith(prefix + "/"):
            inside.append(path[len(prefix) + 1:])
        else:
            outside.append(path)
    return replace(changes, paths=tuple(inside), outside=tuple(outside))


def git_prefix(root: Path) -> str:
    """Where ``root`` sits inside its git work tree ("" at the top, or when unknown)."""
    try:
        proc = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-prefix"],
                              capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    if proc.returncode != 0:
        return ""
    return proc.stdout.decode("utf-8", "replace").strip()


@dataclass(frozen=True)
class Impact:
    """The outcome of matching changes against stages."""

    everything: bool
    stages: frozenset[str]
    why: str


def parse_name_status(data: bytes) -> tuple[tuple[str, ...], str | None]:
    """Parse ``git diff --name-status -z`` output (or the newline/tab form without ``-z``).

    Returns the changed paths (old and new for renames/copies) and an error
    message when the input is not that format.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return (), f"not UTF-8 ({exc.reason} at byte {exc.start})"
    if not text.strip("\0\n"):
        return (), None
    if "\0" in text:
        tokens = text.split("\0")
        if tokens and tokens[-1] == "":
            tokens.pop()
    else:
        tokens = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) < 2:
                return (), f"line {n} is not 'STATUS<TAB>PATH'"
            tokens.extend(parts)
    paths: list[str] = []
    i = 0
    while i < len(tokens):
        status = tokens[i].strip()
        letter = status[:1]
        want = 2 if letter in _TWO_PATHS else 1 if letter in _ONE_PATH else 0
        if want == 0 or (not status[1:].isdigit() and status[1:] != ""):
            return (), f"unknown status {status[:20]!r} at entry {len(paths) + 1}"
        chunk = tokens[i + 1 : i + 1 + want]
        if len(chunk) < want or any(not p for p in chunk):
            return (), f"status {status!r} without its path(s) at the end of the diff"
        paths.extend(chunk)
        i += 1 + want
    return tuple(paths), None


def read_changed_files(path: Path) -> ChangeSet:
    """Read a ``--changed-files`` file; unreadable or malformed -> ``error`` (prune nothing)."""
    source = f"--changed-files {path}"
    try:
        if path.stat().st_size > MAX_DIFF_BYTES:
            return ChangeSet(source=source, error=f"larger than {MAX_DIFF_BYTES >> 20} MiB")
        data = read_capped(path, MAX_DIFF_BYTES)
    except OSError as exc:
        return ChangeSet(source=source, error=f"cannot read it: {exc.strerror or exc}")
    paths, error = parse_name_status(data)
    return ChangeSet(paths=paths, source=source, error=error)


def git_changed_files(root: Path, base: str) -> ChangeSet:
    """``git diff --name-status -z BASE...HEAD`` in ``root``; any failure -> ``error``."""
    source = f"--diff-base {base}"
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "diff", "--name-status", "-z", "--no-color",
             f"{base}...HEAD", "--"],
            capture_output=True, timeout=60, check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return ChangeSet(source=source, error=f"git could not run: {exc}")
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        return ChangeSet(source=source, error=f"git diff failed: {msg[0] if msg else proc.returncode}")
    paths, error = parse_name_status(proc.stdout)
    return ChangeSet(paths=paths, source=source, error=error)


def impact(
    changes: ChangeSet,
    stages_of_file: Mapping[str, Iterable[str]],
    no_impact: Iterable[str],
) -> Impact:
    """Which stages the changes affect (pure)."""
    if changes.error is not None:
        return Impact(True, frozenset(), f"{changes.source}: {changes.error}; pruning nothing")
    from testfleet.globs import spec as path_spec

    spec = path_spec(tuple(no_impact))
    affected: set[str] = set()
    for raw in changes.paths:
        path = raw.removeprefix("./")
        if path in stages_of_file:
            affected.update(stages_of_file[path])
        elif spec.match_file(path):
            continue
        else:
            return Impact(True, frozenset(), f"{path!r} is not a registered test file nor no-impact")
    for path in changes.outside:
        if not spec.match_file(path):
            return Impact(True, frozenset(),
                          f"{path!r} (outside the project directory) is not no-impact")
    if not changes.paths and not changes.outside:
        return Impact(False, frozenset(), "no changed files")
    return Impact(False, frozenset(affected), "changed files touch only tests and no-impact paths")
