"""One pass over the host's process table: pid -> (parent, group, zombie, start time).

The sweep after a test used to ask psutil for the descendants of every orphan in turn,
and each such question is itself a scan of all of ``/proc``: a test that left 1,000
zombies behind cost 1,000 scans per round. Everything the sweep needs (who is whose
child, who is already dead, who left the test's process group) is in one read of each
``/proc/PID/stat``, so a round is one scan, linear in the processes alive, and the parent
map is built from it once.

The start time (clock ticks since boot on Linux, ``create_time`` elsewhere) identifies a
process beyond its pid: a pid seen in a snapshot is signalled later only if it still
starts at the same time, so a recycled pid is never hit.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class Proc:
    """A process as one snapshot saw it."""

    pid: int
    ppid: int
    pgrp: int
    zombie: bool
    start: float


def parse_stat(pid: int, data: bytes) -> Proc | None:
    """One ``/proc/PID/stat`` line; None when it is not one (a truncated read)."""
    # The command name (field 2) may hold spaces and parentheses: fields start after the
    # last ")".
    end = data.rfind(b")")
    fields = data[end + 2:].split()
    if end < 0 or len(fields) < 20:
        return None
    try:
        return Proc(pid, int(fields[1]), int(fields[2]), fields[0] in (b"Z", b"X"),
                    float(fields[19]))
    except ValueError:
        return None


def read_proc(pid: int) -> Proc | None:
    """One process, now; None when it is gone (or ``/proc`` is not there)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return parse_stat(pid, fh.read())
    except OSError:
        return _psutil_proc(pid) if not os.path.isdir("/proc/self") else None


def snapshot() -> dict[int, Proc]:
    """Every process of the host, read once."""
    try:
        names = os.listdir("/proc")
    except OSError:
        names = []
    if "self" not in names:
        return _psutil_snapshot()
    out: dict[int, Proc] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                data = fh.read()
        except OSError:  # exited while we looked
            continue
        proc = parse_stat(int(name), data)
        if proc is not None:
            out[proc.pid] = proc
    return out


def children_map(procs: Iterable[Proc]) -> dict[int, list[int]]:
    """Parent pid -> its children's pids, from one snapshot."""
    kids: dict[int, list[int]] = {}
    for proc in procs:
        kids.setdefault(proc.ppid, []).append(proc.pid)
    return kids


def same(now: Proc | None, then: Proc) -> bool:
    """``now`` is the process ``then`` was (not a later one that got its pid)."""
    return now is not None and now.start == then.start


def _psutil_proc(pid: int) -> Proc | None:  # pragma: no cover - systems without /proc
    try:
        p = psutil.Process(pid)
        with p.oneshot():
            return Proc(pid, p.ppid(), os.getpgid(pid), p.status() == psutil.STATUS_ZOMBIE,
                        p.create_time())
    except (psutil.Error, OSError):
        return None


def _psutil_snapshot() -> dict[int, Proc]:  # pragma: no cover - systems without /proc
    out: dict[int, Proc] = {}
    for p in psutil.process_iter(["ppid", "status", "create_time"]):
        try:
            pgrp = os.getpgid(p.pid)
        except OSError:
            continue
        info = p.info
        if info["ppid"] is None or info["create_time"] is None:
            continue
        out[p.pid] = Proc(p.pid, info["ppid"], pgrp, info["status"] == psutil.STATUS_ZOMBIE,
                          info["create_time"])
    return out
