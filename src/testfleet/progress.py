"""Progress of long per-file work (a cold scan, ``check``'s compile, a merge), on a terminal.

A cold ``check`` of a 10,000-file tree takes seconds with nothing to show for them. Work
that counts items reports them here; what the person sees is a transient line on stderr,
drawn only when stderr is a terminal, never with ``-q``, and only once the work has run
for half a second (a warm run shows nothing). Output that a program reads (stdout, and
stderr when redirected) never carries it.

The command line turns it on once (:func:`configure`); library code asks for a
:func:`task` and advances it, and gets a no-op when progress is off. Forked workers
(:mod:`testfleet.registry.parallel`) count in a shared page of memory that the parent
reads while it draws, so the figure is every process's work, not an estimate.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

#: Nothing is drawn before the work has run this long (seconds).
DELAY = 0.5
#: At most this many redraws a second.
RATE = 10.0

_enabled = False


def configure(*, quiet: bool = False, stream: Any = None) -> bool:
    """Turn progress on when ``stream`` (default stderr) is a terminal and not ``quiet``;
    ``TESTFLEET_PROGRESS=0``/``1`` overrides the terminal test. Returns whether it is on."""
    global _enabled
    stream = sys.stderr if stream is None else stream
    forced = os.environ.get("TESTFLEET_PROGRESS", "")
    if quiet or forced == "0":
        _enabled = False
    elif forced == "1":
        _enabled = True
    else:
        try:
            _enabled = bool(stream.isatty())
        except (AttributeError, ValueError):
            _enabled = False
    return _enabled


def enabled() -> bool:
    return _enabled


class Task:
    """Counts done items of one phase; draws them with rich's progress bar when worth it.

    rich runs without its refresh thread (a forked worker must not inherit a thread
    that holds the console's lock) and without redirecting stdout: this class redraws
    from the work's own loop.
    """

    def __init__(self, label: str, total: int, stream: Any = None) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.stream = sys.stderr if stream is None else stream
        self.started = time.monotonic()
        self._last_draw = 0.0
        self._bar: Any = None
        self._bar_task: Any = None
        self._shared: mmap.mmap | None = None
        self._slots = 0

    def shared_slots(self, slots: int) -> None:
        """Make ``slots`` counters that forked workers write (:meth:`worker_count`)."""
        self._shared = mmap.mmap(-1, 8 * slots)
        self._slots = slots

    def worker_count(self, slot: int, count: int) -> None:
        """In a forked worker: how many items this worker has done so far."""
        if self._shared is not None and 0 <= slot < self._slots:
            struct.pack_into("q", self._shared, 8 * slot, count)

    def advance(self, n: int = 1) -> None:
        self.done += n
        self.draw()

    def current(self) -> int:
        done = self.done
        if self._shared is not None:
            done += sum(struct.unpack_from("q", self._shared, 8 * i)[0] for i in range(self._slots))
        return min(done, self.total)

    def draw(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and (now - self.started < DELAY or now - self._last_draw < 1 / RATE):
            return
        self._last_draw = now
        try:
            if self._bar is None:
                self._start_bar()
            self._bar.update(self._bar_task, completed=self.current())
            self._bar.refresh()
        except (OSError, ValueError):
            return

    def _start_bar(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        console = Console(file=self.stream, stderr=self.stream is sys.stderr)
        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), console=console, transient=True,
                             auto_refresh=False, redirect_stdout=False, redirect_stderr=False)
        self._bar_task = self._bar.add_task(self.label, total=self.total)
        self._bar.start()

    def close(self) -> None:
        if self._bar is not None:
            with suppress(OSError, ValueError):
                self._bar.stop()  # transient: the line goes away
            self._bar = None
        if self._shared is not None:
            self._shared.close()
            self._shared = None


@contextmanager
def task(label: str, total: int) -> Iterator[Task | None]:
    """A :class:`Task` for ``total`` items while progress is on, else None (callers skip
    their bookkeeping). The line is cleared when the work ends, however it ends."""
    if not _enabled or total <= 0:
        yield None
        return
    current = Task(label, total)
    try:
        yield current
    finally:
        current.close()
