"""Split CPU-bound per-file work with one forked child, for cold runs on large trees.

Python parses in one thread; on the two-core (or larger) machines CI uses,
giving half of a long list to a forked child halves a cold run. The child sends
its results back as JSON through a pipe; if anything about it fails (no fork on
this platform, a crash, a short or malformed answer) the parent computes that
half itself, so the result never depends on the child having worked.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def _same(result: Any) -> Any:
    return result


def two_way_map(func: Callable[[T], Any], items: Sequence[T], *, min_items: int,
                encode: Callable[[Any], Any] = _same,
                decode: Callable[[T, Any], Any] | None = None) -> list[Any]:
    """``[func(x) for x in items]``, the second half computed in a forked child when worth it.

    The child sends ``encode(func(x))`` as JSON. Without ``decode`` the parent takes
    each value as sent, None included (a None result is an answer, not a missing one);
    with it, the parent turns each back with ``decode(x, data)`` and computes ``func(x)``
    itself where that returns None (data it cannot rebuild).
    """
    if len(items) < min_items or not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        return [func(x) for x in items]
    half = len(items) // 2
    theirs = items[half:]
    child = _start(lambda x: encode(func(x)), theirs)
    out = [func(x) for x in items[:half]]
    answer = child() if child is not None else None
    if answer is None:
        return out + [func(x) for x in theirs]
    if decode is None:
        return out + answer
    for x, data in zip(theirs, answer, strict=True):
        result = decode(x, data)
        out.append(result if result is not None else func(x))
    return out


def _start(func: Callable[[T], Any], work: Sequence[T]) -> Callable[[], list[Any] | None] | None:
    try:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:  # the child: compute, send, leave without running any of the parent's cleanup
        status = 1
        try:
            os.close(read_fd)
            data = json.dumps([func(x) for x in work], separators=(",", ":")).encode("utf-8", "surrogatepass")
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view):]
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)

    def finish() -> list[Any] | None:
        chunks = []
        try:
            while chunk := os.read(read_fd, 1 << 20):
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
