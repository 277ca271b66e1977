"""Split CPU-bound per-file work over forked children, for cold runs on large trees.

Python parses in one thread; on the machines CI uses (two cores or more), giving slices of
a long list to forked children divides a cold run. Each child sends its results back as
JSON through a pipe; if anything about one fails (no fork on this platform, a crash, a
short or malformed answer) the parent computes that slice itself, so the result never
depends on a child having worked.

How many processes: the CPUs this process may run on, at most one per ``min_items // 2``
items, capped by ``TESTFLEET_JOBS`` (``TESTFLEET_JOBS=1``: no child, the single-process
figure the benchmarks compare against).
"""

from __future__ import annotations

import json
import os
import select
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from testfleet.progress import Task

T = TypeVar("T")


def _same(result: Any) -> Any:
    return result


def available_cpus() -> int:
    """CPUs this process may use (a container's or taskset's limit, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def worker_count(n_items: int, min_items: int) -> int:
    """Processes (the parent included) for ``n_items``: 1 below ``min_items``."""
    if n_items < min_items or not hasattr(os, "fork"):
        return 1
    cap = available_cpus()
    env = os.environ.get("TESTFLEET_JOBS", "").strip()
    if env.isascii() and env.isdigit() and int(env) >= 1:
        cap = int(env)
    return max(1, min(cap, n_items // max(1, min_items // 2)))


def parallel_map(func: Callable[[T], Any], items: Sequence[T], *, min_items: int,
                 encode: Callable[[Any], Any] = _same,
                 decode: Callable[[T, Any], Any] | None = None,
                 progress: Task | None = None) -> list[Any]:
    """``[func(x) for x in items]``, all but the first slice computed in forked children when
    worth it (:func:`worker_count`).

    A child sends ``encode(func(x))`` as JSON. Without ``decode`` the parent takes each value
    as sent, None included (a None result is an answer, not a missing one); with it, the
    parent turns each back with ``decode(x, data)`` and computes ``func(x)`` itself where
    that returns None (data it cannot rebuild). ``progress`` counts every process's items.
    """
    workers = worker_count(len(items), min_items)
    if workers == 1:
        return _local(func, items, progress)
    size = -(-len(items) // workers)
    slices = [items[i:i + size] for i in range(0, len(items), size)]
    if progress is not None:
        progress.shared_slots(len(slices) - 1)
    children = [_start(lambda x: encode(func(x)), part, progress, slot)
                for slot, part in enumerate(slices[1:])]
    out = _local(func, slices[0], progress)
    for part, child in zip(slices[1:], children, strict=True):
        answer = child(progress) if child is not None else None
        if answer is None:
            out.extend(_local(func, part, progress))
        elif decode is None:
            out.extend(answer)
        else:
            for x, data in zip(part, answer, strict=True):
                result = decode(x, data)
                out.append(result if result is not None else func(x))
    return out


def _local(func: Callable[[T], Any], items: Sequence[T], progress: Task | None) -> list[Any]:
    if progress is None:
        return [func(x) for x in items]
    out = []
    for x in items:
        out.append(func(x))
        progress.advance()
    return out


def _start(func: Callable[[T], Any], work: Sequence[T], progress: Task | None,
           slot: int) -> Callable[[Task | None], list[Any] | None] | None:
    try:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:  # the child: compute, send, leave without running any of the parent's cleanup
        status = 1
        try:
            os.close(read_fd)
            results = []
            for n, x in enumerate(work, 1):
                results.append(func(x))
                if progress is not None:
                    progress.worker_count(slot, n)
            data = json.dumps(results, separators=(",", ":")).encode("utf-8", "surrogatepass")
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view):]
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)

    def finish(progress: Task | None) -> list[Any] | None:
        chunks = []
        try:
            while True:
                if progress is not None:  # keep drawing while the child works
                    ready, _, _ = select.select([read_fd], [], [], 0.1)
                    progress.draw()
                    if not ready:
                        continue
                chunk = os.read(read_fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(read_fd)
            _, status = os.waitpid(pid, 0)
        if status != 0:
            return None
        try:
            items = json.loads(b"".join(chunks))
        except (ValueError, RecursionError):
            return None
        return items if isinstance(items, list) and len(items) == len(work) else None

    return finish
