"""Editing test files in place: under a lock, from what is really there, all or nothing.

``testfleet disable`` / ``enable`` change people's test files while other things may
use them: another ``disable`` run, an editor, a generator appending to a file. Writing
a new file and renaming it over the old one (what testfleet does with its own outputs)
lost edits three ways (#27): twelve ``disable`` runs at once each renamed its own copy
over the others' (4 to 8 edits of 12 survived); a writer holding the file open went on
appending to the replaced, unlinked file (1,450 of 1,800 lines lost); and the new file
belonged to whoever ran the command, with every hard link to the old one split off.

So the edit is made in the file itself:

- the file's inode stays, so its owner, group, mode, ACLs, extended attributes and
  every hard link are untouched, and a writer holding it open keeps writing into it;
- ``disable`` / ``enable`` runs of one project take turns on a lock (``flock`` on the
  project directory), held from before the registry is read until the last byte is
  written, so none reads a file another is rewriting and each edits what the one before
  it wrote;
- each file is read under the lock and read again right before it is written: bytes
  appended meanwhile are carried over; any other change (an editor's save, a rename
  over the file) means the edit is planned again from the new content;
- the files are written with SIGINT/SIGTERM/SIGHUP held back, one ``pwrite`` each, and a
  failure (a full disk, a file size limit) writes every file already changed back to
  what it was: a command that fails changes nothing.

What this does not do: a reader that does not lock (pytest, an editor) can see a file
for the microseconds between its ``pwrite`` and ``ftruncate``, and a byte appended in
that same window can be overwritten; renaming would give readers atomicity but lose the
appends, owners and links above, which is the worse trade for files people and tools
keep open. A symlink is refused (edit the file it points to).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from testfleet.errors import UsageError
from testfleet.textsafe import printable

#: How long a command waits for another disable/enable of the project to finish.
LOCK_WAIT = 60.0
#: How many times an edit is planned again because a file changed while it was planned.
TRIES = 5
_HELD = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


@contextlib.contextmanager
def edit_lock(root: Path, wait: float = LOCK_WAIT) -> Iterator[None]:
    """Exclusive for the project's test-file edits (an advisory ``flock`` on ``root``)."""
    import fcntl

    try:
        fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        raise UsageError(f"{root}: cannot lock the project for editing: "
                         f"{exc.strerror or exc}") from None
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise UsageError(f"another testfleet disable/enable has been editing the "
                                     f"test files of {root} for {wait:g} s; nothing was changed") from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # releases the lock


@dataclass
class _Open:
    rel: str
    path: Path
    fd: int
    identity: tuple[int, int]  # (st_dev, st_ino)
    content: bytes  # what the edit is planned from


class _Changed(Exception):
    """A file changed, other than by appending, between planning and writing."""


Plan = Callable[[Mapping[str, bytes]], Mapping[str, bytes]]


def edit_in_place(root: Path, rels: list[str], plan: Plan) -> Mapping[str, bytes]:
    """Apply ``plan`` (current content per file -> new content per file; it raises to
    refuse) to the files ``rels`` under ``root``, in place, all or nothing. Returns what
    was written. Call it holding :func:`edit_lock`."""
    for _ in range(TRIES):
        files = _open_all(root, sorted(set(rels)))
        try:
            new = plan({f.rel: f.content for f in files})
            return _write_all(files, new)
        except _Changed:
            continue
        finally:
            for f in files:
                os.close(f.fd)
    raise UsageError(f"{', '.join(printable(r) for r in rels)}: changed again each time "
                     f"testfleet was about to write ({TRIES} tries); nothing was changed")


def _open_all(root: Path, rels: list[str]) -> list[_Open]:
    """Every file opened for reading and writing, or a usage error listing every one that
    cannot be (nothing opened stays open)."""
    opened: list[_Open] = []
    problems: list[str] = []
    for rel in rels:
        path = root / rel
        try:
            fd = os.open(path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            why = ("is a symlink; edit the file it points to" if exc.errno == errno.ELOOP
                   else f"cannot open it for writing: {exc.strerror or exc}")
            problems.append(f"{printable(rel)}: {why}")
            continue
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            problems.append(f"{printable(rel)}: not a regular file")
            continue
        try:
            content = _read(fd)
        except OSError as exc:
            os.close(fd)
            problems.append(f"{printable(rel)}: cannot read it: {exc.strerror or exc}")
            continue
        opened.append(_Open(rel, path, fd, (st.st_dev, st.st_ino), content))
    if problems:
        for f in opened:
            os.close(f.fd)
        raise UsageError("nothing was changed:\n  " + "\n  ".join(problems))
    return opened


def _read(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    chunks: list[bytes] = []
    offset = 0
    while True:
        chunk = os.pread(fd, max(size - offset, 0) + 65536, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait until every file is written (or restored)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@dataclass
class _Written:
    file: _Open
    before: bytes  # the file's content right before it was written
    data: bytes  # what was written over it


def _write_all(files: list[_Open], new: Mapping[str, bytes]) -> Mapping[str, bytes]:
    done: list[_Written] = []
    out: dict[str, bytes] = {}
    current = "?"
    with _signals_held():
        try:
            for f in files:
                if f.rel not in new:
                    continue
                current = f.rel
                before = _read(f.fd)
                if before == f.content:
                    data = new[f.rel]
                elif before.startswith(f.content):  # appended meanwhile: carried over
                    data = new[f.rel] + before[len(f.content):]
                else:
                    raise _Changed(f.rel)
                if _identity(f.path) != f.identity:  # replaced by rename (an editor's save)
                    raise _Changed(f.rel)
                if data == before:
                    continue
                done.append(_Written(f, before, data))
                _overwrite(f.fd, data, len(before))
                out[f.rel] = data
            for w in done:
                os.fsync(w.file.fd)
        except _Changed:
            _restore(done)
            raise
        except OSError as exc:
            problems = _restore(done)
            raise UsageError(f"nothing was changed: {printable(current)}: cannot write it: "
                             f"{exc.strerror or exc}" + "".join(problems)) from None
    return out


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _overwrite(fd: int, data: bytes, old_size: int | None) -> None:
    """``data`` over the file's content from offset 0 (one ``pwrite`` unless the kernel
    writes less), then cut off what is left of a longer old content of ``old_size``
    bytes (None: keep what follows)."""
    view = memoryview(data)
    offset = 0
    while offset < len(data):
        offset += os.pwrite(fd, view[offset:], offset)
    if old_size is not None and len(data) < old_size:
        os.ftruncate(fd, len(data))


def _restore(done: list[_Written]) -> list[str]:
    """Write each file back to what it was (keeping bytes appended since); returns what
    could not be restored, for the error message."""
    problems = []
    for w in reversed(done):
        try:
            now = _read(w.file.fd)
            appended = now[len(w.data):] if now.startswith(w.data) else b""
            original = w.before + appended
            _overwrite(w.file.fd, _unchanged_prefix(original, now), None)
            if len(original) != os.fstat(w.file.fd).st_size:
                os.ftruncate(w.file.fd, len(original))
        except OSError as exc:
            problems.append(f"\n  {printable(w.file.rel)}: could not be restored "
                            f"({exc.strerror or exc}); check it")
    return problems


def _unchanged_prefix(original: bytes, now: bytes) -> bytes:
    """``original`` up to where it and ``now`` last differ: bytes beyond that are already
    the original's, so a failed write is undone without writing past where it got (a
    file-size limit that stopped the write would stop the undo at the same offset)."""
    end = min(len(original), len(now))
    while end > 0 and original[end - 1] == now[end - 1]:
        end -= 1
    return original if len(original) > len(now) else original[:end]
