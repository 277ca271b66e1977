"""Replacing a file atomically: the one way testfleet writes files others may read.

Plans, reports, JUnit files, rewritten test files, scaffolded configs and the registry
cache are all written to a temporary file in the target's directory and renamed over
it, so a concurrent reader (a CI step, another ``testfleet`` process) sees the old file
or the new one, never half of one. Callers decide what a failure means (a usage error,
a warning, a slower next run); this module only guarantees no temporary file is left.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path


def replace_atomically(path: Path, data: bytes, *, mode: int | None = None,
                       fsync: bool = False) -> None:
    """Write ``data`` to ``path`` through a temporary sibling file and ``os.replace``.

    ``mode`` sets the permission bits of the new file (``None`` keeps the temporary
    file's private 0o600); ``fsync`` flushes the data to disk before the rename, for
    files that must survive a crash of the machine. The directory must exist. Any
    exception removes the temporary file and propagates.
    """
    import tempfile  # only when writing: the registry cache's warm path never writes

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def output_mode(path: Path) -> int:
    """Permission bits for a file a user asked for (a plan, a report, JUnit): an existing
    file keeps its own; a new one gets what ``open()`` would give it (0o666 minus the
    umask), not the temporary file's private 0o600 that CI artifact servers cannot read."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def read_capped(path: Path, limit: int) -> bytes:
    """The bytes of a file someone named on the command line, at most ``limit`` of them.

    ``/dev/zero`` or a runaway pipe would otherwise be read until memory runs out (its
    size is 0 to ``stat``, so a size check alone does not help); pipes and process
    substitution (``<(git diff ...)``) still work. Too much is an ``OSError`` (EFBIG)
    whose ``strerror`` says so, for the callers' existing "cannot read" messages.
    """
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        most = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"
        raise OSError(errno.EFBIG, f"larger than {most}, the most testfleet reads", str(path))
    return data


def replace_all_or_nothing(files: list[tuple[Path, bytes, int]]) -> None:
    """Write several files so that a failure leaves every one of them as it was.

    Each ``(path, data, mode)`` is first written in full to a temporary sibling
    (creating missing directories); only when all of them are staged are they renamed
    over their targets. A failure while staging -- a full disk, a read-only directory,
    a file where a directory should be -- removes every temporary file and every
    directory created here, then propagates: a command that fails writes nothing.
    """
    import tempfile

    created: list[Path] = []
    staged: list[tuple[str, Path]] = []
    try:
        for path, data, mode in files:
            missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
            for directory in reversed(missing):
                directory.mkdir()
                created.append(directory)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, mode)
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        for directory in reversed(created):
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise


class NotARegularFile(OSError):
    """What stands at a path is a FIFO, socket, device, directory or symlink."""


def read_regular(path: Path, limit: int | None = None, *, follow: bool = False) -> bytes:
    """The bytes of ``path`` if it is a regular file, never blocking on what is not.

    Opening a FIFO for reading waits for a writer, forever if none comes; a PR or a
    restored cache can put one where testfleet expects its own cache file, and a
    downloaded artifact or an event payload can be one where a file is named. The file
    is opened non-blocking and checked with ``fstat`` (no race between a check and the
    open); anything but a regular file is :class:`NotARegularFile` (an ``OSError``, so
    callers' "unreadable" paths apply). A final symlink is refused unless ``follow``
    (a file someone named on the command line may be a link; testfleet's own caches
    may not). A file larger than ``limit`` bytes is an ``OSError`` (EFBIG) saying so,
    before anything is read.
    """
    import stat

    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotARegularFile(errno.ELOOP, "is a symlink", str(path)) from None
        raise
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFile(errno.EINVAL, f"is {file_kind(st.st_mode)}, not a regular file",
                                  str(path))
        if limit is None:
            return fh.read()
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"{st.st_size} bytes, more than the {_size(limit)} "
                          "testfleet reads", str(path))
        data = fh.read(limit + 1)  # a file still growing stops at the limit too
        if len(data) > limit:
            raise OSError(errno.EFBIG, f"more than the {_size(limit)} testfleet reads", str(path))
        return data


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"


def file_kind(mode: int) -> str:
    """``st_mode`` in words, for messages about what stands where a file should."""
    import stat

    for test, word in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symlink"),
                       (stat.S_ISREG, "a regular file")):
        if test(mode):
            return word
    return "not a regular file"
