"""A stage job's pull-request gates (a label it waits for, a draft that fails it) and its
ordering among the stages, each looked up through the jobs it needs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from testfleet.adopt.ci_model import CIRead

_LABEL_MISSING = re.compile(r"!\s*contains\(\s*github\.event\.pull_request\.labels\.\*\.name\s*,"
                            r"\s*'([^']+)'\s*\)")


_DRAFT = re.compile(r"github\.event\.pull_request\.draft\s*==\s*true")


_FAILS = re.compile(r"(?m)^\s*exit\s+[1-9]")


_LABEL_NAMED = re.compile(r"contains\(\s*github\.event\.pull_request\.labels\.\*\.name\s*,"
                          r"\s*'([^']+)'\s*\)")


_PR_LABELS = "github.event.pull_request.labels.*.name"


def _job_if_gates(condition: str) -> tuple[set[str], bool]:
    """The labels a job's own ``if:`` waits for on a pull request (it is certainly skipped
    without the label and may run with it), and whether it certainly skips a draft;
    evaluated with :mod:`testfleet.adopt.expr`, the jobs it needs taken as succeeding."""
    from testfleet.adopt.expr import Unresolved, job_condition

    def values(labels: list[str], draft: bool) -> list[Any]:
        return job_condition(condition, {
            "github.event_name": "pull_request", _PR_LABELS: labels,
            "github.event.pull_request.draft": draft,
            "github.event.label.name": labels[0] if labels else ""})

    def never(vals: list[Any]) -> bool:
        return all(v in (False, None, "", 0) for v in vals)

    candidates = sorted(set(_LABEL_NAMED.findall(condition)))
    gates: set[str] = set()
    try:
        if candidates and never(values([], False)):
            gates = {c for c in candidates if not never(values([c], False))}
        draft = never(values(candidates, True)) and not never(values(candidates, False))
    except Unresolved:
        return set(), False
    return gates, draft


def pr_gates(jobs: Mapping[str, Any], job_stage: Mapping[str, str], result: CIRead) -> None:
    """A step that fails its job on a pull request without a label (``if: ...
    !contains(github.event.pull_request.labels.*.name, 'run-ci')`` + ``exit 1``, as
    SGLang's check-changes job does) or on a draft, or a job's own ``if:`` that skips it
    then, gates every stage job that needs that job, directly or through other jobs."""
    own: dict[str, tuple[set[str], bool]] = {}
    for job_id, job in jobs.items():
        labels: set[str] = set()
        draft = False
        steps = job.get("steps") if isinstance(job, Mapping) else None
        for step in steps if isinstance(steps, list) else []:
            if not isinstance(step, Mapping) or not isinstance(step.get("if"), str) \
                    or not isinstance(step.get("run"), str) or not _FAILS.search(step["run"]):
                continue
            labels |= set(_LABEL_MISSING.findall(step["if"]))
            draft = draft or bool(_DRAFT.search(step["if"]))
        condition = job.get("if") if isinstance(job, Mapping) else None
        if isinstance(condition, str):
            more, skips_draft = _job_if_gates(condition)
            labels |= more
            draft = draft or skips_draft
        own[str(job_id)] = (labels, draft)

    def needs_of(job_id: str) -> list[str]:
        job = jobs.get(job_id)
        raw = job.get("needs") if isinstance(job, Mapping) else None
        return [raw] if isinstance(raw, str) else [str(x) for x in raw] if isinstance(raw, list) else []

    for job_id, stage in job_stage.items():
        ci = result.stages[stage]
        target = ci if ci.job == job_id else next(
            (o for o in ci.by_hw.values() if o.job == job_id), None)
        if target is None:
            continue
        seen: set[str] = set()
        todo = [job_id]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            labels, draft = own.get(current, (set(), False))
            target.pr_labels_required |= labels
            target.draft_fails = target.draft_fails or draft
            todo.extend(needs_of(current))


def resolve_needs(jobs: Mapping[str, Any], job_stage: Mapping[str, str], result: CIRead) -> None:
    """Stage ordering from ``needs``, looking through jobs that are not stages (a stage that
    needs an image build that needs stage A runs after stage A)."""

    def needs_of(job_id: str) -> list[str]:
        job = jobs.get(job_id)
        raw = job.get("needs") if isinstance(job, Mapping) else None
        return [raw] if isinstance(raw, str) else [str(x) for x in raw] if isinstance(raw, list) else []

    for job_id, stage in job_stage.items():
        if result.stages[stage].job != job_id or result.stages[stage].needs:
            continue
        found: set[str] = set()
        seen: set[str] = set()
        todo = needs_of(job_id)
        while todo:
            other = todo.pop()
            if other in seen:
                continue
            seen.add(other)
            if other in job_stage and job_stage[other] != stage:
                found.add(job_stage[other])
            else:
                todo.extend(needs_of(other))
        result.stages[stage].needs = sorted(found)
