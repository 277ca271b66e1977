"""``testfleet run``'s job status (:mod:`testfleet.reconcile.status`) at each point of a run:
before anything runs (a placeholder that says "not finished"), for an empty shard, for a
refused job, and at the end from the job's verdict."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from testfleet import __version__
from testfleet.reconcile.status import NOT_FINISHED, FileStatus, JobStatus
from testfleet.runner.hooks import final_outcome
from testfleet.runner.jobs import Selected, ci_attempt, ci_run_id
from testfleet.runner.model import JobResult, JobSpec, Outcome


def _base(sel: Selected, run_id: str, *, plan_file: str | None, started_at: float,
          environ: Mapping[str, str] | None) -> JobStatus:
    env = os.environ if environ is None else environ
    return JobStatus(
        plan_digest=sel.plan_digest, job_id=sel.job_id, stage=sel.stage, variant=sel.variant,
        shard=sel.shard, shards=sel.shards, run_id=run_id, ci_run_id=ci_run_id(env),
        empty=sel.empty, complete=False, exit_status=NOT_FINISHED, jobs=sel.jobs,
        runner="testfleet run", ci_attempt=ci_attempt(env), plan_file=plan_file,
        started_at=started_at, testfleet_version=__version__, rescue=sel.rescue)


def placeholder(spec: JobSpec, sel: Selected, *, plan_file: str | None, started_at: float,
                environ: Mapping[str, str] | None = None) -> JobStatus:
    """Written before the first file starts: every file NOT_RUN, not complete."""
    from dataclasses import replace

    lane = spec.settings.stage
    return replace(_base(sel, spec.run_id, plan_file=plan_file, started_at=started_at,
                         environ=environ),
                   files=tuple(FileStatus(i.file, lane, "NOT_RUN", 0, bool(i.quarantined))
                               for i in spec.items),
                   reason="the job started and did not finish (killed before it could write "
                          "its final status?)")


def empty(sel: Selected, run_id: str, reason: str, *, plan_file: str | None,
          environ: Mapping[str, str] | None = None) -> JobStatus:
    """A shard the plan gave no file: complete, green, empty."""
    from dataclasses import replace

    now = time.time()
    return replace(_base(sel, run_id, plan_file=plan_file, started_at=now, environ=environ),
                   empty=True, complete=True, exit_status=0, reason=reason, finished_at=now)


def final(job: JobResult, sel: Selected, *, plan_file: str | None, exit_status: int,
          environ: Mapping[str, str] | None = None) -> JobStatus:
    """The job's account from its verdict; complete when every file got one."""
    from dataclasses import replace

    lane = job.spec.settings.stage
    files = tuple(FileStatus(r.item.file, lane, final_outcome(r), len(r.attempts),
                             bool(r.item.quarantined)) for r in job.results)
    not_run = [r for r in job.results if r.outcome is Outcome.NOT_RUN]
    if job.interrupted_by is not None:
        reason = f"interrupted by signal {job.interrupted_by}"
    elif not_run:
        reason = f"{len(not_run)} file(s) not run: {not_run[0].message}"
    else:
        reason = ""
    return replace(_base(sel, job.spec.run_id, plan_file=plan_file, started_at=job.started_at,
                         environ=environ),
                   files=files, complete=not reason, exit_status=exit_status, reason=reason[:4000],
                   finished_at=job.started_at + job.duration)
