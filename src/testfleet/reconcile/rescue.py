"""The rescue wave (#40): a planned file is never left unrun because its runner died.

Shard mode fixes each shard's files when the plan is made; a runner that is lost (a GPU
machine that dies, a job the CI engine cancelled before it started, a process killed
before it wrote its status) leaves its shard's files unreported. The first reconcile of
the run computes, from the plan and the status files, exactly those files
(:func:`rescue_wave`), and the CI engine runs them once more, each on its planned job's
runner class with that job's settings, in one *rescue job per lost shard*. A second
reconcile (:func:`testfleet.reconcile.compare.reconcile` with the rescue) then passes only
when every planned file has exactly one final report, and names the ones the rescue ran.

Grouped per lost shard, not one job per file: the shard's files were balanced to fit
one job's timeout on that runner class, a lost runner loses its whole shard at once, and a
GPU runner's start-up (container pull, setup) costs minutes: one rescue job per lost shard
pays it once, and the rescue matrix is never larger than the plan's.

What is rescued, and what never is:

- rescued: the files of a planned job that never reported (no status at all), that left
  only the placeholder written before its first file (killed outright), or that was
  interrupted by a signal (cancelled, killed) before files it had not failed on; and only
  the files no status of this plan executed;
- never: a file that was executed (whatever its outcome: a test failure is the test's,
  never retried here), the files a job did not run because one of its own files failed
  (fast-fail), a refused job (it would be refused again), a queue lane (its queue hands a
  lost runner's file to another runner), a probe job, and anything reported under another
  plan's digest.

The rescue file (``testfleet.rescue/1``) carries its own digest and the plan's, so a rescue
job runs only files the plan holds, of the job it names, from the wave reconcile computed.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pydantic import TypeAdapter

from testfleet.canonical import canonical_bytes
from testfleet.errors import UsageError
from testfleet.reconcile.status import NOT_FINISHED, JobStatus, latest_attempts, validated

if TYPE_CHECKING:
    from testfleet.documents.rescue import RescueDoc, RescueJobDoc

SCHEMA: Final = "testfleet.rescue/1"
#: a rescue job's id: its origin's id and this (a plan's job ids end in ``-of-N``)
SUFFIX: Final = "-rescue"
#: outcomes that fail a run (unless the file is quarantined)
BLOCKING: Final = frozenset({"FAILED", "TIMEOUT", "ERROR"})
#: a rescue file larger than this is not one testfleet wrote
MAX_RESCUE_BYTES = 64 << 20
#: the reason ``testfleet run`` writes for a job a signal interrupted
INTERRUPTED = "interrupted by signal"


@dataclass(frozen=True)
class RescueJob:
    """The unreported files of one planned job (``origin``), to run once more."""

    id: str
    origin: str
    stage: str
    variant: str
    why: str
    files: tuple[str, ...]

    @property
    def lane(self) -> str:
        return f"{self.stage}.{self.variant}" if self.variant else self.stage

    def to_json(self) -> RescueJobDoc:
        return {"id": self.id, "origin": self.origin, "stage": self.stage,
                "variant": self.variant, "why": self.why, "files": list(self.files)}


@dataclass(frozen=True)
class Rescue:
    """The rescue wave of one plan (no job: nothing to rescue)."""

    plan_digest: str
    jobs: tuple[RescueJob, ...] = ()

    def content(self) -> dict[str, Any]:
        """The canonical content, without the digest."""
        return {"schema": SCHEMA, "plan_digest": self.plan_digest,
                "jobs": [j.to_json() for j in self.jobs]}

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(canonical_bytes(self.content())).hexdigest()

    def to_json(self) -> RescueDoc:
        return {"schema": SCHEMA, "plan_digest": self.plan_digest, "digest": self.digest,
                "jobs": [j.to_json() for j in self.jobs]}

    def job(self, job_id: str) -> RescueJob:
        for job in self.jobs:
            if job.id == job_id:
                return job
        known = ", ".join(j.id for j in self.jobs) or "none"
        raise UsageError(f"the rescue file has no job {job_id!r}; its jobs: {known}")

    @property
    def files(self) -> dict[tuple[str, str], RescueJob]:
        """(lane, file) -> the rescue job that runs it."""
        return {(j.lane, f): j for j in self.jobs for f in j.files}


def _blocking(status: JobStatus) -> bool:
    return any(f.outcome in BLOCKING and not f.quarantined for f in status.files)


def _lost(statuses: list[JobStatus]) -> str | None:
    """Why a planned job's files are to be rescued given the statuses that cover it, or
    None when they are not (it finished, or stopped for a reason of its own)."""
    if not statuses:
        return "never reported (its runner was lost, or the job never started)"
    if any(s.complete for s in statuses):
        return None
    for s in statuses:
        if s.exit_status == NOT_FINISHED and not s.reason.startswith("refused"):
            return "killed before it wrote its final status"
        if s.reason.startswith(INTERRUPTED) and not _blocking(s):
            return s.reason
    return None


def rescue_wave(plan: Any, statuses: Sequence[JobStatus]) -> Rescue:
    """The rescue jobs for ``plan`` (a :class:`~testfleet.planning.model.Plan`) given the
    status files of its run: pure, deterministic (the plan's job order)."""
    kept, _ = latest_attempts([s for s in statuses
                               if s.plan_digest == plan.digest and s.rescue is None])
    covering: dict[str, list[JobStatus]] = defaultdict(list)
    executed: set[tuple[str, str]] = set()
    for s in kept:
        for job_id in dict.fromkeys(s.jobs or (s.job_id,)):
            covering[job_id].append(s)
        executed |= {(f.stage, f.file) for f in s.files if f.executed}
    jobs: list[RescueJob] = []
    for job in plan.jobs:
        if job.probe or getattr(job, "queue", None) is not None:
            continue
        why = _lost(covering.get(job.id, []))
        files = tuple(t.file for t in job.tests if (job.lane, t.file) not in executed)
        if why is not None and files:
            jobs.append(RescueJob(job.id + SUFFIX, job.id, job.stage, job.variant, why, files))
    return Rescue(plan.digest, tuple(jobs))


# -- matrices --------------------------------------------------------------------------------


def matrix_entry(plan: Any, rescue: Rescue, job: RescueJob) -> dict[str, Any]:
    """A rescue job as a CI matrix entry: its origin's (runner class, timeout, settings),
    with its own id, its file count, and the rescue file's digest it must run from."""
    entry = plan.job(job.origin).matrix_entry()
    entry.update({"id": job.id, "origin": job.origin, "n_tests": len(job.files),
                  "rescue": rescue.digest})
    return dict(entry)


def stage_matrices(plan: Any, rescue: Rescue,
                   groups: Mapping[str, Sequence[str]] | None = None) -> dict[str, dict[str, Any]]:
    """Per lane of the plan, the rescue jobs as the plan's ``stages`` output shapes them:
    ``{"<lane>": {"has_jobs": bool, "matrix": {"include": [...]}}}``; the lanes of a
    workflow job that runs several (``groups``: key -> lanes) under its key, as one."""
    from testfleet.planning.lanes import job_matrices

    lanes = sorted({s.lane for s in plan.stages} | {j.lane for j in plan.jobs})
    return job_matrices({lane: [matrix_entry(plan, rescue, j) for j in rescue.jobs
                                if j.lane == lane] for lane in lanes}, groups)


# -- the file boundary -----------------------------------------------------------------------


def rescue_bytes(rescue: Rescue) -> bytes:
    return canonical_bytes(rescue.to_json()) + b"\n"


def write_rescue(path: Path, rescue: Rescue) -> None:
    """Write atomically; creates the directory. Raises ``OSError``."""
    from testfleet.fileio import output_mode, replace_atomically

    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(path, rescue_bytes(rescue), mode=output_mode(path))


@cache
def _reader() -> TypeAdapter[RescueDoc]:
    from testfleet.documents.rescue import RescueDoc

    return TypeAdapter(RescueDoc)


def parse_rescue(data: Any, source: str) -> Rescue:
    """A decoded rescue document, its digest verified; :class:`UsageError` naming every
    problem otherwise."""
    doc = validated(data, source, "rescue file", SCHEMA, _reader(), "rescue")
    rescue = Rescue(doc["plan_digest"], tuple(
        RescueJob(j["id"], j["origin"], j["stage"], j["variant"], j["why"], tuple(j["files"]))
        for j in doc["jobs"]))
    if rescue.digest != doc["digest"]:
        raise UsageError(f"{source}: the rescue file's content does not match its digest "
                         f"{doc['digest'][:19]}… (edited or damaged); nothing was run from it")
    ids = [j.id for j in rescue.jobs]
    if len(set(ids)) != len(ids):
        raise UsageError(f"{source}: the rescue file names a job twice")
    return rescue


def load_rescue(path: Path) -> Rescue:
    """Read and verify a rescue file (exit 2 with what is wrong, never a traceback)."""
    from testfleet.fileio import read_regular

    try:
        raw = read_regular(path, MAX_RESCUE_BYTES)
    except FileNotFoundError:
        raise UsageError(f"rescue file {path} does not exist") from None
    except OSError as exc:
        raise UsageError(f"cannot read rescue file {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"rescue file {path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise UsageError(f"rescue file {path}: JSON nested too deeply") from None
    return parse_rescue(data, f"rescue file {path}")


def require_rescue(rescue: Rescue, plan: Any, expected: str | None, what: str) -> None:
    """Refuse a rescue wave that is not of ``plan`` (by digest), not the one expected
    (``--rescue-digest``), or that names a file its origin job was not planned with."""
    if expected and rescue.digest != expected:
        raise UsageError(f"{what} has digest {rescue.digest}, not {expected} (--rescue-digest): "
                         "it is not this run's rescue wave; nothing was run")
    if rescue.plan_digest != plan.digest:
        raise UsageError(f"{what} rescues plan {rescue.plan_digest[:19]}…, not this plan "
                         f"({plan.digest[:19]}…); nothing was run")
    planned = {j.id: j for j in plan.jobs}
    for job in rescue.jobs:
        origin = planned.get(job.origin)
        if origin is None:
            raise UsageError(f"{what}: rescue job {job.id} stands in for {job.origin!r}, which "
                             "is no job of the plan; nothing was run")
        if origin.probe or getattr(origin, "queue", None) is not None:
            raise UsageError(f"{what}: rescue job {job.id} stands in for {job.origin}, a "
                             f"{'probe' if origin.probe else 'queue lane'} job, which is never "
                             "rescued; nothing was run")
        if (job.stage, job.variant) != (origin.stage, origin.variant) or job.id != job.origin + SUFFIX:
            raise UsageError(f"{what}: rescue job {job.id} does not match its origin "
                             f"{job.origin} (id, stage or variant); nothing was run")
        stray = sorted(set(job.files) - {t.file for t in origin.tests})
        if stray:
            raise UsageError(f"{what}: rescue job {job.id} names file(s) its origin "
                             f"{job.origin} was not planned with: {', '.join(stray[:5])}; "
                             "nothing was run")
