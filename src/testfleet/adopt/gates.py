"""A stage job's pull-request gates (a label it waits for, a draft that fails it) and its
ordering among the stages, each looked up through the jobs it needs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testfleet.adopt.ci_model import CIRead, CIStage

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


_RUN_LABEL_CHECK = re.compile(
    r"contains\(\s*(?:fromJson\(\s*steps\.[\w-]+\.outputs\.labels\s*\)|"
    r"github\.event\.pull_request\.labels\.\*\.name)\s*,\s*'([^']+)'\s*\)\s*\}\}\"?\s*==\s*\"?false",
    re.IGNORECASE)
_STEP_OUTPUT = re.compile(r"\bsteps\.([\w-]+)\.outputs\.(draft|labels)\b")
_INPUT = re.compile(r"\binputs\.([A-Za-z0-9_-]+)")


def step_gates(steps: Any, inputs: Mapping[str, Any]) -> tuple[set[str], bool]:
    """The labels a job's steps fail it without on a pull request, and whether they fail
    it on a draft: a step with ``exit 1`` whose ``if:`` names a missing label
    (``!contains(github.event.pull_request.labels.*.name, 'run-ci')``) or is true on a
    draft only, or whose script tests a label and exits (``[[ "${{ contains(fromJson(
    steps.pr.outputs.labels), 'run-ci') }}" == "false" ]] ... exit 1``, SGLang's
    pr-gate.yml, where a step fetched the live pull request into ``steps.pr.outputs``)."""
    from testfleet.adopt.expr import Unresolved, job_condition

    labels: set[str] = set()
    draft = False
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, Mapping) or not isinstance(step.get("run"), str) \
                or not _FAILS.search(step["run"]):
            continue
        condition = step.get("if")

        def runs(is_draft: bool, cond: Any = condition) -> bool | None:
            if not isinstance(cond, str):
                return True
            contexts: dict[str, Any] = {"github.event_name": "pull_request",
                                        "github.event.pull_request.draft": is_draft}
            for step_id, what in _STEP_OUTPUT.findall(cond):
                contexts[f"steps.{step_id}.outputs.{what}"] = (
                    "true" if is_draft else "false") if what == "draft" else "[]"
            for name in _INPUT.findall(cond):
                contexts[f"inputs.{name}"] = inputs.get(name)
            try:
                values = job_condition(cond, contexts)
            except Unresolved:
                return None
            return not all(v in (False, None, "", 0) for v in values)

        if isinstance(condition, str):
            labels |= set(_LABEL_MISSING.findall(condition))
            on_draft, on_ready = runs(True), runs(False)
            if _DRAFT.search(condition) or (on_draft is True and on_ready is False):
                draft = True
        if runs(False) is not False:
            labels |= set(_RUN_LABEL_CHECK.findall(step["run"]))
    return labels, draft


def _needs_of(jobs: Mapping[str, Any], job_id: str) -> list[str]:
    job = jobs.get(job_id)
    raw = job.get("needs") if isinstance(job, Mapping) else None
    return [raw] if isinstance(raw, str) else [str(x) for x in raw] if isinstance(raw, list) else []


def _targets(result: CIRead, stage: str, rel: str, job_id: str) -> list[CIStage]:
    """The stage jobs (main, other hardware, alternates) that job ``job_id`` of ``rel`` is."""
    ci = result.stages.get(stage)
    if ci is None:
        return []
    every = [ci, *ci.alternates, *(j for o in ci.by_hw.values() for j in (o, *o.alternates))]
    return [j for j in every if j.job == job_id and j.workflow == rel]


def pr_gates(jobs: Mapping[str, Any], job_stages: Mapping[str, list[str]], result: CIRead,
             repo: Path, rel: str, cache: dict[str, Any] | None = None) -> None:
    """A step that fails its job on a pull request without a label or on a draft (see
    :func:`_step_gates`; a job that calls a reusable gate workflow such as SGLang's
    pr-gate.yml is read through it, with its inputs), or a job's own ``if:`` that skips it
    then, gates every stage job that needs that job, directly or through other jobs."""
    from testfleet.adopt.workflow_yaml import called_jobs

    own: dict[str, tuple[set[str], bool]] = {}
    for job_id, job in jobs.items():
        if not isinstance(job, Mapping):
            continue
        labels, draft = step_gates(job.get("steps"), {})
        if isinstance(job.get("uses"), str):
            raw = job.get("with")
            with_: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
            for inner in called_jobs(repo, job["uses"], with_, "", [], [], cache):
                more, on_draft = step_gates(inner.get("steps"), inner.get("\0inputs", {}))
                labels |= more
                draft = draft or on_draft
        condition = job.get("if")
        if isinstance(condition, str):
            more, skips_draft = _job_if_gates(condition)
            labels |= more
            draft = draft or skips_draft
        own[str(job_id)] = (labels, draft)

    for job_id, stages in job_stages.items():
        targets = [t for stage in stages for t in _targets(result, stage, rel, job_id)]
        seen: set[str] = set()
        todo = [job_id]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            labels, draft = own.get(current, (set(), False))
            for target in targets:
                target.pr_labels_required |= labels
                target.draft_fails = target.draft_fails or draft
            todo.extend(_needs_of(jobs, current))


def events_allowed(condition: Any, events: tuple[str, ...],
                    inputs: Mapping[str, Any]) -> tuple[str, ...]:
    """The events on which a job's ``if:`` can be true (``github.event_name == 'schedule'
    || inputs.run_all == true`` keeps schedule, and the events with inputs). On an event
    without inputs (a push, a pull request, a schedule) every ``inputs.*`` is null."""
    if not isinstance(condition, str):
        return events
    from testfleet.adopt.expr import Unresolved, job_condition

    kept = []
    for event in events:
        with_inputs = event in ("workflow_dispatch", "workflow_call")
        contexts: dict[str, Any] = {"github.event_name": event}
        for name in _INPUT.findall(condition):
            if name in inputs:
                contexts[f"inputs.{name}"] = inputs[name]
            elif not with_inputs:
                contexts[f"inputs.{name}"] = None
        try:
            values = job_condition(condition, contexts)
        except Unresolved:
            kept.append(event)
            continue
        if not all(v in (False, None, "", 0) for v in values):
            kept.append(event)
    return tuple(kept)


_WAITS_FOR = re.compile(r'"prefix"\s*:\s*"([A-Za-z0-9][A-Za-z0-9._-]*)"')


def resolve_needs(jobs: Mapping[str, Any], job_stages: Mapping[str, list[str]], result: CIRead,
                  rel: str, known: set[str]) -> None:
    """Stage ordering from ``needs``, looking through jobs that are not stages (a stage that
    needs an image build that needs stage A runs after stage A), per event: a job whose
    ``if:`` skips it on an event orders nothing then, and a job that waits for other
    stages' jobs by name (SGLang's ``wait-for-base-a``: ``wait-for-jobs`` with
    ``{"prefix": "base-a-test-1-gpu-small"}``, on pull requests only) orders the stage
    after those stages on the events it runs on. Events with other waits than the most
    common ones become ``needs_on``."""
    from testfleet.adopt.workflow_yaml import text_of

    def active(job_id: str, event: str) -> bool:
        job = jobs.get(job_id)
        return isinstance(job, Mapping) and bool(events_allowed(job.get("if"), (event,), {}))

    def waits(job_id: str) -> set[str]:
        job = jobs.get(job_id)
        text = text_of(job.get("steps")) if isinstance(job, Mapping) else ""
        return {s for s in _WAITS_FOR.findall(text) if s in known}

    for job_id, stages in job_stages.items():
        targets = [t for stage in stages for t in _targets(result, stage, rel, job_id)]
        events = sorted({e for t in targets for e in t.events}) or [""]
        per_event: dict[str, list[str]] = {}
        for event in events:
            found: set[str] = set()
            seen: set[str] = set()
            todo = list(_needs_of(jobs, job_id))
            while todo:
                other = todo.pop()
                if other in seen or (event and not active(other, event)):
                    continue
                seen.add(other)
                if other in job_stages:
                    found.update(s for s in job_stages[other] if s not in stages)
                else:
                    found.update(s for s in waits(other) if s not in stages)
                    todo.extend(_needs_of(jobs, other))
            per_event[event] = sorted(found)
        common = max(per_event.values(), key=lambda v: (sum(1 for x in per_event.values() if x == v), -len(v)))
        for target in targets:
            if target.needs or target.needs_on:
                continue
            target.needs = common
            target.needs_on = {e: v for e, v in per_event.items() if v != common and e}
