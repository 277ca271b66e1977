"""The report as JSON, schema ``testfleet.report/1``: one canonical form for tools.

Keys are sorted and lists keep the report's order, so identical inputs give identical
bytes. Consumers should check ``schema`` and may ignore keys they do not know.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from testfleet.report.model import SCHEMA, GroupRow, LedgerEntry, Report, StageRow
from testfleet.report.render_results import json_data as results_json

if TYPE_CHECKING:
    from testfleet.documents.report import GroupDoc, LedgerEntryDoc, ReportDoc, StageRowDoc


def to_json_data(report: Report) -> ReportDoc:
    h = report.history
    data: ReportDoc = {
        "schema": SCHEMA,
        "project": report.project,
        "config_file": report.config_file,
        "generated": report.generated,
        "headline": report.headline(),
        # #26: stages whose files failed their last run (broken: one failed 3+ runs in a row)
        "failing_stages": sorted(h.stage for h in report.failing_stages),
        "broken_stages": sorted(h.stage for h in report.failing_stages if h.state == "broken"),
        "totals": report.totals.to_json(),
        "runnable": report.runnable,
        "holes": [{"kind": x.kind, "name": x.name, "cause": x.cause, "detail": x.detail,
                   "lost": x.lost} for x in report.holes],
        "stages": [_stage(s, report) for s in report.stages],
        "dormant": [{"name": s.name, "backend": s.backend, "reason": s.reason,
                     "references": [r.to_json() for r in s.references],
                     "registrations": s.counts.total, "would_run": s.counts.active}
                    for s in report.dormant],
        "backends": [_group(g) for g in report.backends],
        "labels": [_group(g) for g in report.labels],
        "ledger": [_entry(e) for e in report.ledger],
        "git": report.git,
        "results": results_json(report.results),
        "history": {
            "available": h.available,
            "note": h.note,
            "drift_factor": h.drift_factor,
            "drift": [{"file": d.file, "stage": d.stage, "literal": d.literal,
                       "measured": round(d.measured, 3), "samples": d.samples,
                       "factor": round(d.factor, 3)} for d in h.drift],
            "gates": [{"file": g.file, "backend": g.backend, "suite": g.suite,
                       "metric": g.metric, "coordinates": g.coordinates,
                       "last_verdict": g.last_verdict, "last_run": g.last_run,
                       "last_mode": g.last_mode, "last_source": g.last_source,
                       "last_ts": g.last_ts, "last_ci_run_id": g.last_ci_run_id,
                       "last_url": g.last_url,
                       "runs": g.runs, "untrusted_runs": g.untrusted_runs} for g in h.gates],
            "trends": [{"file": t.file, "metric": t.metric, "step": t.step, "label": t.label,
                        "reference": t.reference,
                        "band": list(t.band) if t.band else None,
                        "points": [{"when": p.when, "value": _finite(p.value), "trusted": p.trusted,
                                    "run": p.run} for p in t.points]} for t in h.trends],
        },
        "plan": None,
        "notes": list(report.notes),
        "findings": list(report.findings),
    }
    if report.plan is not None:
        p = report.plan
        data["plan"] = {
            "source": p.source, "digest": p.digest, "policy": p.policy,
            "warnings": list(p.warnings),
            "stages": [{
                "stage": t.stage, "backend": t.backend, "status": t.status, "reason": t.reason,
                "makespan": round(t.makespan, 3), "lower_bound": round(t.lower_bound, 3),
                "ratio": round(t.ratio, 4) if t.ratio is not None else None,
                "shards": [{"shard": b.shard, "job": b.job_id, "estimate": round(b.estimate, 3),
                            "tests": [{"file": f, "estimate": e, "source": s}
                                      for f, e, s in b.files]} for b in t.shards],
            } for t in p.timelines],
        }
    return data


def render_json(report: Report) -> str:
    return json.dumps(to_json_data(report), indent=2, sort_keys=True, ensure_ascii=False,
                      allow_nan=False) + "\n"


def _finite(x: float) -> float | None:
    """JSON has no NaN or Infinity: a non-finite metric value is written as null."""
    return x if math.isfinite(x) else None


def _stage(s: StageRow, report: Report) -> StageRowDoc:
    """``status`` is the configuration's; ``health`` what its results say (null: none)."""
    health = report.health_of(s.name)
    return {"name": s.name, "backend": s.backend, "status": s.status, "reason": s.reason,
            "references": [r.to_json() for r in s.references], "trusted_only": s.trusted_only,
            "runs_on": list(s.runs_on), "counts": s.counts.to_json(), "config_line": s.config_line,
            "health": health.to_json() if health is not None else None}


def _group(g: GroupRow) -> GroupDoc:
    return {"name": g.name, "counts": g.counts.to_json(), "scheduled": g.scheduled,
            "stages": list(g.stages)}


def _entry(e: LedgerEntry) -> LedgerEntryDoc:
    out: LedgerEntryDoc = {
        "file": e.file, "line": e.line, "reason_line": e.reason_line, "backend": e.backend,
        "suite": e.suite, "labels": list(e.labels), "reason": e.reason,
        "references": [r.to_json() for r in e.references],
        "age": {"days": e.age_days, "status": e.age_status, "note": e.age_note,
                "changed": e.changed, "commit": e.commit, "lower_bound": e.age_lower_bound},
        "expiry": {"date": e.expiry, "error": e.expiry_error, "expired": e.expired,
                   "days_left": e.days_left} if (e.expiry or e.expiry_error) else None,
        "shared_reason": e.shared_reason, "stage_dormant": e.stage_dormant,
    }
    if e.runners:
        out["runners"] = list(e.runners)
    return out
