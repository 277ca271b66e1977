"""The job status file: what one job that executed part of a plan says it did.

Bazel's test runner touches a shard-status file so that the build can tell a shard that
ran its part from one that silently ran nothing; this is that file for testfleet. Every
path that executes part of a plan (``testfleet run``, the pytest plugin) writes one when
it ends, whatever the ending (success, failure, timeout, signal), and ``testfleet run``
writes a placeholder saying "started, not finished" before it runs anything, so a runner
killed outright leaves a status that says so instead of none.

One canonical JSON form (``testfleet.job-status/1``, ``testfleet schema job-status``). The
dataclasses are what flows; the document's type (:mod:`testfleet.documents.job_status`)
guards the file boundary: a status file
is an artifact a CI job uploaded, written next to a pull request's code, so it is read
strictly, every problem named with its path.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, get_args

from pydantic import TypeAdapter, ValidationError

from testfleet.canonical import canonical_bytes
from testfleet.documents.vocabulary import Outcome
from testfleet.errors import UsageError

if TYPE_CHECKING:
    from testfleet.documents.job_status import FileStatusDoc, JobStatusDoc, RescueRefDoc, Runner

SCHEMA: Final = "testfleet.job-status/1"
#: what a file's outcome may be (the history's vocabulary; NOT_RUN: reported, not executed)
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
#: a status file larger than this is not one testfleet wrote (10,000 files are ~1.5 MiB)
MAX_STATUS_BYTES = 64 << 20
#: ``exit_status`` of the placeholder written before a job runs anything
NOT_FINISHED = -1
#: the most attempts any run makes of one file (``--max-attempts`` and every config's
#: ``max_attempts`` are at most 10); reconcile holds each reported file to it
MAX_ATTEMPTS = 10
#: digits of the longest integer a status holds (a time in ms, 2**63): a longer one is no
#: status testfleet wrote, refused before Python converts it (quadratic in its length, and
#: refused or not depending on the interpreter's int-string limit)
MAX_INT_DIGITS = 20
RUNNERS = ("testfleet run", "pytest")


@dataclass(frozen=True)
class FileStatus:
    """One planned file as the job saw it."""

    file: str
    stage: str  # the lane: ``<stage>`` or ``<stage>.<variant>``
    outcome: Outcome
    attempts: int
    quarantined: bool = False

    @property
    def executed(self) -> bool:
        return self.outcome != "NOT_RUN"

    def to_json(self) -> FileStatusDoc:
        return {"file": self.file, "stage": self.stage, "outcome": self.outcome,
                "attempts": self.attempts, "quarantined": self.quarantined}


@dataclass(frozen=True)
class RescueRef:
    """What makes a status a rescue job's (#40): the rescue file's digest it ran from and
    the planned job whose files it ran."""

    digest: str
    origin: str


@dataclass(frozen=True)
class JobStatus:
    """One job's account of its part of a plan."""

    plan_digest: str
    job_id: str
    stage: str
    variant: str
    shard: int  # 0: every shard of the stage in one run (``run --stage S`` without --shard)
    shards: int
    run_id: str
    ci_run_id: str | None
    empty: bool
    complete: bool
    exit_status: int
    files: tuple[FileStatus, ...] = ()
    #: the planned job ids this status accounts for (one; every shard's for shard 0; none
    #: for an empty shard, which has no job in the plan)
    jobs: tuple[str, ...] = ()
    runner: Runner = "testfleet run"
    ci_attempt: int | None = None
    #: why the job is incomplete, empty or refused ("" when it simply finished)
    reason: str = ""
    plan_file: str | None = None
    started_at: float = 0.0
    finished_at: float | None = None
    testfleet_version: str = ""
    #: a rescue job's status: the rescue wave and the planned job it stands in for
    rescue: RescueRef | None = None
    #: where it was read from (not part of the file)
    source: str = field(default="", compare=False)

    @property
    def lane(self) -> str:
        return f"{self.stage}.{self.variant}" if self.variant else self.stage

    def to_json(self) -> JobStatusDoc:
        doc: JobStatusDoc = {
            "schema": SCHEMA, "plan_digest": self.plan_digest, "plan_file": self.plan_file,
            "job_id": self.job_id, "jobs": list(self.jobs), "stage": self.stage,
            "variant": self.variant, "shard": self.shard, "shards": self.shards,
            "run_id": self.run_id, "ci_run_id": self.ci_run_id, "ci_attempt": self.ci_attempt,
            "runner": self.runner, "empty": self.empty, "complete": self.complete,
            "exit_status": self.exit_status, "reason": self.reason,
            "started_at": round(self.started_at, 3),
            "finished_at": None if self.finished_at is None else round(self.finished_at, 3),
            "testfleet_version": self.testfleet_version,
            "files": [f.to_json() for f in self.files],
        }
        if self.rescue is not None:
            doc["rescue"] = {"digest": self.rescue.digest, "origin": self.rescue.origin}
        return doc


def status_bytes(status: JobStatus) -> bytes:
    """The one on-disk form: canonical JSON plus a newline."""
    return canonical_bytes(status.to_json()) + b"\n"


def write_status(path: Path, status: JobStatus) -> None:
    """Write atomically (a reader sees the old status or the new one, never half); creates
    the directory. Raises ``OSError``."""
    from testfleet.fileio import output_mode, replace_atomically

    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(path, status_bytes(status), mode=output_mode(path))


def latest_attempts(statuses: Sequence[JobStatus]) -> tuple[list[JobStatus], list[JobStatus]]:
    """(the statuses that count, the ones a later CI attempt of the same job superseded)."""
    by_job: dict[str, list[JobStatus]] = defaultdict(list)
    for s in statuses:
        by_job[s.job_id].append(s)
    kept: list[JobStatus] = []
    dropped: list[JobStatus] = []
    for group in by_job.values():
        attempts = [s.ci_attempt for s in group]
        if len(group) > 1 and None not in attempts and len(set(attempts)) > 1:
            last = max(a for a in attempts if a is not None)
            kept += [s for s in group if s.ci_attempt == last]
            dropped += [s for s in group if s.ci_attempt != last]
        else:
            kept += group
    return kept, dropped


# -- the file boundary ---------------------------------------------------------------------


@cache
def _reader() -> TypeAdapter[JobStatusDoc]:
    """The status file's own type, strict (built on first use: a run that writes a status
    never pays for it)."""
    from testfleet.documents.job_status import JobStatusDoc

    return TypeAdapter(JobStatusDoc)


def validated(data: Any, source: str, what: str, schema: str,
              reader: TypeAdapter[Any], root: str) -> Any:
    """``data`` as the document ``reader`` reads: :class:`UsageError` naming ``source`` and
    every problem with its path otherwise (a status file, a rescue file)."""
    article = "an" if what[0] in "aeiou" else "a"
    if not isinstance(data, dict):
        raise UsageError(f"{source}: {article} {what} must be a JSON object, got "
                         f"{type(data).__name__}")
    if data.get("schema") != schema:
        raise UsageError(f"{source}: not {article} {what} (schema {str(data.get('schema'))[:60]!r}, "
                         f"this testfleet reads {schema!r})")
    try:
        return reader.validate_python(data)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or root}: {e['msg']}"
                    for e in exc.errors(include_url=False)]
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more"
                                             if len(problems) > 10 else "")
        raise UsageError(f"{source}: invalid {what}: {shown}") from None


def parse_status(data: Any, source: str) -> JobStatus:
    """A decoded status document as a :class:`JobStatus`; :class:`UsageError` naming every
    problem with its path otherwise."""
    doc = validated(data, source, "job status", SCHEMA, _reader(), "status")
    return JobStatus(
        plan_digest=doc["plan_digest"], job_id=doc["job_id"], stage=doc["stage"],
        variant=doc["variant"], shard=doc["shard"], shards=doc["shards"], run_id=doc["run_id"],
        ci_run_id=doc["ci_run_id"], empty=doc["empty"], complete=doc["complete"],
        exit_status=doc["exit_status"],
        files=tuple(FileStatus(f["file"], f["stage"], f["outcome"], f["attempts"],
                               f["quarantined"]) for f in doc["files"]),
        jobs=tuple(doc.get("jobs", [])), runner=doc.get("runner", "testfleet run"),
        ci_attempt=doc.get("ci_attempt"), reason=doc.get("reason", ""),
        plan_file=doc.get("plan_file"), started_at=doc.get("started_at", 0.0),
        finished_at=doc.get("finished_at"), testfleet_version=doc.get("testfleet_version", ""),
        rescue=_rescue_ref(doc.get("rescue")), source=source)


def _rescue_ref(doc: RescueRefDoc | None) -> RescueRef | None:
    return None if doc is None else RescueRef(doc["digest"], doc["origin"])


class _TooLong(ValueError):
    """An integer too long for any status field, found while decoding."""


def decode_status(raw: bytes, source: str) -> Any:
    """The JSON document in ``raw`` (no NaN, no lone surrogates), or :class:`UsageError`."""
    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    def bounded_int(text: str) -> int:
        if len(text.lstrip("-")) > MAX_INT_DIGITS:
            raise _TooLong(f"{source}: invalid job status: an integer of "
                           f"{len(text.lstrip('-'))} digits (a status holds none longer than "
                           f"{MAX_INT_DIGITS})")
        return int(text)

    try:
        return json.loads(raw.decode("utf-8"), parse_constant=no_constant,
                          parse_int=bounded_int)
    except _TooLong as exc:
        raise UsageError(str(exc)) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{source}: not valid JSON ({exc})") from None
    except RecursionError:
        raise UsageError(f"{source}: JSON nested too deeply") from None
