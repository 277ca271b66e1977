"""Turn a terminating signal to the runner into an event the attempt loop can wait on.

Every signal whose default action would end the runner and that a process can catch
(SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, ...) is handled: left at
its default, it would kill the runner and leave the test and its children running.
SIGINT, SIGTERM and SIGHUP are passed on to the test's group as they are; the others
as SIGTERM. SIGKILL cannot be caught: it kills the runner alone, and the test's process
group lives on until the CI engine tears the job down (GitHub Actions and Buildkite
kill every process of the job; elsewhere, kill the group: ``kill -- -PGID``).

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


def _terminating() -> tuple[int, ...]:
    names = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM",
             "SIGVTALRM", "SIGPROF", "SIGXCPU", "SIGXFSZ", "SIGIO", "SIGPWR", "SIGSTKFLT")
    found = [getattr(signal, name) for name in names if hasattr(signal, name)]
    return tuple(dict.fromkeys(found))  # SIGIO and SIGPOLL may be one signal


#: Caught by the runner (see the module docstring).
TERMINATING_SIGNALS = _terminating()
#: Passed on to the test's process group as they are; the others become SIGTERM.
FORWARDED_AS_IS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def forwarded(signum: int) -> int:
    """The signal the test's group gets when the runner received ``signum``."""
    return signum if signum in FORWARDED_AS_IS else signal.SIGTERM


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
    def handling(self, signals: tuple[int, ...] = TERMINATING_SIGNALS) -> Iterator[None]:
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
