"""``[markers.<marker>]`` tables for the markers a tree calls, from the signatures its
marker module declares.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from testfleet.adopt.calls import GATE
from testfleet.adopt.scan import Scan


def marker_tables(scan_result: Scan, notes: list[str]) -> dict[str, dict[str, Any]]:
    """``[markers.<marker>]`` tables for the markers the tree calls, as the project's module
    declares them: one ``"*"`` table when they all share a signature, else one per marker."""
    used = sorted({c.marker for c in scan_result.calls} | {m for _, c in scan_result.raw_calls
                                                          for m in [c.name] if m != GATE})
    sigs = {m: scan_result.signatures[m] for m in used if m in scan_result.signatures}
    if not sigs:
        return {}
    # est_time = 0 is valid to the project's own parser for every marker it defines
    zero = any(c.est_time == 0 for c in scan_result.calls)
    # suite "" likewise, where the module never rejects it (its calls were read that way)
    empty = {c.marker for c in scan_result.calls if c.suite == ""}
    tables: dict[str, dict[str, Any]] = {}
    for marker, sig in sigs.items():
        tables[marker] = {**sig.table(), **({"allow_zero_est_time": True} if zero else {}),
                          **({"allow_empty_suite": True} if empty and sig.empty_suite else {})}
    distinct = {repr(t) for t in tables.values()}
    if len(distinct) == 1 and len(tables) == len(used):
        tables = {"*": next(iter(tables.values()))}
    notes.append(f"marker signature(s) read from {scan_result.signatures_source}: "
                 + "; ".join(f"{m}: {', '.join(f'{k}={v}' for k, v in t.items())}"
                             for m, t in tables.items()))
    ignored: Counter[str] = Counter(
        k.arg for _, c in scan_result.raw_calls if c.name in sigs
        for k in c.node.keywords if k.arg in sigs[c.name].ignore)
    if ignored:
        notes.append("keyword(s) the configuration does not read, accepted and ignored: "
                     + ", ".join(f"{k} ({n} call(s))" for k, n in sorted(ignored.items()))
                     + "; whatever the project's runner does with them (SGLang's in_process_group "
                       "starts several files in one process) testfleet does not: each file runs "
                       "on its own with the stage's command")
    if empty:
        files = sorted({c.file for c in scan_result.calls if c.suite == ""})
        notes.append(f"{len(files)} file(s) register with suite \"\" (run by path only, never by a "
                     f"suite), which {scan_result.signatures_source} accepts: allow_empty_suite = "
                     "true")
    return tables
