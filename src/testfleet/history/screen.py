"""What a merge takes from each bundle, decided before the database is touched.

A bundle's times are claims: a checksum proves the file was not changed after export,
not that the exporting machine's clock was right or that whoever made the file was
honest. A row dated after the merge cannot be when it was recorded. Stored, it would
rank newest forever (estimates read the newest samples, gate baselines the newest
runs), so a bundle with three rows dated 2096 pinned a file's estimate at their
duration and, with ``--keep 2``, had the real rows pruned in their favour (#27). Such
rows -- forged, or from a runner whose clock runs ahead -- are left out with a warning
that says which and from which CI runs; the rest of the bundle is merged.

One identity (uid) is one record: two bundles carrying one uid with different
content, or a bundle contradicting what is stored, is a sign of tampering or of a
bug, and is said so (the first copy is kept, as before). Pure functions.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from testfleet.history.bundle import Bundle
from testfleet.store.durations import FUTURE_SKEW

if TYPE_CHECKING:
    from testfleet.documents.history import FutureTable
from testfleet.textsafe import printable

#: At most this many uid conflicts are listed one by one; the rest are counted.
MAX_LISTED = 10
#: Fields that may differ between copies of one gate run: trust is taken away by a merge
#: (``gate untrust`` in another database), never a conflict.
_TRUST_FIELDS = frozenset({"trusted", "untrusted_at", "untrusted_by"})


@dataclass(frozen=True)
class Bounded:
    """A bundle with its rows dated after the merge left out, and what was left out."""

    bundle: Bundle
    dropped: dict[FutureTable, int]  # table -> rows left out
    latest: float | None = None  # the latest time claimed by a row left out
    runs: tuple[str, ...] = ()  # the CI run ids those rows name

    def note(self) -> str | None:
        if not any(self.dropped.values()):
            return None
        what = ", ".join(f"{n} {table.replace('_', ' ')}" for table, n in self.dropped.items() if n)
        runs = f" (CI run {', '.join(self.runs)})" if self.runs else ""
        return printable(
            f"{self.bundle.name}: {what} dated in the future (up to {_iso(self.latest)}, more "
            f"than {FUTURE_SKEW:g} s after this merge){runs} not merged: a time after the merge "
            "cannot be when a row was recorded (a forged bundle, or a runner whose clock is "
            "wrong); the rest of the bundle is merged")


def bound_times(bundle: Bundle, limit: float) -> Bounded:
    """``bundle`` without the rows claiming a time after ``limit`` (the merge's clock plus
    :data:`FUTURE_SKEW`): executions (``ts``, ``recorded_at``) with their testcase results,
    testcase results of their own, gate runs (``recorded_at``, ``untrusted_at``) with
    their values."""
    p = bundle.payload
    late: list[float] = []
    runs: set[str] = set()

    def future(*times: float | None, run: str | None = None) -> bool:
        over = [t for t in times if t is not None and t > limit]
        late.extend(over)
        if over and run:
            runs.add(run)
        return bool(over)

    executions = [r for r in p.executions
                  if not future(r.ts, r.recorded_at, run=r.ci_run_id)]
    kept_uids = {r.uid for r in executions}
    testcases = [c for c in p.testcases
                 if c.execution in kept_uids and not future(c.recorded_at)]
    gate_runs = [r for r in p.gate_runs
                 if not future(r.recorded_at, r.untrusted_at, run=r.ci_run_id)]
    kept_runs = {r.uid for r in gate_runs}
    gate_values = [v for v in p.gate_values if v.run in kept_runs]
    dropped: dict[FutureTable, int] = {"executions": len(p.executions) - len(executions),
               "testcase_results": len(p.testcases) - len(testcases),
               "gate_runs": len(p.gate_runs) - len(gate_runs),
               "gate_values": len(p.gate_values) - len(gate_values)}
    if not any(dropped.values()):
        return Bounded(bundle, dropped)
    payload = p.model_copy(update={"executions": executions, "testcases": testcases,
                                   "gate_runs": gate_runs, "gate_values": gate_values})
    return Bounded(Bundle(payload, bundle.sha256, bundle.name), dropped,
                   max(late, default=None), tuple(sorted(runs))[:5])


def conflicts(bundles: Sequence[Bundle]) -> list[str]:
    """One line per uid that two bundles carry with different content (executions and gate
    runs; a gate run's trust fields may differ), the first copy named as the one kept."""
    lines: list[str] = []
    for what, rows in (("execution", _rows(bundles, "executions")),
                       ("gate run", _rows(bundles, "gate_runs"))):
        first: dict[str, tuple[str, dict[str, Any]]] = {}
        for name, row in rows:
            seen = first.setdefault(row["uid"], (name, row))
            fields = differing(seen[1], row, _TRUST_FIELDS if what == "gate run" else ())
            if seen[1] is not row and fields:
                lines.append(f"{what} {row['uid']} ({_where(row)}): {name} carries different "
                             f"content than {seen[0]} ({', '.join(fields)}); the copy of "
                             f"{seen[0]} is kept")
    return _capped(lines)


def stored_conflicts(bundles: Sequence[Bundle], stored: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per execution a bundle carries with content other than the stored copy's
    (``stored``: uid -> the stored row's columns, as the ``executions`` view reads them)."""
    lines = []
    for name, row in _rows(bundles, "executions"):
        have = stored.get(row["uid"])
        fields = differing(have, row, ()) if have is not None else []
        if fields:
            lines.append(f"execution {row['uid']} ({_where(row)}): {name} carries different "
                         f"content than the stored copy ({', '.join(fields)}); the stored copy "
                         "is kept")
    return _capped(lines)


def differing(a: Mapping[str, Any], b: Mapping[str, Any], ignore: Iterable[str]) -> list[str]:
    """The fields of ``b`` whose value differs from ``a``'s (commit ids compared ignoring
    case, as the store keeps them)."""
    skip = set(ignore)
    out = []
    for key, value in b.items():
        if key in skip or key not in a:
            continue
        mine = a[key]
        if key == "commit_sha" and isinstance(mine, str) and isinstance(value, str):
            mine, value = mine.lower(), value.lower()
        if mine != value:
            out.append(key)
    return out


def _rows(bundles: Sequence[Bundle], table: str) -> list[tuple[str, dict[str, Any]]]:
    return [(b.name, r.model_dump()) for b in bundles for r in getattr(b.payload, table)]


def _where(row: Mapping[str, Any]) -> str:
    if "test_path" in row:
        return f"{row['test_path']} in {row['suite']}"
    return f"{row['file']} in {row['stage']}"


def _capped(lines: list[str]) -> list[str]:
    shown = [printable(line) for line in lines[:MAX_LISTED]]
    if len(lines) > MAX_LISTED:
        shown.append(f"... and {len(lines) - MAX_LISTED} more record(s) with conflicting copies")
    return shown


def _iso(epoch: float | None) -> str:
    if epoch is None:
        return "?"
    try:
        return dt.datetime.fromtimestamp(epoch, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    except (OverflowError, OSError, ValueError):
        return f"{epoch:.0f} (epoch seconds)"
