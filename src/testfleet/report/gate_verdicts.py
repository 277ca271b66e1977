"""The metric-gate table's last verdict, read where "Failing now" reads it. Pure.

The gate's tables in the history database hold only the runs that write baselines
(nightly, weekly): a pull request's run, or a run with the gate enforced by hand, is
evaluated and reported but stored nowhere there. Read from those tables alone, the
gate table said PASS (the last baseline run) while "Failing now" showed the same file
failed by its gate in a later run. Every run, baseline or not, records the gate's
verdict with the file's final result (``executions.gate_status``/``gate_mode``), which
is what "Failing now" reads; so the table's last verdict comes from there too, and the
baseline tables only count runs (``runs``, ``untrusted_runs``). A file whose gate was
evaluated outside ``testfleet run`` (``testfleet gate evaluate --write-baseline``) has
no such result: its row keeps the stored run's verdict, marked ``last_source =
"baseline"``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from testfleet.report.health import when
from testfleet.report.model import GateRow


def with_run_verdicts(gates: Sequence[GateRow], files: Sequence[Any],
                      url: Callable[[str | None, str | None], str | None],
                      metrics: Mapping[str, Sequence[str]],
                      backend: Callable[[str, str], str]) -> tuple[GateRow, ...]:
    """``gates`` with their last verdict taken from ``files`` (per-file result summaries,
    runs newest first) where a result recorded one; plus a row per metric for each gated
    file (``metrics``: file -> its metric keys) that has gated results but no baseline run.
    ``url(ci_run_id, commit)`` links a run; ``backend(stage, file)`` names a new row's."""
    newest: dict[tuple[str, str], Any] = {}
    for f in files:
        run = next((r for r in f.runs if r.gate_status), None)
        if run is not None:
            newest[(f.stage, f.file)] = run
    out = []
    seen = set()
    for g in gates:
        seen.add((g.suite, g.file))
        run = newest.get((g.suite, g.file))
        if run is None:
            out.append(replace(g, last_source="baseline" if g.last_verdict else None,
                               last_url=url(g.last_ci_run_id, None)))
            continue
        out.append(replace(g, last_verdict=run.gate_status, last_mode=run.gate_mode,
                           last_run=when(run.ts), last_ts=run.ts, last_ci_run_id=run.ci_run_id,
                           last_url=url(run.ci_run_id, run.commit), last_source="result"))
    for (stage, file), run in sorted(newest.items()):
        if (stage, file) in seen or not metrics.get(file):
            continue
        for metric in sorted(set(metrics[file])):
            out.append(GateRow(file=file, backend=backend(stage, file), suite=stage,
                               metric=metric, coordinates=0, last_verdict=run.gate_status,
                               last_run=when(run.ts), runs=0, untrusted_runs=0,
                               last_mode=run.gate_mode, last_source="result", last_ts=run.ts,
                               last_ci_run_id=run.ci_run_id,
                               last_url=url(run.ci_run_id, run.commit)))
    return tuple(out)
