"""Turn SIGINT/SIGTERM/SIGHUP to the runner into an event the attempt loop can wait on.

A signal handler only records the signal and writes a byte to a self-pipe; the attempt
loop has the pipe in its selector, so it wakes at once, forwards the signal to the test's
process group, and the job loop writes partial results. Nothing is raised from inside a
signal handler, so no cleanup is ever cut short. A second signal skips the grace period.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from types import FrameType


class Interrupt:
    """A latch for "stop now"; ``signum`` is the first signal received."""

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self.signum: int | None = None
        self.count = 0

    def fileno(self) -> int:
        return self._r

    def trigger(self, signum: int) -> None:
        self.count += 1
        if self.signum is None:
            self.signum = signum
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._w, b"\0")

    def drain(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._r, 512):
                pass

    @property
    def urgent(self) -> bool:
        """A second signal: the user does not want to wait for the grace period."""
        return self.count > 1

    def close(self) -> None:
        for fd in (self._r, self._w):
            with contextlib.suppress(OSError):
                os.close(fd)

    @contextlib.contextmanager
    def handling(self, signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP),
                 ) -> Iterator[None]:
        """Route ``signals`` to :meth:`trigger` for the duration (main thread only)."""

        def handler(signum: int, _frame: FrameType | None) -> None:
            self.trigger(signum)

        previous = {}
        for sig in signals:
            previous[sig] = signal.signal(sig, handler)
        try:
            yield
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
