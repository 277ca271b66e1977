"""The adopted ``[policy]``: pull-request gates, schedules and the cadences of an exact
nightly split.
"""

from __future__ import annotations

import re
from typing import Any

from testfleet.adopt.calls import ALIASES
from testfleet.adopt.ci_model import CIRead, CIStage
from testfleet.adopt.project import ProjectCI
from testfleet.config import BUILTIN_BACKENDS

DEFAULT_SCHEDULES = {"0 3 * * 1-6": "nightly", "0 3 * * 0": "weekly"}
_CADENCES = {"regular", "nightly", "weekly", "release"}


def pr_gate_policy(stages: dict[str, dict[str, Any]], ci: CIRead, policy: dict[str, Any],
                    notes: list[str]) -> None:
    """The existing CI's pull-request gates (a job every stage job needs fails without a
    label, or on a draft) as the policy's ``required_label`` / ``drafts``, or as a stage's
    ``requires_labels`` when only some stages wait for a label."""
    jobs: list[tuple[str, bool, CIStage]] = []
    for name, stage in stages.items():
        job = ci.stages.get(name)
        if job is None or "disabled" in stage:
            continue
        for j in every_job(job):
            if {"pull_request", "pull_request_target"} & set(j.events):
                backend = ALIASES.get((j.hw or "").lower(), (j.hw or "").lower()) if j is not job \
                    else stage["backend"]
                gpu = backend != "cpu" and BUILTIN_BACKENDS.get(backend, {"gpu": True})["gpu"]
                jobs.append((name, gpu, j))
    if not jobs:
        return
    gated = [j for j in jobs if j[2].pr_labels_required]
    common = set.intersection(*(j[2].pr_labels_required for j in jobs))
    gpu_common = set.intersection(*(j[2].pr_labels_required for j in jobs if j[1])) \
        if any(j[1] for j in jobs) else set()
    label = None
    if common:
        label, scope = sorted(common)[0], "all"
    elif gpu_common and not any(j[2].pr_labels_required for j in jobs if not j[1]):
        label, scope = sorted(gpu_common)[0], "gpu"
    if label is not None:
        policy["required_label"] = label
        if scope == "all":
            policy["required_label_scope"] = "all"
        notes.append(f"every {'stage' if scope == 'all' else 'GPU stage'} job of the existing CI "
                     f"waits on a pull request for the label {label!r} (a job it needs fails "
                     f"without it): policy.required_label = {label!r}")
    else:
        for name in sorted({j[0] for j in gated}):
            mine = [j for j in jobs if j[0] == name]
            labels = set.intersection(*(j[2].pr_labels_required for j in mine))
            if labels:
                stages[name]["requires_labels"] = sorted(labels)
                notes.append(f"stage {name}: its job waits on a pull request for the label(s) "
                             f"{', '.join(sorted(labels))}: requires_labels")
    if all(j[2].draft_fails for j in jobs):
        policy["drafts"] = "skip"
    elif all(j[2].draft_fails for j in jobs if j[1]) and any(j[1] for j in jobs) \
            and not any(j[2].draft_fails for j in jobs if not j[1]):
        policy["drafts"] = "skip-gpu"
    elif any(j[2].draft_fails for j in jobs):
        notes.append("the existing CI fails the jobs of "
                     + ", ".join(sorted({j[0] for j in jobs if j[2].draft_fails}))
                     + " on a draft pull request but not the others; policy.drafts cannot say that "
                       "(it skips every stage or every GPU stage), so drafts run as usual")
    if "drafts" in policy:
        notes.append(f"the existing CI fails {'every' if policy['drafts'] == 'skip' else 'every GPU'} "
                     f"stage job of a draft pull request: policy.drafts = {policy['drafts']!r}")


def every_job(job: CIStage) -> list[CIStage]:
    """A stage's jobs: its own, the alternates (another image or workflow), and those of
    each other hardware with theirs."""
    return [job, *job.alternates, *(j for o in job.by_hw.values() for j in (o, *o.alternates))]


def adopted_schedules(project: ProjectCI, ci: CIRead, notes: list[str],
               exact: bool = False) -> dict[str, str]:
    """Crons of the workflows that run tests, each mapped to the cadence the project's
    schedule table gives it (else: a single day-of-week is weekly, otherwise nightly).
    With a runner that keeps nightly registrations apart, a cron of a workflow whose
    stage jobs never pass its nightly switch runs the per-commit suites: ``regular``."""
    crons = sorted(ci.crons)
    if not crons:
        if ci.test_workflows:
            notes.append("the workflows that run tests have no schedule; none adopted")
            return {}
        return dict(DEFAULT_SCHEDULES)
    out: dict[str, str] = {}
    for cron in crons:
        cadence = project.schedules.get(cron)
        jobs = [j for st in ci.stages.values() for j in every_job(st) if cron in j.crons]
        if cadence not in _CADENCES and exact and jobs and not any(st.nightly_run for st in jobs):
            cadence = "regular"
        if cadence not in _CADENCES:
            dow = cron.split()[4]
            cadence = "weekly" if re.fullmatch(r"\d", dow) else "nightly"
        out[cron] = cadence
    source = f" (cadences from {project.schedules_source})" if project.schedules_source else ""
    notes.append("schedules from the workflows that run tests: "
                 + ", ".join(f"{c!r} -> {v}" for c, v in out.items()) + source)
    return out
