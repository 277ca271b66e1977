"""Compare a plan with the job statuses of its run. Pure: a plan and statuses in, a
:class:`Reconciliation` out.

The rules, each a way a planned test can fall out silently:

- every planned job reported (a job whose runner died, was never scheduled, or was
  skipped by the CI engine leaves no status: *missing job*);
- every planned (stage, file) executed exactly once: never reported (*missing*), reported
  but never executed (*not run*: fast-fail, interruption, not collected), executed by
  more than one job or twice by one (*duplicated*), executed by another job than the one
  the plan gave it (*moved*: the job ran from another split);
- nothing executed that the plan does not hold (*unplanned*);
- every status from this plan (*other plan*: its ``plan_digest`` differs), finished
  (*incomplete*: interrupted, killed, refused, or only part of its tests selected), and
  about a job of the plan or an empty shard the plan has (*unmatched*);
- every status possible for the plan job it names (*impossible*): its stage, variant,
  shard and shard count, job ids, its files' lanes and quarantine, per-file attempts
  and the placeholder/final state. A status file is an artifact written next to a pull
  request's code: one edited to another stage, to shard 2 of 2 of a one-shard job, or to
  ``attempts: 0`` with ``PASSED`` would otherwise count as its job having run.

An empty shard (``shards = N`` with fewer than N files) has no job in the plan; its status
is accepted when the plan indeed leaves that shard of that stage without files. A CI
retry of a job (a higher ``ci_attempt`` of the same job id) supersedes the earlier
attempt; two statuses of one job in one attempt are two executions. Tests that failed are
not this module's business: the jobs' own exit statuses fail the run for them.

A queue lane (#40) is accounted from the queue database instead of its statuses: its jobs
are runners that pull files (a capacity), so a job that never reported, or a runner killed
mid-file, is not a problem by itself; every planned file of the lane must have exactly
one final report in the queue (:class:`QueueReport`), and a queue lane the caller could
not read counts its files as missing.

A rescue wave (#40, :mod:`testfleet.reconcile.rescue`) is reconciled with its rescue file:
a rescue job's status counts for the files of its rescue job only; a planned job that never
reported (or was interrupted) is accepted when its rescue job reported for it, and its
files are *rescued* (listed, accepted). A file its original shard reported after all (late)
keeps that report as its one final report; the rescue's run of it is *late* (listed, never
counted twice). With a rescue, the stage jobs' own exit statuses no longer decide the run
(a lost runner fails its job too), so every final report is judged here: a failure that is
not quarantined is *failed*. Without the rescue file a rescue job's status matches nothing.

Zero is never green by accident: a plan with jobs reconciles only when they reported and
executed their files; a plan with no jobs reconciles when nothing executed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from testfleet.reconcile.rescue import BLOCKING, SUFFIX, Rescue, RescueJob
from testfleet.reconcile.status import MAX_ATTEMPTS, NOT_FINISHED, JobStatus, latest_attempts

if TYPE_CHECKING:
    from testfleet.documents.reconcile import FileProblemDoc, JobProblemDoc
    from testfleet.documents.vocabulary import Outcome


@dataclass(frozen=True)
class FileProblem:
    """A planned or executed (stage, file) that is not accounted exactly once."""

    stage: str  # the lane
    file: str
    planned_job: str | None  # None: the plan does not hold it
    jobs: tuple[str, ...] = ()  # the jobs that executed (or reported) it

    def to_json(self) -> FileProblemDoc:
        return {"stage": self.stage, "file": self.file, "planned_job": self.planned_job,
                "jobs": list(self.jobs)}


@dataclass(frozen=True)
class QueueReport:
    """A queue lane's file as the queue database holds it: its final reports' runners (one,
    always, unless something is wrong) and the outcome of the report; ``outcome`` None:
    the file is still pending or claimed."""

    file: str
    outcome: Outcome | None
    runners: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobProblem:
    """A planned job that did not report, or a status that cannot count as its job's."""

    job_id: str
    stage: str
    detail: str
    source: str = ""  # the status file it comes from ("" for a missing job)

    def to_json(self) -> JobProblemDoc:
        return {"job_id": self.job_id, "stage": self.stage, "detail": self.detail,
                "source": self.source}


@dataclass
class Reconciliation:
    """What the comparison found; ``ok`` only when every list of problems is empty."""

    plan_digest: str
    planned_jobs: int
    planned_files: int
    statuses: int
    executed: int  # (stage, file) pairs executed at least once
    outcomes: dict[Outcome, int] = field(default_factory=dict)
    missing_jobs: list[JobProblem] = field(default_factory=list)
    missing: list[FileProblem] = field(default_factory=list)
    not_run: list[FileProblem] = field(default_factory=list)
    duplicated: list[FileProblem] = field(default_factory=list)
    moved: list[FileProblem] = field(default_factory=list)
    unplanned: list[FileProblem] = field(default_factory=list)
    other_plan: list[JobProblem] = field(default_factory=list)
    incomplete: list[JobProblem] = field(default_factory=list)
    unplanned_jobs: list[JobProblem] = field(default_factory=list)
    impossible: list[JobProblem] = field(default_factory=list)
    failed: list[FileProblem] = field(default_factory=list)  # judged with a rescue only
    empty_shards: list[JobProblem] = field(default_factory=list)  # accepted, shown
    superseded: list[JobProblem] = field(default_factory=list)  # accepted, shown
    rescued_jobs: list[JobProblem] = field(default_factory=list)  # accepted, shown
    rescued: list[FileProblem] = field(default_factory=list)  # accepted, shown
    late: list[FileProblem] = field(default_factory=list)  # accepted, shown
    rescue_digest: str | None = None  # the rescue wave reconciled with, if any

    PROBLEMS = ("missing_jobs", "missing", "not_run", "duplicated", "moved", "unplanned",
                "other_plan", "incomplete", "unplanned_jobs", "impossible", "failed")

    @property
    def ok(self) -> bool:
        return not any(getattr(self, name) for name in self.PROBLEMS)


def _empty_shard_ok(status: JobStatus, shards_of: dict[str, int],
                    taken: dict[str, set[int]]) -> bool:
    """An empty status stands for a shard the plan left without files."""
    n = shards_of.get(status.lane)
    return (status.empty and not status.files and n is not None and status.shards == n
            and 1 <= status.shard <= n and status.shard not in taken[status.lane])


def _state_contradictions(s: JobStatus) -> list[str]:
    """What no status testfleet writes says about itself: a placeholder (exit status -1,
    written before the first file starts) is never complete, a complete status has no
    ``NOT_RUN`` file, and an executed file took at least one attempt and at
    most the most any run allows (a pass on a retry, ``FLAKY``, took two)."""
    out = []
    if s.complete and s.exit_status == NOT_FINISHED:
        out.append(f"complete, with the placeholder's exit status {NOT_FINISHED} (never "
                   "finished)")
    if s.finished_at is not None and s.finished_at < s.started_at:
        out.append("finished before it started")
    for f in s.files:
        if f.stage != s.lane:
            out.append(f"{f.file}: reported for lane {f.stage!r}, the status is of {s.lane!r}")
        if f.executed and f.attempts < 1:
            out.append(f"{f.file}: {f.outcome} after {f.attempts} attempt(s)")
        elif f.outcome == "FLAKY" and f.attempts < 2:
            out.append(f"{f.file}: FLAKY (passed on a retry) after {f.attempts} attempt(s)")
        if f.attempts > MAX_ATTEMPTS:
            out.append(f"{f.file}: {f.attempts} attempts; no run makes more than {MAX_ATTEMPTS}")
        elif s.runner == "pytest" and f.attempts > 1:
            out.append(f"{f.file}: {f.attempts} attempts under pytest, which makes one")
        if s.complete and not f.executed:
            out.append(f"{f.file}: NOT_RUN in a status that says it is complete")
    return out


def _job_contradictions(s: JobStatus, named: list[Any], lane_jobs: dict[str, list[Any]]
                        ) -> list[str]:
    """Where a status of this plan disagrees with the plan jobs it names (``named``, in
    the plan, probes included): one job's status carries that job's id, stage, variant,
    shard and count; a whole stage's (shard 0) names every shard of one lane."""
    if not named:
        return []
    out = []
    if len(named) == 1:
        job = named[0]
        if s.job_id != job.id:
            out.append(f"job id {s.job_id!r}, but it accounts for job {job.id!r}")
        want_shard, want_shards = job.shard, job.shards
    else:
        lanes = sorted({j.lane for j in named})
        if len(lanes) > 1:
            return [f"accounts for jobs of {len(lanes)} lanes ({', '.join(lanes)}); one status "
                    "is of one stage"]
        job = named[0]
        every = lane_jobs.get(job.lane, [])
        if sorted(j.id for j in named) != sorted(j.id for j in every):
            out.append(f"accounts for {len(named)} of the {len(every)} shard(s) of {job.lane}; "
                       "a whole-stage status accounts for all of them")
        want = f"{job.lane}-all-{len(named)}"
        if s.job_id != want:
            out.append(f"job id {s.job_id!r}; a whole-stage status of {job.lane} is {want!r}")
        want_shard, want_shards = 0, job.shards
    if (s.stage, s.variant) != (job.stage, job.variant):
        out.append(f"stage {s.lane!r}, but job {job.id} is of {job.lane!r}")
    if (s.shard, s.shards) != (want_shard, want_shards):
        out.append(f"shard {s.shard}/{s.shards}, but job {job.id} is "
                   + ("every shard" if want_shard == 0 else f"shard {want_shard}")
                   + f" of {want_shards}")
    quarantined = {(j.lane, t.file): bool(t.quarantined) for j in named for t in j.tests}
    for f in s.files:
        planned = quarantined.get((f.stage, f.file))
        if planned is not None and planned != f.quarantined:
            out.append(f"{f.file}: reported {'' if f.quarantined else 'not '}quarantined, the "
                       f"plan {'quarantines' if planned else 'does not quarantine'} it")
    return out


def _rescue_contradictions(s: JobStatus, job: RescueJob | None, plan: Any) -> list[str]:
    """Where a rescue job's status disagrees with its rescue job: its origin, lane, files
    (only the rescue job's) and their planned quarantine."""
    if job is None or s.rescue is None:
        return []
    out = []
    if s.rescue.origin != job.origin:
        out.append(f"stands in for {s.rescue.origin!r}, but rescue job {job.id} is "
                   f"{job.origin!r}'s")
    if s.lane != job.lane:
        out.append(f"stage {s.lane!r}, but rescue job {job.id} is of {job.lane!r}")
    mine = set(job.files)
    quarantined = {t.file: bool(t.quarantined) for j in plan.jobs if j.id == job.origin
                   for t in j.tests}
    for f in s.files:
        if f.file not in mine:
            out.append(f"{f.file}: not a file of rescue job {job.id}")
        elif quarantined.get(f.file, f.quarantined) != f.quarantined:
            out.append(f"{f.file}: reported {'' if f.quarantined else 'not '}quarantined, "
                       "unlike the plan")
    return out


def _judge(out: Reconciliation, finals: dict[tuple[str, str], tuple[str, Outcome, bool]],
           planned_job_of: dict[tuple[str, str], str]) -> None:
    """With a rescue: every final report that fails (not quarantined) fails the run."""
    for key, (job_id, outcome, quarantined) in sorted(finals.items()):
        if outcome in BLOCKING and not quarantined:
            out.failed.append(FileProblem(*key, planned_job_of.get(key), (job_id,)))


def reconcile(plan: Any, statuses: Sequence[JobStatus],
              queues: Mapping[str, Sequence[QueueReport]] | None = None,
              rescue: Rescue | None = None) -> Reconciliation:
    """Compare ``plan`` (a :class:`~testfleet.planning.model.Plan`) with ``statuses``, and
    its queue lanes with ``queues`` (lane -> its files' reports, read from the queue);
    with ``rescue`` (its rescue wave, checked against the plan), the rescue jobs' statuses
    too (see the module docstring)."""
    rescue_statuses = [s for s in statuses if s.rescue is not None]
    statuses_all = statuses
    statuses = [s for s in statuses if s.rescue is None]
    queue_lanes = {job.lane for job in plan.jobs if getattr(job, "queue", None) is not None}
    planned_job_of: dict[tuple[str, str], str] = {}
    jobs_by_id = {job.id: job for job in plan.jobs}
    shards_of: dict[str, int] = {}
    taken: dict[str, set[int]] = defaultdict(set)
    lane_jobs: dict[str, list[Any]] = defaultdict(list)
    for job in plan.jobs:
        for test in job.tests:
            planned_job_of[(job.lane, test.file)] = job.id
        if not job.probe:
            shards_of[job.lane] = job.shards
            taken[job.lane].add(job.shard)
            lane_jobs[job.lane].append(job)
    out = Reconciliation(plan.digest, len(plan.jobs), len(planned_job_of), len(statuses_all), 0,
                         rescue_digest=None if rescue is None else rescue.digest)
    rescue_jobs = {} if rescue is None else {j.id: j for j in rescue.jobs}
    for s in statuses_all:  # superseded ones too: a forged status is one whatever its attempt
        named = [jobs_by_id[j] for j in dict.fromkeys(s.jobs or (s.job_id,)) if j in jobs_by_id]
        found = _state_contradictions(s)
        if s.rescue is not None:
            found += _rescue_contradictions(s, rescue_jobs.get(s.job_id), plan)
        elif s.plan_digest == plan.digest:  # another plan's fields describe that plan's jobs
            found += _job_contradictions(s, named, lane_jobs)
        if found:
            out.impossible.append(JobProblem(s.job_id, s.lane, "; ".join(found[:10]) + (
                f"; and {len(found) - 10} more" if len(found) > 10 else ""), s.source))
    kept, dropped = latest_attempts(statuses)
    kept_rescue, dropped_rescue = latest_attempts(rescue_statuses)
    out.superseded = [JobProblem(s.job_id, s.lane, f"superseded by CI attempt of the same job "
                                                   f"(this one: attempt {s.ci_attempt})", s.source)
                      for s in (*dropped, *dropped_rescue)]
    reported_jobs: set[str] = set()
    executed: dict[tuple[str, str], list[str]] = defaultdict(list)
    reported: dict[tuple[str, str], list[str]] = defaultdict(list)
    outcomes: Counter[Outcome] = Counter()
    finals: dict[tuple[str, str], tuple[str, Outcome, bool]] = {}
    incomplete: list[tuple[JobStatus, set[str]]] = []
    for s in kept:
        if s.plan_digest != plan.digest:
            out.other_plan.append(JobProblem(
                s.job_id, s.lane, f"ran from plan {s.plan_digest or '(none)'}, not this one",
                s.source))
        covered = set(s.jobs) or ({s.job_id} if s.job_id in jobs_by_id else set())
        if not s.complete and s.lane not in queue_lanes:  # a queue runner's work is in the queue
            incomplete.append((s, covered))
        if s.empty:
            if not covered and _empty_shard_ok(s, shards_of, taken):
                out.empty_shards.append(JobProblem(
                    s.job_id, s.lane, f"shard {s.shard}/{s.shards}: no file planned", s.source))
            else:
                out.unplanned_jobs.append(JobProblem(
                    s.job_id, s.lane, f"reports shard {s.shard}/{s.shards} empty, but the plan "
                                      "has no such empty shard", s.source))
            if not covered:
                continue
        unknown = sorted(j for j in covered if j not in jobs_by_id)
        if unknown or not covered:
            out.unplanned_jobs.append(JobProblem(
                s.job_id, s.lane, "not a job of this plan" + (
                    f" ({', '.join(unknown)})" if unknown and unknown != [s.job_id] else ""),
                s.source))
        reported_jobs |= covered
        for f in () if s.lane in queue_lanes else s.files:
            key = (f.stage, f.file)
            reported[key].append(s.job_id)
            if f.executed:
                executed[key].append(s.job_id)
                outcomes[f.outcome] += 1
                finals.setdefault(key, (s.job_id, f.outcome, f.quarantined))
            planned = planned_job_of.get(key)
            if planned is not None and planned not in covered:
                out.moved.append(FileProblem(f.stage, f.file, planned, (s.job_id,)))
    for lane in sorted(queue_lanes):
        for report in (queues or {}).get(lane, ()):
            key = (lane, report.file)
            if report.outcome is None:  # still pending or claimed: missing
                continue
            reported[key].extend(report.runners or ("(queue)",))
            if report.outcome != "NOT_RUN":
                executed[key].extend(report.runners)
                outcomes[report.outcome] += len(report.runners)
    rescued_by = _rescue_statuses(out, plan, rescue, kept_rescue, rescue_jobs, planned_job_of,
                                  executed, reported, outcomes, finals)
    for s, covered in incomplete:
        helpers = sorted(rescued_by[j] for j in covered if j in rescued_by)
        if covered and len(helpers) == len(covered):
            out.rescued_jobs.append(JobProblem(
                s.job_id, s.lane, f"did not finish ({s.reason or f'exit status {s.exit_status}'}); "
                                  f"the rest of its files rescued by {', '.join(helpers)}",
                s.source))
        else:
            out.incomplete.append(JobProblem(
                s.job_id, s.lane, f"exit status {s.exit_status}: {s.reason or 'did not finish'}",
                s.source))
    for job in plan.jobs:
        if job.lane in queue_lanes:
            continue
        if job.id not in reported_jobs and job.id in rescued_by:
            out.rescued_jobs.append(JobProblem(
                job.id, job.lane, f"never reported; its {len(job.tests)} file(s) rescued by "
                                  f"{rescued_by[job.id]}"))
        elif job.id not in reported_jobs:
            again = f"{job.id}{SUFFIX}" in rescue_jobs
            out.missing_jobs.append(JobProblem(
                job.id, job.lane, f"never reported ({len(job.tests)} planned file(s))"
                                  + (", and neither did its rescue job" if again else "")))
    for key, planned in sorted(planned_job_of.items()):
        ran = executed.get(key, [])
        if len(ran) > 1:
            out.duplicated.append(FileProblem(*key, planned, tuple(ran)))
        elif not ran and key in reported:
            out.not_run.append(FileProblem(*key, planned, tuple(reported[key])))
        elif not ran:
            out.missing.append(FileProblem(*key, planned))
    for key in sorted(set(reported) - set(planned_job_of)):
        out.unplanned.append(FileProblem(*key, None, tuple(reported[key])))
    out.executed = sum(1 for key in planned_job_of if executed.get(key))
    out.outcomes = dict(sorted(outcomes.items()))
    if rescue is not None:
        _judge(out, finals, planned_job_of)
    return out


def _rescue_statuses(out: Reconciliation, plan: Any, rescue: Rescue | None,
                     kept: list[JobStatus], rescue_jobs: dict[str, RescueJob],
                     planned_job_of: dict[tuple[str, str], str],
                     executed: dict[tuple[str, str], list[str]],
                     reported: dict[tuple[str, str], list[str]], outcomes: Counter[Outcome],
                     finals: dict[tuple[str, str], tuple[str, Outcome, bool]]) -> dict[str, str]:
    """Account the rescue jobs' statuses (after every planned job's, so a late original
    report wins); returns origin job id -> the rescue job that reported for it."""
    rescued_by: dict[str, str] = {}
    for s in kept:
        assert s.rescue is not None
        job = rescue_jobs.get(s.job_id)
        if rescue is None or job is None:
            why = ("a rescue job's status, but no rescue file was given (--rescue)"
                   if rescue is None else "not a job of this rescue wave")
            out.unplanned_jobs.append(JobProblem(s.job_id, s.lane, why, s.source))
            continue
        if s.plan_digest != plan.digest or s.rescue.digest != rescue.digest:
            out.other_plan.append(JobProblem(
                s.job_id, s.lane, f"ran from plan {s.plan_digest or '(none)'} and rescue wave "
                                  f"{s.rescue.digest}, not this one", s.source))
            continue
        if not s.complete:
            out.incomplete.append(JobProblem(
                s.job_id, s.lane, f"rescue job, exit status {s.exit_status}: "
                                  f"{s.reason or 'did not finish'}", s.source))
        else:
            rescued_by[job.origin] = s.job_id
        for f in s.files:
            key = (f.stage, f.file)
            if f.file not in job.files:
                continue  # named in impossible
            if executed.get(key) and s.job_id not in executed[key]:
                if f.executed:  # its original shard reported it after all: that one counts
                    out.late.append(FileProblem(*key, planned_job_of.get(key), (s.job_id,)))
                continue
            reported[key].append(s.job_id)
            if f.executed:
                executed[key].append(s.job_id)
                outcomes[f.outcome] += 1
                finals.setdefault(key, (s.job_id, f.outcome, f.quarantined))
                out.rescued.append(FileProblem(*key, planned_job_of.get(key), (s.job_id,)))
    return rescued_by


def rescue_covers(result: Reconciliation, rescue: Rescue) -> bool:
    """Whether every problem the first reconcile found is a planned file the rescue wave
    runs (a job that never reported, a file missing or not run, a job that did not
    finish): then the run goes on to the rescue wave, and its reconcile decides."""
    origins = {j.origin for j in rescue.jobs}
    files = rescue.files
    for name in Reconciliation.PROBLEMS:
        items = getattr(result, name)
        if name in ("missing_jobs", "incomplete"):
            if any(p.job_id not in origins for p in items):
                return False
        elif name in ("missing", "not_run"):
            if any((p.stage, p.file) not in files for p in items):
                return False
        elif items:
            return False
    return bool(rescue.jobs) or result.ok
