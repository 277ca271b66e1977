"""Find and kill every descendant of a test process, including ones that left its group.

A test that calls ``setsid()`` (servers, daemons, some launchers do) leaves the process
group the runner signals, and if its parent then exits it is re-parented away from the
tree. Two mechanisms make sure such processes are still found:

* ``PR_SET_CHILD_SUBREAPER`` (Linux): the runner becomes the reaper of orphaned
  descendants, so every live descendant is either below the test process or a direct
  child of the runner. Checked cheaply via ``/proc/self/task/*/children``.
* polling (everywhere, and the only mechanism where the prctl is unavailable): the
  descendants seen while the test runs are remembered (as :class:`psutil.Process`, which
  guards against pid reuse by comparing creation times).

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


_SETTLE_ROUNDS = 20


class ProcessTree:
    """Everything one test process spawned, found by descent, orphan adoption and memory."""

    def __init__(self, root_pid: int, baseline: set[int], subreaper: bool) -> None:
        self.root_pid = root_pid
        self.pgid = root_pid  # the test process leads its own session and group
        self.baseline = set(baseline)
        self.subreaper = subreaper
        self.seen: dict[int, psutil.Process] = {}
        # The root is looked up lazily (most tests never need it) and never after it was
        # reaped, when its pid may already belong to an unrelated process.
        self._root: psutil.Process | None = None
        self.root_reaped = False

    def _root_proc(self) -> psutil.Process | None:
        if self._root is None and not self.root_reaped:
            try:
                self._root = psutil.Process(self.root_pid)
            except psutil.Error:
                self.root_reaped = True
        return None if self.root_reaped else self._root

    def mark_reaped(self) -> None:
        """The root was waited for: from now on only its orphans and known pids count."""
        self.root_reaped = True

    def poll(self) -> None:
        """Remember the descendants alive right now (cheap enough to call periodically)."""
        for proc in self._current():
            self.seen.setdefault(proc.pid, proc)

    def _orphans(self) -> set[int]:
        return direct_children() - self.baseline - {self.root_pid}

    def _current(self) -> list[psutil.Process]:
        found: list[psutil.Process] = []
        roots: list[psutil.Process] = []
        root = self._root_proc()
        if root is not None:
            roots.append(root)
        for pid in self._orphans():
            try:
                proc = psutil.Process(pid)
            except psutil.Error:
                continue
            found.append(proc)
            roots.append(proc)
        for root in roots:
            with contextlib.suppress(psutil.Error):
                found.extend(root.children(recursive=True))
        return found

    def alive(self) -> list[psutil.Process]:
        """Live (non-zombie) descendants, excluding the root test process itself.

        The listing is a snapshot: a descendant that forks and exits while it is taken
        hands its child to us (the subreaper) after we listed our children and before we
        listed its own, so that child is in neither list. Whatever became our child while
        we looked is therefore looked at again, until nothing new has come (bounded: a
        fork loop is killed by :meth:`kill_all`'s own repetition).
        """
        for _ in range(_SETTLE_ROUNDS):
            self.poll()
            out = []
            for pid, proc in list(self.seen.items()):
                if pid == self.root_pid:
                    continue
                try:
                    if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                        out.append(proc)
                except psutil.Error:
                    continue
            if not self._orphans() - self.seen.keys():
                break
        return out

    def maybe_leftovers(self) -> bool:
        """Cheap check after the root exited: could anything of this test still be alive?"""
        if group_alive(self.pgid) or self._orphans():
            return True
        if self.subreaper:
            return False
        return any(_running(p) for pid, p in self.seen.items() if pid != self.root_pid)

    def terminate(self, sig: int = signal.SIGTERM) -> None:
        """Polite stop: ``sig`` to the group, and to known descendants that left it."""
        signal_group(self.pgid, sig)
        for proc in self.alive():
            with contextlib.suppress(psutil.Error, OSError):
                if os.getpgid(proc.pid) != self.pgid:
                    proc.send_signal(sig)

    def kill_all(self, settle: float = 2.0) -> int:
        """SIGKILL every descendant until none is left; returns how many were killed."""
        killed: set[int] = set()
        deadline = time.monotonic() + settle
        while True:
            signal_group(self.pgid, signal.SIGKILL)
            procs = self.alive()
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
                    killed.add(proc.pid)
            self.reap()
            if not procs or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        self.reap()
        return len(killed)

    def reap(self) -> None:
        """Collect orphaned descendants that died as our children (we are their subreaper)."""
        for pid in self._orphans() | (set(self.seen) - {self.root_pid}):
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def _running(proc: psutil.Process) -> bool:
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False
