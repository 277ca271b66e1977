"""Metric capture for gated tests: ``from testfleet import metrics; metrics.log(key, value)``.

Each process appends to a file of its own under ``$TESTFLEET_RECORD_DIR`` (the
runner gives every file and attempt a fresh directory), one JSON line per point,
flushed at once: a process that is killed mid-run leaves every finished line
readable, and processes never interleave bytes in a shared file. Without the
variable, :func:`log` does nothing, so a gated test also runs on its own.

Line format (schema version 1)::

    {"v": 1, "metric": "train/loss", "step": 3, "value": 0.25}

Non-finite values are written as the strings ``"NaN"``, ``"Infinity"`` and
``"-Infinity"`` (plain JSON has no spelling for them); the gate turns them into
an ERROR verdict rather than losing them.
"""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path
from typing import IO

__all__ = ["RECORD_DIR_ENV", "RECORD_SCHEMA_VERSION", "log", "record_path"]

RECORD_DIR_ENV = "TESTFLEET_RECORD_DIR"
RECORD_SCHEMA_VERSION = 1

_lock = threading.Lock()
_state: dict[str, object] = {"pid": None, "dir": None, "file": None}
_next_step: dict[str, int] = {}


def record_path(directory: Path, pid: int | None = None) -> Path:
    """The file one process writes to (``metrics-<pid>.jsonl``)."""
    return directory / f"metrics-{os.getpid() if pid is None else pid}.jsonl"


def _encode_value(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _file_for(directory: str) -> IO[str]:
    """The open record file of this process; reopened after a fork or a new directory."""
    pid = os.getpid()
    handle = _state["file"]
    if handle is not None and _state["pid"] == pid and _state["dir"] == directory:
        return handle  # type: ignore[return-value]
    if handle is not None and _state["pid"] == pid:
        handle.close()  # type: ignore[attr-defined]
    if _state["pid"] != pid:
        _next_step.clear()  # a forked child numbers its own implicit steps
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    new = open(record_path(path, pid), "a", encoding="utf-8")  # noqa: SIM115 - kept open
    _state.update(pid=pid, dir=directory, file=new)
    return new


def log(key: str, value: float, step: int | None = None) -> None:
    """Record one point of metric ``key``.

    ``step`` is a non-negative integer; when omitted, the point gets the next
    step of that key in this process (0, 1, 2, ...). Bad arguments raise
    ``TypeError``/``ValueError`` at the call, where the mistake is, instead of
    becoming a confusing verdict later.
    """
    if not isinstance(key, str) or not key:
        raise TypeError(f"metrics.log: key must be a non-empty string, got {key!r}")
    if "\x00" in key:
        raise ValueError("metrics.log: key must not contain NUL characters")
    if isinstance(value, (bool, str, bytes)):
        raise TypeError(f"metrics.log: value for {key!r} must be a number, got {value!r}")
    try:
        # numpy / torch scalars convert through float(); anything else is a mistake.
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"metrics.log: value for {key!r} must be a number, got {value!r}") from None
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise ValueError(f"metrics.log: step for {key!r} must be a non-negative integer, got {step!r}")
    directory = os.environ.get(RECORD_DIR_ENV)
    if not directory:
        return
    with _lock:
        handle = _file_for(directory)
        if step is None:
            step = _next_step.get(key, 0)
        _next_step[key] = max(_next_step.get(key, 0), step + 1)
        line = json.dumps(
            {"v": RECORD_SCHEMA_VERSION, "metric": key, "step": step,
             "value": _encode_value(number)},
            ensure_ascii=False, allow_nan=False,
        )
        handle.write(line + "\n")
        handle.flush()
