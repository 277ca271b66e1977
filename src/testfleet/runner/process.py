"""One attempt of one file: a process in its own session, streamed, timed, cleaned up.

Phases: run (stream output until the process exits, the deadline passes or the runner is
interrupted) -> stop (signal the group, keep draining output for the grace period, then
SIGKILL every descendant, also those that left the group) -> sweep (after any exit, kill
processes the test left behind so they cannot poison the next file) -> drain (read what
is left in the pipe, never waiting forever on a writer that escaped).

Throughout, the orphans the test leaves (they become the runner's children, it is their
subreaper) are reaped every :data:`REAP_TICK`, so a test that backgrounds helpers all day
leaves no zombies. The sweep is part of the file's time: its polite wait ends at the
file's deadline, the first signal to the runner ends it at once, and the SIGKILL that
follows is bounded (:data:`KILL_SETTLE`); every wait in it is short, so a signal is acted
on within a fraction of a second.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from testfleet.runner.interrupt import Interrupt, forwarded
from testfleet.runner.tree import ProcessTree, direct_children, group_alive

READ_SIZE = 64 * 1024
EXIT_TICK = 0.1  # without a pidfd: how often to check for an exit (and in stop/sweep loops)
EOF_TICK = 0.002  # without a pidfd, after EOF: the exit is imminent, check often
FINAL_DRAIN = 1.0  # seconds to wait for the pipe's EOF once every known writer is dead
KILL_WAIT = 5.0  # seconds to wait for a SIGKILLed test process before giving up on it
REAP_TICK = 0.05  # with a subreaper: how often dead orphans are collected (zombies <= rate x tick)
KILL_SETTLE = 2.0  # seconds of SIGKILL rounds before what is left is reported as unkillable


@dataclass
class ProcessResult:
    """What happened to one process tree."""

    returncode: int | None
    duration: float
    timed_out: bool = False
    interrupted: int | None = None
    leftovers: int = 0  # descendants still alive after the test ended (then killed)
    killed: int = 0  # descendants SIGKILLed in total
    error: str | None = None  # the process could not be started
    # Pids that survived SIGKILL (uninterruptible sleep, e.g. stuck in a GPU driver): the
    # runner stops waiting for them instead of hanging the whole job.
    unkillable: list[int] = field(default_factory=list)
    reaped: int = 0  # orphans of the test collected by the runner (its subreaper)
    # The sweep reached the file's deadline and went straight to SIGKILL.
    sweep_cut: bool = False


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    grace: float,
    sink: Callable[[bytes], None],
    interrupt: Interrupt | None = None,
    subreaper: bool = False,
    poll_interval: float = 0.05,
) -> ProcessResult:
    """Run ``argv`` to completion or timeout; every byte of output goes to ``sink``."""
    baseline = direct_children()
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            bufsize=0, close_fds=True,
        )
    except OSError as exc:
        return ProcessResult(None, time.monotonic() - start, error=f"cannot start {argv[0]}: {exc}")
    assert proc.stdout is not None
    return _Attempt(proc, start, timeout, grace, sink, interrupt, subreaper, poll_interval,
                    ProcessTree(proc.pid, baseline, subreaper)).run()


class _Attempt:
    def __init__(self, proc: subprocess.Popen[bytes], start: float, timeout: float, grace: float,
                 sink: Callable[[bytes], None], interrupt: Interrupt | None, subreaper: bool,
                 poll_interval: float, tree: ProcessTree) -> None:
        self.proc = proc
        self.start = start
        self.deadline = start + timeout
        self.grace = grace
        self.sink = sink
        self.interrupt = interrupt
        self.tree = tree
        # With a subreaper nothing can escape, so polling is only the fallback's memory.
        self.poll_interval = None if subreaper else poll_interval
        self.next_poll = start + (poll_interval if self.poll_interval else 0.0)
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.fd, selectors.EVENT_READ, "out")
        self.eof = False
        # A pidfd wakes the loop the moment the process exits (Linux >= 5.3); without one,
        # the exit is noticed by polling, quickly once the output pipe has closed.
        self.pidfd: int | None = None
        try:
            self.pidfd = os.pidfd_open(proc.pid)
            self.sel.register(self.pidfd, selectors.EVENT_READ, "pid")
        except (AttributeError, OSError):
            self.pidfd = None
        if interrupt is not None:
            self.sel.register(interrupt.fileno(), selectors.EVENT_READ, "int")
        self.result = ProcessResult(None, 0.0)
        self.exit_time: float | None = None
        self.reaping = subreaper
        self.next_reap = start + REAP_TICK

    def run(self) -> ProcessResult:
        try:
            self._running()
            if self.proc.returncode is None:
                self._stop()  # ends with every descendant killed: nothing left to sweep
            else:
                self._sweep()
            self._drain(time.monotonic() + FINAL_DRAIN)
        finally:
            self.sel.close()
            if self.pidfd is not None:
                os.close(self.pidfd)
            assert self.proc.stdout is not None
            self.proc.stdout.close()
            if self.proc.returncode is None:  # pragma: no cover - defensive
                self._kill_root()
            self.tree.reap()
            self.result.reaped = self.tree.reaped
        self.result.returncode = self.proc.returncode
        end = self.exit_time if self.exit_time is not None else time.monotonic()
        self.result.duration = end - self.start
        return self.result

    # -- phases ---------------------------------------------------------------------------

    def _running(self) -> None:
        while True:
            if self._exited():
                return
            now = time.monotonic()
            if now >= self.deadline:
                self.result.timed_out = True
                return
            if self.interrupt is not None and self.interrupt.signum is not None:
                self.result.interrupted = self.interrupt.signum
                return
            wait = min(self.deadline - now, self._reap_due(now))
            if self.pidfd is None:
                wait = min(wait, EOF_TICK if self.eof else EXIT_TICK)
            if self.poll_interval is not None:
                if now >= self.next_poll:
                    self.tree.poll()
                    self.poll_interval = min(self.poll_interval * 2, 1.0)
                    self.next_poll = now + self.poll_interval
                wait = min(wait, max(self.next_poll - now, 0.0))
            self._pump(wait)

    def _stop(self) -> None:
        """Timeout or interrupt: polite signal to the group, grace, then SIGKILL everything."""
        sig = forwarded(self.result.interrupted) if self.result.interrupted else signal.SIGTERM
        self.tree.poll()
        self.tree.terminate(sig)
        grace_end = time.monotonic() + self.grace
        while (now := time.monotonic()) < grace_end:
            if self.interrupt is not None and self.interrupt.urgent:
                break
            if self._exited() and not group_alive(self.tree.pgid):
                break
            self._pump(min(EXIT_TICK, self._reap_due(now), max(grace_end - now, 0.0)))
        self.result.killed += self.tree.kill_all(KILL_SETTLE)
        if self.proc.returncode is None:
            self._kill_root()
        self._note_exit()
        self._note_unkillable()

    def _sweep(self) -> None:
        """After the test process is gone, nothing it started may survive it.

        The polite wait ends at the file's deadline (the sweep counts against the file's
        timeout) or at the first signal to the runner, whichever comes first; then
        SIGKILL, bounded by :data:`KILL_SETTLE`."""
        self.tree.reap()
        if not self.tree.maybe_leftovers():
            return
        left = self.tree.alive()
        if not left and self.tree.gone():
            return
        self.result.leftovers = max(len(left), 1)  # 0 seen: it moved while it was looked for
        self.tree.terminate(signal.SIGTERM)
        grace_end = min(time.monotonic() + self.grace, self.deadline)
        while (now := time.monotonic()) < grace_end and not self._signalled():
            if self.tree.gone():
                break
            self._pump(min(EXIT_TICK, max(grace_end - now, 0.0)))
        else:
            self.result.sweep_cut = now >= self.deadline
        self.result.killed += self.tree.kill_all(KILL_SETTLE)
        self._note_unkillable()

    def _kill_root(self) -> None:
        self.proc.kill()
        try:
            self.proc.wait(timeout=KILL_WAIT)
        except subprocess.TimeoutExpired:
            self.result.unkillable.append(self.proc.pid)

    def _note_unkillable(self) -> None:
        for proc in self.tree.alive():
            if proc.pid not in self.result.unkillable:
                self.result.unkillable.append(proc.pid)

    def _drain(self, until: float) -> None:
        while not self.eof and time.monotonic() < until:
            self._pump(max(until - time.monotonic(), 0.0), interruptible=False)

    # -- helpers --------------------------------------------------------------------------

    def _signalled(self) -> bool:
        return self.interrupt is not None and self.interrupt.signum is not None

    def _reap_due(self, now: float) -> float:
        """Reap if it is time; the seconds until the next reap (inf without a subreaper)."""
        if not self.reaping:
            return float("inf")
        if now >= self.next_reap:
            self.tree.reap()
            self.next_reap = now + REAP_TICK
        return max(self.next_reap - now, 0.0)

    def _exited(self) -> bool:
        if self.proc.returncode is not None:
            return True
        if self.proc.poll() is None:
            return False
        self._note_exit()
        return True

    def _note_exit(self) -> None:
        self.tree.mark_reaped()
        if self.exit_time is None:
            self.exit_time = time.monotonic()

    def _pump(self, timeout: float, interruptible: bool = True) -> None:
        """Wait up to ``timeout`` for output (or an interrupt) and pass it on."""
        for key, _ in self.sel.select(timeout):
            if key.data == "pid":
                self.sel.unregister(key.fd)  # exited: stop waking on it; _exited() reaps
                continue
            if key.data == "int":
                assert self.interrupt is not None
                self.interrupt.drain()
                continue
            self._read()

    def _read(self) -> None:
        for _ in range(16):  # bounded, so a firehose cannot starve the deadline check
            try:
                data = os.read(self.fd, READ_SIZE)
            except BlockingIOError:
                return
            except OSError:  # pragma: no cover
                data = b""
            if not data:
                self.eof = True
                self.sel.unregister(self.fd)
                return
            self.sink(data)
            if len(data) < READ_SIZE:
                return
