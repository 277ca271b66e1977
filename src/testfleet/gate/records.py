"""Read metric records: the JSON lines that ``testfleet.metrics.log`` (or another tool) wrote.

Two line forms are accepted::

    {"v": 1, "metric": "train/loss", "step": 3, "value": 0.25}
    {"metric": "train/loss", "series": [[0, 1.0], [1, 0.5]]}

Values may be numbers or the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.
Every ``*.jsonl`` file of a record directory is read (one per process); the
points of one key from several files are concatenated and sorted by step.

Nothing is dropped silently: a truncated last line (a process killed while
writing) is skipped with a warning; a line that names its metric but is wrong
marks that metric as broken, so its coordinates become ERROR verdicts; a line
that cannot even name its metric is a warning with file and line.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
#: The most one record file may hold (a line per point: a million steps of one metric is
#: ~80 MB); a larger one is refused by name, never read into memory. docs/gate.md says so.
MAX_RECORD_BYTES = 256 * 1024 * 1024
#: Steps are stored as 64-bit integers; a larger one cannot be a real step.
MAX_STEP = 2**63 - 1
#: The largest float has 309 integer digits; a longer integer literal is out of range
#: for a value and a step alike, and is never converted (``int()`` of 4,300+ digits
#: raises in Python 3.11+, and converting millions of digits takes quadratic time).
_MAX_INT_DIGITS = 400


class _OutOfRange:
    """An integer literal too long to be any metric value or step."""

    def __init__(self, digits: str) -> None:
        self.digits = len(digits.lstrip("-"))

    def __repr__(self) -> str:
        return f"<integer of {self.digits} digits>"


def _parse_int(text: str) -> int | _OutOfRange:
    return _OutOfRange(text) if len(text) > _MAX_INT_DIGITS else int(text)


@dataclass
class MetricSeries:
    """All points of one metric key, sorted by step; ``problems`` make it unusable."""

    key: str
    points: list[tuple[int, float]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class RecordSet:
    """What a record directory (or file) holds, with everything that went wrong on the way."""

    series: dict[str, MetricSeries] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    missing: bool = False
    #: lines holding a number no metric can hold (an integer beyond the float range, a
    #: step >= 2**63): ERROR verdicts for the runner, bad input for ``gate evaluate``
    out_of_range: list[str] = field(default_factory=list)
    #: record files not read because they exceed :data:`MAX_RECORD_BYTES` (or are not
    #: regular files): a warning for the runner, whose metrics from them are then
    #: "not recorded" (ERROR), and bad input for ``gate evaluate``
    unreadable: list[str] = field(default_factory=list)

    def get(self, key: str) -> MetricSeries | None:
        return self.series.get(key)


class _LineError(ValueError):
    def __init__(self, message: str, metric: str | None = None, *,
                 out_of_range: bool = False) -> None:
        super().__init__(message)
        self.metric = metric
        self.out_of_range = out_of_range


def _value(raw: Any, metric: str) -> float:
    if isinstance(raw, bool):
        raise _LineError(f"value must be a number, got {raw!r}", metric)
    if isinstance(raw, _OutOfRange):
        raise _LineError(f"value is an integer of {raw.digits} digits, beyond the range of a "
                         "float", metric, out_of_range=True)
    if isinstance(raw, int):
        try:
            return float(raw)
        except OverflowError:
            raise _LineError(f"value is an integer of {len(str(abs(raw)))} digits, beyond the "
                             "range of a float", metric, out_of_range=True) from None
    if isinstance(raw, float):
        return raw
    if isinstance(raw, str) and raw in _NON_FINITE:
        return _NON_FINITE[raw]
    raise _LineError(f"value must be a number or 'NaN'/'Infinity'/'-Infinity', got {raw!r:.60}",
                     metric)


def _step(raw: Any, metric: str) -> int:
    if isinstance(raw, _OutOfRange) or (isinstance(raw, int) and not isinstance(raw, bool)
                                        and raw > MAX_STEP):
        raise _LineError(f"step {raw!r:.60} is beyond the largest step, 2**63-1", metric,
                         out_of_range=True)
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise _LineError(f"step must be a non-negative integer, got {raw!r:.60}", metric)
    return raw


def parse_line(text: str) -> tuple[str, list[tuple[int, float]]]:
    """One record line -> (metric key, points). Raises ``_LineError`` naming the metric if it can."""
    try:
        obj = json.loads(text, parse_int=_parse_int)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise _LineError(f"not valid JSON ({exc.msg if hasattr(exc, 'msg') else exc})") from None
    if not isinstance(obj, dict):
        raise _LineError(f"expected a JSON object, got {type(obj).__name__}")
    metric = obj.get("metric")
    if not isinstance(metric, str) or not metric:
        raise _LineError(f"'metric' must be a non-empty string, got {metric!r:.60}")
    version = obj.get("v", 1)
    if version != 1:
        raise _LineError(f"record schema version {version!r} is not supported (expected 1)", metric)
    if "series" in obj:
        series = obj["series"]
        if not isinstance(series, list):
            raise _LineError("'series' must be a list of [step, value] pairs", metric)
        points = []
        for item in series:
            if not isinstance(item, list) or len(item) != 2:
                raise _LineError(f"'series' items must be [step, value] pairs, got {item!r:.60}",
                                 metric)
            points.append((_step(item[0], metric), _value(item[1], metric)))
        return metric, points
    if "value" not in obj:
        raise _LineError("a record line needs 'value' (with 'step') or 'series'", metric)
    if obj.get("step") is None:
        raise _LineError("a record line needs a 'step'", metric)
    return metric, [(_step(obj["step"], metric), _value(obj["value"], metric))]


def _record_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.glob("*.jsonl") if p.is_file())


def read_records(path: Path) -> RecordSet:
    """Read a record directory (every ``*.jsonl`` in it) or a single record file."""
    out = RecordSet()
    if not path.exists():
        out.missing = True
        out.warnings.append(f"record path {path} does not exist (the test logged no metrics)")
        return out
    from testfleet.fileio import read_regular

    for file in _record_files(path):
        out.files.append(str(file))
        try:
            data = read_regular(file, MAX_RECORD_BYTES)
        except OSError as exc:
            message = f"{file}: cannot read: {exc.strerror or exc}"
            out.warnings.append(message)
            out.unreadable.append(message)
            continue
        _read_lines(out, file.name, data)
    for series in out.series.values():
        series.points.sort(key=lambda p: p[0])  # stable: a duplicated step keeps both points
    return out


def _read_lines(out: RecordSet, name: str, data: bytes) -> None:
    lines = data.split(b"\n")
    complete = data.endswith(b"\n")
    if complete:
        lines.pop()
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        last_unterminated = not complete and number == len(lines)
        try:
            metric, points = parse_line(raw.decode("utf-8"))
        except (UnicodeDecodeError, _LineError) as exc:
            if last_unterminated:
                out.warnings.append(f"{name}:{number}: truncated last line skipped "
                                    "(the process was probably killed while writing)")
                continue
            bad_metric = exc.metric if isinstance(exc, _LineError) else None
            message = f"{name}:{number}: {exc if isinstance(exc, _LineError) else 'not UTF-8'}"
            if isinstance(exc, _LineError) and exc.out_of_range:
                out.out_of_range.append(message)
            if bad_metric is None:
                out.warnings.append(f"{message}; line skipped")
            else:
                out.series.setdefault(bad_metric, MetricSeries(bad_metric)).problems.append(message)
            continue
        out.series.setdefault(metric, MetricSeries(metric)).points.extend(points)

