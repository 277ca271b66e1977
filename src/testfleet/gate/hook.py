"""Gate one test file's run: the runner's hook and ``testfleet gate evaluate`` share this.

Order of work: read the file's declarations (a file without ``register_ci_gate``
returns at once, without touching the store), read its records, compute the
coordinates, read ALL their baselines in one query, judge, then, on cadences
that write baselines, write the run with ``trusted`` = its verdict.

Fail-soft: a store that cannot be opened, read or written becomes a warning line
and the gate never changes the test's outcome in that case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testfleet.gate.declarations import gate_calls_in_file
from testfleet.gate.evaluate import (
    SpecResult,
    Verdict,
    coordinates,
    evaluate,
    run_trusted,
    select,
)
from testfleet.gate.policy import RunIdentity, enforce_switch, env_key, fails_test
from testfleet.gate.records import RecordSet, read_records
from testfleet.gate.spec import parse_gate_specs

if TYPE_CHECKING:
    from testfleet.config import Project
    from testfleet.documents.gate import GateEvaluateDoc
    from testfleet.documents.vocabulary import GateMode, GateStatus
    from testfleet.findings import Finding


@dataclass
class FileGateResult:
    """What the gate says about one passing file."""

    fails_test: bool = False
    lines: list[str] = field(default_factory=list)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    results: list[SpecResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    trusted: bool | None = None  # None: nothing was evaluated
    written: bool = False
    history_available: bool = True
    enforced: bool = False  # an enforced declaration, the switch on and history readable

    @property
    def gated(self) -> bool:
        return bool(self.results or self.findings)

    @property
    def status(self) -> GateStatus | None:
        """The gate's own verdict on the file (worst first), ``None`` when not gated."""
        statuses = {r.status for r in self.results} | ({"ERROR"} if self.findings else set())
        return next((s for s in ("ERROR", "FAIL", "PASS", "INACTIVE") if s in statuses), None)

    @property
    def mode(self) -> GateMode | None:
        """``enforced`` when the verdict could change the test's outcome, else ``shadow``."""
        if not self.gated:
            return None
        return "enforced" if self.enforced else "shadow"

    def to_json(self) -> GateEvaluateDoc:
        return {
            "schema": "testfleet.gate-evaluate/1",
            "fails_test": self.fails_test, "trusted": self.trusted, "written": self.written,
            "status": self.status, "mode": self.mode,
            "history_available": self.history_available,
            "specs": [r.to_json() for r in self.results],
            "declaration_errors": [f.to_json() for f in self.findings],
            "lines": self.lines,
        }


def gate_file(
    project: Project,
    *,
    file: str,
    backend: str,
    suite: str,
    record_dir: Path,
    write_baseline: bool,
    run_id: str,
    ci_run_id: str | None,
    commit: str | None,
    database: str | None,
) -> FileGateResult:
    """The runner's hook, called after each passing file (records of the passing attempt)."""
    calls, problems = gate_calls_in_file(project.root, file)
    if not calls and not problems:
        return FileGateResult()
    records = read_records(Path(record_dir))
    return evaluate_run(project, calls=calls, problems=problems, records=records, file=file,
                        backend=backend, suite=suite, write_baseline=write_baseline,
                        run_id=run_id, ci_run_id=ci_run_id, commit=commit, database=database)


def evaluate_run(
    project: Project,
    *,
    calls: list[Any],
    problems: list[Finding],
    records: RecordSet,
    file: str,
    backend: str,
    suite: str,
    write_baseline: bool,
    run_id: str,
    ci_run_id: str | None,
    commit: str | None,
    database: str | None,
    environ: dict[str, str] | None = None,
) -> FileGateResult:
    """Evaluate already-read records for ``file`` (the CLI reads a record path of its choosing)."""
    cfg = project.config.gate
    specs, findings = parse_gate_specs(project, calls)
    out = FileGateResult(findings=[*problems, *findings])
    for f in out.findings:
        out.lines.append(f"gate: {f.render()}")
        out.verdicts.append({"file": f.file, "line": f.line, "status": "ERROR",
                             "message": f"declaration error: {f.message}", "code": f.code})
    out.lines.extend(f"gate: warning: {w}" for w in records.warnings)
    if not specs:
        return out

    selected = select(specs, records)
    coords = coordinates(selected)
    identity = RunIdentity(file, backend, suite, env_key(cfg.env_keys, environ))
    metric_store, baselines, note = _baselines(project, database, identity, coords, cfg.window)
    try:
        if note:
            out.lines.append(f"gate: warning: {note}")
        out.history_available = baselines is not None
        out.results = evaluate(selected, baselines, cfg.window)
        out.trusted = run_trusted(out.results)
        for result in out.results:
            out.lines.extend(describe(result))
            out.verdicts.extend(dict(v.to_json()) for v in result.verdicts)

        switch, switch_warning = enforce_switch(cfg.enforce, environ)
        if switch_warning:
            out.lines.append(f"gate: warning: {switch_warning}")
        would_fail = fails_test(out.results, True)
        out.enforced = (out.history_available and switch
                        and any(r.spec.enforce for r in out.results))
        out.fails_test = out.history_available and fails_test(out.results, switch)
        if would_fail and not out.fails_test:
            why = ("the history database is unavailable" if not out.history_available
                   else "enforcement is off ([tool.testfleet.gate] enforce or TESTFLEET_GATE_ENFORCE=1)")
            out.lines.append(f"gate: an enforced gate did not pass, but the test outcome is "
                             f"unchanged: {why}")

        if write_baseline and metric_store is not None:
            out.written = _write(metric_store, out, identity, run_id, ci_run_id, commit)
        state = "trusted" if out.trusted else "untrusted"
        where = ("baseline written" if out.written
                 else "shadow run, nothing written" if not write_baseline
                 else "NOT written")
        out.lines.append(f"gate: {file}: run {state}; {where}")
    finally:
        if metric_store is not None:
            metric_store.store.close()
    return out


def _baselines(project: Project, database: str | None, identity: RunIdentity,
               coords: list[Any], window: int) -> tuple[Any, dict[Any, list[float]] | None, str | None]:
    """(open metric store or None, baselines or None when unavailable, warning)."""
    try:
        from testfleet.store.core import open_store
        from testfleet.store.errors import StoreError
        from testfleet.store.metric_store import MetricStore
    except ImportError as exc:  # pragma: no cover - a broken installation
        return None, None, f"history store cannot be loaded ({exc}); verdicts without history"
    try:
        store = open_store(project, database)
    except StoreError as exc:
        return None, None, f"history unavailable ({exc}); verdicts without history, nothing written"
    ms = MetricStore(store)
    try:
        key = (identity.test_path, identity.backend, identity.suite, identity.env_key)
        return ms, ms.baselines(key, coords, window), None
    except StoreError as exc:
        store.close()
        return None, None, f"history unavailable ({exc}); verdicts without history, nothing written"


def _write(ms: Any, out: FileGateResult, identity: RunIdentity, run_id: str,
           ci_run_id: str | None, commit: str | None) -> bool:
    from testfleet.store.errors import StoreError
    from testfleet.store.metrics import GateRun, StoredValue

    values = [
        StoredValue(v.spec.metric_key, v.spec.steps_key, v.spec.constraint_key, v.step, v.value,
                    v.actual_step)
        for r in out.results for v in r.verdicts
        if v.step is not None and v.value is not None and math.isfinite(v.value)
    ]
    run = GateRun(run_id=run_id, test_path=identity.test_path, backend=identity.backend,
                  suite=identity.suite, env_key=identity.env_key, ci_run_id=ci_run_id,
                  commit=commit)
    try:
        ms.write_run(run, values, trusted=bool(out.trusted))
    except StoreError as exc:
        out.lines.append(f"gate: warning: baseline not written: {exc}")
        return False
    return True


# --------------------------------------------------------------------------- text


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.6g}"


def _detail(v: Verdict) -> str:
    parts = [f"value {_num(v.value)}"]
    if v.reference is not None:
        parts.append(f"reference {_num(v.reference)} (mean of {v.n})")
        parts.append(f"corridor [{_num(v.lower)}, {_num(v.upper)}]")
        dev = f"deviation {v.abs_dev:+.6g}" if v.abs_dev is not None else ""
        if v.rel_dev is not None:
            dev += f" ({v.rel_dev:+.2%})"
        parts.append(dev)
    return ", ".join(p for p in parts if p)


def describe(result: SpecResult) -> list[str]:
    """Human lines for one declaration: one line, or a summary plus the first failure."""
    spec = result.spec
    tag = " (enforced)" if spec.enforce else ""
    head = f"gate: {result.status:<8} {spec.label}{tag}"
    verdicts = result.verdicts
    if len(verdicts) == 1:
        v = verdicts[0]
        step = f" at step {v.actual_step}" if spec.steps == "last" and v.actual_step is not None else ""
        text = v.message if v.status in ("ERROR", "INACTIVE") and v.value is None else _detail(v)
        if v.message and v.status != "INACTIVE" and v.value is not None:
            text += f": {v.message}"
        elif v.status == "INACTIVE" and v.value is not None:
            text += f" ({v.message})"
        return [f"{head}{step}: {text}"]
    counts = result.counts()
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    lines = [f"{head}: {len(verdicts)} steps: {summary}"]
    first_error = next((v for v in verdicts if v.status == "ERROR"), None)
    if first_error is not None:
        lines.append(f"gate:   first ERROR: {first_error.message}")
    if result.first_fail_step is not None:
        v = next(x for x in verdicts if x.status == "FAIL" and x.actual_step == result.first_fail_step)
        lines.append(f"gate:   first step out of band: {v.actual_step}: {_detail(v)}"
                     + (f": {v.message}" if v.message else ""))
    elif result.status == "INACTIVE":
        lines.append(f"gate:   {verdicts[0].message}")
    return lines
