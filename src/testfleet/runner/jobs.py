"""From a plan (file or in-process) to the one :class:`JobSpec` this runner executes.

A plan whose schema, digest or job id does not match is an error (exit 2), never an
empty green run; a stage or shard that does not exist in the plan is one too.
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testfleet.config import Project
from testfleet.errors import UsageError
from testfleet.reconcile.status import RescueRef
from testfleet.runner.model import JobSpec, RunItem, RunOptions
from testfleet.runner.settings import stage_settings

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Selected:
    """The plan jobs to run as one (several shards of a stage when no --shard was given)."""

    job_id: str
    stage: str
    backend: str
    command: str
    env: dict[str, str]
    items: tuple[RunItem, ...]
    policy: dict[str, Any]
    # Stage variants (#12): the variant whose runners, timeouts and history apply ("" none)
    variant: str = ""
    #: the plan job's retries (#11; None: the config's), which `run --plan` honours
    max_attempts: int | None = None
    retry_wait: float | None = None
    # Exactly once (#26): which shard of how many (0 of N: every shard of the stage), the
    # plan's job ids this run covers, and the digest of the plan it came from.
    shard: int = 1
    shards: int = 1
    jobs: tuple[str, ...] = ()
    plan_digest: str = ""
    #: a rescue job (#40): the rescue wave and the planned job it stands in for
    rescue: RescueRef | None = None

    @property
    def empty(self) -> bool:
        """A shard the plan gave no file (``shards = N`` with fewer than N files)."""
        return not self.items

    @property
    def lane(self) -> str:
        return f"{self.stage}.{self.variant}" if self.variant else self.stage


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` with ``1 <= I <= N``."""
    m = _SHARD.match(text)
    if not m:
        raise UsageError(f"--shard {text!r}: expected I/N, e.g. 2/4")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= i <= n:
        raise UsageError(f"--shard {text!r}: need 1 <= I <= N")
    return i, n


def _items(job: Any) -> list[RunItem]:
    return [RunItem(t.file, float(t.estimate), t.source, t.command or job.command,
                    getattr(t, "quarantined", ""))
            for t in job.tests]


def require_digest(plan: Any, expected: str | None, what: str) -> None:
    """Refuse a plan that is not the one this run must execute: ``expected`` (from
    ``--plan-digest`` or ``$TESTFLEET_PLAN_DIGEST``) names it; empty or None checks nothing."""
    if not expected or plan.digest == expected:
        return
    pinned = (plan.inputs or {}).get("history")
    history = f"; it was made from history {pinned[:19]}…" if pinned else ""
    raise UsageError(f"{what} has digest {plan.digest}, not {expected} (--plan-digest or "
                     f"$TESTFLEET_PLAN_DIGEST){history}. It is not the plan of this run: "
                     "running it could run files another shard runs too, or none; nothing was run")


def _selected(plan: Any, job: Any) -> Selected:
    return Selected(job.id, job.stage, job.backend, job.command, dict(job.env),
                    tuple(_items(job)), dict(plan.policy), getattr(job, "variant", ""),
                    job.ci.max_attempts, job.ci.retry_wait, job.shard, job.shards, (job.id,),
                    plan.digest)


def select_rescue_job(plan: Any, rescue: Any, job_id: str) -> Selected:
    """A rescue job (#40) of a rescue wave already checked against ``plan``
    (:func:`testfleet.reconcile.rescue.require_rescue`): its origin job's settings and
    runner class, only the files the rescue names, its own id, and no planned job of its
    own (its status says which job it stands in for)."""
    job = rescue.job(job_id)  # raises UsageError naming the rescue's jobs
    origin = plan.job(job.origin)
    wanted = set(job.files)
    sel = _selected(plan, origin)
    items = tuple(i for i in sel.items if i.file in wanted)
    return dataclasses.replace(sel, job_id=job.id, items=items, jobs=(),
                               rescue=RescueRef(rescue.digest, origin.id))


def select_plan_job(plan: Any, job_id: str) -> Selected:
    """Exactly the job named ``job_id`` of a loaded plan."""
    job = plan.job(job_id)  # raises UsageError naming the plan's jobs
    if not job.tests:
        raise UsageError(f"plan job {job_id!r} has no files; refusing an empty run")
    return _selected(plan, job)


def _lane(job: Any) -> str:
    variant = getattr(job, "variant", "")
    return f"{job.stage}.{variant}" if variant else str(job.stage)


def select_stage_jobs(plan: Any, stage: str, shard: tuple[int, int] | None) -> Selected:
    """One stage (or one variant of it, ``<stage>.<variant>``) of an in-process plan: one
    shard of it, or all its shards in order."""
    jobs = [j for j in plan.jobs if _lane(j) == stage] or [j for j in plan.jobs if j.stage == stage]
    lanes = sorted({_lane(j) for j in jobs})
    if len(lanes) > 1:
        raise UsageError(f"stage {stage!r} runs as {len(lanes)} variants ({', '.join(lanes)}); "
                         "name one with --stage")
    if not jobs:
        summary = next((s for s in plan.stages
                        if getattr(s, "lane", s.name) == stage or s.name == stage), None)
        why = f"{summary.status}" + (f": {summary.reason}" if summary.reason else "") if summary else "not planned"
        raise UsageError(f"nothing to run for stage {stage!r} under this trigger ({why})")
    jobs.sort(key=lambda j: j.shard)
    first = jobs[0]
    if shard is not None:
        i, n = shard
        if first.shards != n:
            raise UsageError(f"stage {stage!r} is planned as {first.shards} shard(s), not {n}; "
                             f"use --shard I/{first.shards}")
        chosen = [j for j in jobs if j.shard == i]
        if chosen:
            return _selected(plan, chosen[0])
        # ``shards = N`` with fewer than N files: this shard has no file, and says so
        return dataclasses.replace(_selected(plan, first), job_id=f"{_lane(first)}-{i}-of-{n}",
                                   items=(), shard=i, jobs=())
    items = [it for j in jobs for it in _items(j)]
    if len(jobs) == 1:
        return _selected(plan, first)
    return dataclasses.replace(_selected(plan, first), job_id=f"{_lane(first)}-all-{len(jobs)}",
                               items=tuple(items), shard=0, jobs=tuple(j.id for j in jobs))


def empty_shard_message(sel: Selected, plan: Any) -> str:
    """Why a shard runs nothing, in words (the plan had fewer files than shards)."""
    files = sum(len(j.tests) for j in plan.jobs if _lane(j) == sel.lane and not j.probe)
    return (f"shard {sel.shard}/{sel.shards} of stage {sel.lane} is empty: the plan "
            f"{plan.digest[:19]}… puts the stage's {files} file(s) on shards 1-"
            f"{min(files, sel.shards)} (shards = {sel.shards} needs {sel.shards} files to give "
            "every shard one); nothing to run, exit 0")


def select_file_jobs(plan: Any, stage: str | None) -> Selected:
    """An explicit ``--file`` request: the jobs it produced, which must be one lane."""
    stages = sorted({_lane(j) for j in plan.jobs})
    if stage is None:
        if len(stages) > 1:
            raise UsageError("the requested file(s) run in several stages "
                             f"({', '.join(stages)}); choose one with --stage")
        stage = stages[0]
    return select_stage_jobs(plan, stage, None)


def ci_run_id(environ: Mapping[str, str] | None = None) -> str | None:
    """The CI run (GitHub run id, Buildkite build number) records and frozen plans belong to;
    None outside CI."""
    env = os.environ if environ is None else environ
    return env.get("GITHUB_RUN_ID") or env.get("BUILDKITE_BUILD_NUMBER") or None


def ci_attempt(environ: Mapping[str, str] | None = None) -> int | None:
    """Which attempt of the CI job this is (GitHub's run attempt, Buildkite's retry count
    plus one); None outside CI or when the engine does not say."""
    env = os.environ if environ is None else environ
    for name, offset in (("GITHUB_RUN_ATTEMPT", 0), ("BUILDKITE_RETRY_COUNT", 1)):
        raw = env.get(name, "").strip()
        if raw.isdigit() and len(raw) < 10:
            return int(raw) + offset
    return None


def make_run_id(job_id: str, environ: Mapping[str, str] | None = None) -> str:
    """``<GITHUB_RUN_ID>.<attempt>-<job>`` under CI, else a timestamped local id."""
    env = os.environ if environ is None else environ
    ci = env.get("GITHUB_RUN_ID")
    base = (f"{ci}.{env.get('GITHUB_RUN_ATTEMPT', '1')}" if ci
            else time.strftime("local-%Y%m%dT%H%M%S") + "-" + secrets.token_hex(2))
    raw = f"{base}-{job_id}"
    return re.sub(r"[^A-Za-z0-9._-]", "_", raw)[:200]


def build_spec(project: Project, sel: Selected, options: RunOptions, *,
               records: Path | None = None, run_id: str | None = None) -> JobSpec:
    settings = stage_settings(project.config, sel.stage, backend=sel.backend,
                              command=None if sel.command == "auto" else sel.command,
                              env=sel.env, variant=sel.variant)
    if sel.retry_wait is not None:  # as planned (run --plan)
        settings = dataclasses.replace(settings, retry_wait=sel.retry_wait)
    rid = run_id or make_run_id(sel.job_id)
    records_dir = records if records is not None else (
        project.root / project.config.cache_dir / "runs" / rid)
    return JobSpec(sel.job_id, settings, sel.items, project.root, records_dir, options, rid)

