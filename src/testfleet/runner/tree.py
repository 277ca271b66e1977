"""Find and kill every descendant of a test process, including ones that left its group.

A test that calls ``setsid()`` (servers, daemons, some launchers do) leaves the process
group the runner signals, and if its parent then exits it is re-parented away from the
tree. Two mechanisms make sure such processes are still found:

* ``PR_SET_CHILD_SUBREAPER`` (Linux): the runner becomes the reaper of orphaned
  descendants, so every live descendant is either below the test process or a direct
  child of the runner. Checked cheaply via ``/proc/self/task/*/children``.
* polling (everywhere, and the only mechanism where the prctl is unavailable): the
  descendants seen while the test runs are remembered (with their start times, which
  guard against pid reuse).

Deliberately no ``PR_SET_PDEATHSIG``: it needs a ``preexec_fn``, which makes every spawn
a full ``fork()`` of the runner (~10 ms here instead of a ~0.4 ms ``vfork``). A runner
killed with ``kill -9`` leaves its test running; CI runners clean up such orphans
(GitHub's runner kills every process carrying the job's ``RUNNER_TRACKING_ID``, which the
test inherits because the environment is passed through).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Iterator
from functools import cache

import psutil

from testfleet.runner.procscan import Proc, children_map, read_proc, same, snapshot

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


@cache
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - exotic libc
        return None


def _prctl(option: int, arg: int) -> bool:
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.prctl(option, arg, 0, 0, 0) == 0)


def get_subreaper() -> bool:
    libc = _libc()
    if libc is None:
        return False
    value = ctypes.c_int(0)
    if libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0) != 0:
        return False
    return bool(value.value)


@contextlib.contextmanager
def subreaper(enabled: bool = True) -> Iterator[bool]:
    """Make this process the reaper of orphaned descendants for the duration; yields success."""
    if not enabled:
        yield False
        return
    before = get_subreaper()
    ok = before or _prctl(PR_SET_CHILD_SUBREAPER, 1)
    try:
        yield ok
    finally:
        if ok and not before:
            _prctl(PR_SET_CHILD_SUBREAPER, 0)


def direct_children() -> set[int]:
    """Pids of this process's children; ``/proc`` when possible (far cheaper than a scan)."""
    pids: set[int] = set()
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        tasks = []
    ok = bool(tasks)
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children", encoding="ascii") as fh:
                pids.update(int(p) for p in fh.read().split())
        except OSError:
            ok = False
            break
    if ok:
        return pids
    try:
        return {p.pid for p in psutil.Process().children()}
    except psutil.Error:  # pragma: no cover
        return set()


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to a process group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a member changed credentials
        return True
    return True


def group_alive(pgid: int) -> bool:
    return signal_group(pgid, 0)


#: At most this many listings per :meth:`ProcessTree.alive` (each one /proc scan).
_SETTLE_ROUNDS = 20
#: ... and at most this long, so a fork loop cannot hold the runner (signals wait on it).
_ALIVE_BUDGET = 0.5
#: At most this many children collected per :meth:`ProcessTree.reap` (the rest next time).
_REAP_BATCH = 10_000


class ProcessTree:
    """Everything one test process spawned, found by descent, orphan adoption and memory.

    With the subreaper, every orphan the test leaves becomes the runner's child, alive or
    dead. :meth:`reap` collects the dead ones; the attempt calls it continuously while
    the test runs, because a test that backgrounds helpers (``cmd &``, server launchers,
    ``torchrun``) or a helper that forks and exits in a loop otherwise piles up zombies
    until the host's pid table is full.

    It must never collect the test process itself (``subprocess`` waits for it and would
    read a stolen status as 0) nor a child the runner had before the test started (its
    owner waits for it): only the pids in the runner's children list minus those. The
    runner starts no other child while a test runs (hooks and history writes run between
    attempts), so every other child of the runner is an orphan of this test.
    """

    def __init__(self, root_pid: int, baseline: set[int], subreaper: bool) -> None:
        self.root_pid = root_pid
        self.pgid = root_pid  # the test process leads its own session and group
        self.baseline = set(baseline)
        self.subreaper = subreaper
        # Without a subreaper: every descendant seen while the test ran (orphans go to
        # init, so this memory is the only way to find them again).
        self.seen: dict[int, Proc] = {}
        self.root_reaped = False
        self.reaped = 0  # orphans collected, over the attempt
        self._me = os.getpid()

    def mark_reaped(self) -> None:
        """The root was waited for: from now on its pid is an ordinary one (it may be
        reused, even by an orphan of this very test, which must then be found)."""
        self.root_reaped = True

    def _protected(self) -> set[int]:
        return self.baseline if self.root_reaped else self.baseline | {self.root_pid}

    def _orphans(self) -> set[int]:
        return direct_children() - self._protected()

    def reap(self) -> int:
        """Collect the orphans that died (we are their subreaper); returns how many.

        Called every few ms while a test runs, so it costs one syscall when nothing died:
        ``waitid(WNOWAIT)`` names a dead child without collecting it, and only an orphan
        is then collected. When the dead child it names is protected (the test process
        before ``subprocess`` collected it), the orphans are listed and tried one by one."""
        protected = self._protected()
        count = 0
        for _ in range(_REAP_BATCH):
            try:
                info = _peek_dead_child()
            except ChildProcessError:  # no child at all
                break
            if info is None:
                break
            if info < 0 or info in protected:
                count += self._reap_listed(protected)
                break
            try:
                if os.waitpid(info, os.WNOHANG)[0]:
                    count += 1
            except ChildProcessError:
                continue
        self.reaped += count
        return count

    def _reap_listed(self, protected: set[int]) -> int:
        count = 0
        for pid in direct_children() - protected:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    count += 1
            except ChildProcessError:
                continue
        return count

    def _descendants(self, snap: dict[int, Proc]) -> dict[int, Proc]:
        """Everything of this test (the root excluded, zombies included): our orphans as
        they are now, and below them and the root what ``snap`` saw.

        The orphans are listed and read after the scan, one by one: a helper that forks
        and exits every few ms is gone from a scan that takes longer than that (its
        successor's pid comes after the scan's listing), never from this."""
        found: dict[int, Proc] = {}
        stack: list[Proc] = []
        for pid in self._orphans():
            proc = read_proc(pid)
            if proc is not None:
                stack.append(proc)
        if not self.root_reaped and self.root_pid in snap:
            stack.append(snap[self.root_pid])
        if not self.subreaper:
            stack.extend(snap[pid] for pid, p in self.seen.items() if same(snap.get(pid), p))
        kids = children_map(snap.values())
        while stack:
            proc = stack.pop()
            if proc.pid in found:
                continue
            found[proc.pid] = proc
            stack.extend(snap[kid] for kid in kids.get(proc.pid, ()) if kid not in found)
        if not self.root_reaped:
            found.pop(self.root_pid, None)
        return found

    def poll(self) -> None:
        """Remember the descendants alive right now (one scan; cheap enough to repeat)."""
        for pid, proc in self._descendants(snapshot()).items():
            self.seen.setdefault(pid, proc)

    def alive(self, until: float | None = None) -> list[Proc]:
        """Live (non-zombie) descendants, excluding the root test process itself.

        One /proc scan per round. The scan is not atomic: a descendant that forks and
        exits while it is read hands its child to us (the subreaper) after its own
        entry was read and possibly after the child's slot was passed, so the child is in
        no list. Whatever became our child since the round began is looked at in
        another round, until nothing new has come, at most :data:`_SETTLE_ROUNDS` rounds
        or ``until`` (a fork loop is ended by :meth:`kill_all`'s own repetition).
        """
        end = until if until is not None else time.monotonic() + _ALIVE_BUDGET
        out: list[Proc] = []
        for _ in range(_SETTLE_ROUNDS):
            snap = snapshot()
            found = self._descendants(snap)
            if not self.subreaper:
                for pid, proc in found.items():
                    self.seen.setdefault(pid, proc)
            out = [p for p in found.values() if not p.zombie]
            if not self._orphans() - found.keys() or time.monotonic() >= end:
                break
        return out

    def gone(self) -> bool:
        """Nothing of this test is left, zombies collected. With the subreaper that is
        exact and cheap (no orphan of ours and no member of the group), whatever a
        listing of the tree might have missed."""
        self.reap()
        if group_alive(self.pgid):
            return False
        if self.subreaper:
            return not self._orphans()
        return not self.alive()

    def maybe_leftovers(self) -> bool:
        """Cheap check after the root exited: could anything of this test still be alive?"""
        if group_alive(self.pgid) or self._orphans():
            return True
        if self.subreaper:
            return False
        return any(same(read_proc(pid), p) and not _dead(pid)
                   for pid, p in self.seen.items() if pid != self.root_pid)

    def send(self, proc: Proc, sig: int) -> bool:
        """``sig`` to ``proc`` if it is still that process; True when it was sent.

        Our own child cannot be recycled before we collect it, so it is signalled by pid;
        any other pid is checked against the start time it had when it was seen."""
        if proc.ppid != self._me and not same(read_proc(proc.pid), proc):
            return False
        try:
            os.kill(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def terminate(self, sig: int = signal.SIGTERM) -> None:
        """Polite stop: ``sig`` to the group, and to known descendants that left it."""
        signal_group(self.pgid, sig)
        for proc in self.alive():
            if proc.pgrp != self.pgid:
                self.send(proc, sig)

    def kill_all(self, settle: float = 2.0) -> int:
        """SIGKILL every descendant until none is left; returns how many were killed.

        Bounded by ``settle`` seconds: what survives that (uninterruptible sleep) is
        reported by the caller, never waited for."""
        killed: set[int] = set()
        deadline = time.monotonic() + settle
        while True:
            signal_group(self.pgid, signal.SIGKILL)
            procs = self.alive(time.monotonic())  # one round: this loop is the repetition
            for proc in procs:
                if self.send(proc, signal.SIGKILL):
                    killed.add(proc.pid)
            if (not procs and self.gone()) or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        self.reap()
        return len(killed)


def _peek_dead_child() -> int | None:
    """The pid of a dead child of ours, left uncollected; None: none is dead; -1: this
    system cannot say (no ``waitid``/``WNOWAIT``), list the children instead."""
    waitid = getattr(os, "waitid", None)
    nowait = getattr(os, "WNOWAIT", None)
    if waitid is None or nowait is None:  # pragma: no cover - macOS
        return -1
    info = waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | nowait)
    return None if info is None else int(info.si_pid)


def _dead(pid: int) -> bool:
    proc = read_proc(pid)
    return proc is None or proc.zombie
