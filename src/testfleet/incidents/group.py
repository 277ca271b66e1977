"""Failures of one CI run that share a signature are one incident; each incident is an
*infrastructure* or a *test* incident, with the reason. Pure.

Infrastructure, when either

- its signature is a start-up pattern's (``kind == "infra"``): the device, the driver,
  NCCL/RCCL, memory held before the test started, a container that did not start; or
- it is confined to one stage (one lane: a stage, or one variant of it) in the run and
  covers every file of that lane that ran (at least two), or at least
  :data:`SPREAD_MIN_FILES` files and half of those that ran, and it is not the shape of
  a test's own verdict (an assertion, ``pytest.fail``) or of broken code (``SyntaxError``,
  ``NameError``, ``TypeError``, ``AttributeError``): a broken import in shared code fails
  every stage that imports it, a broken runner class only its own.

Otherwise a test incident. A file that reported per-test results is counted by its
failing tests' signatures (one failing case of forty is that case's story, not the
file's); its file counts once per incident.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from testfleet.failures.signature import Signature, make

if TYPE_CHECKING:
    from testfleet.documents.results import IncidentBaseDoc
    from testfleet.documents.vocabulary import IncidentCategory

INFRASTRUCTURE: Final = "infrastructure"
TEST: Final = "test"
SPREAD_MIN_FILES = 3
#: Exception types that are a test's own verdict or broken code, never a runner's fault.
TEST_SHAPED = frozenset({"AssertionError", "Failed", "SyntaxError", "IndentationError",
                         "NameError", "TypeError", "AttributeError", "UnboundLocalError"})


@dataclass(frozen=True)
class Failure:
    """One failed file (``test`` empty) or one failed test of a file, in one run."""

    run: str  # the run key: see run_key()
    lane: str
    backend: str
    file: str
    signature: str  # digest
    outcome: str = "FAILED"
    test: str = ""
    ts: float = 0.0
    commit: str | None = None
    ci_run_id: str | None = None


@dataclass(frozen=True)
class LaneShare:
    """How much of one lane's run an incident took."""

    lane: str
    backend: str
    files: int  # files of the lane that failed with the incident's signature
    ran: int  # files of the lane with a verdict in the run (at least ``files``)

    @property
    def whole(self) -> bool:
        return self.files >= self.ran


@dataclass(frozen=True)
class Incident:
    run: str
    signature: Signature
    category: IncidentCategory
    why: str
    lanes: tuple[LaneShare, ...]
    failures: tuple[Failure, ...] = field(compare=False)
    ts: float = 0.0
    commit: str | None = None
    ci_run_id: str | None = None

    @property
    def id(self) -> str:
        return self.signature.digest[:8]

    @property
    def infrastructure(self) -> bool:
        return self.category == INFRASTRUCTURE

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(sorted({f.file for f in self.failures}))

    @property
    def tests(self) -> tuple[str, ...]:
        return tuple(sorted({f"{f.file}::{f.test}" for f in self.failures if f.test}))

    @property
    def whole_lanes(self) -> tuple[LaneShare, ...]:
        """Lanes this infrastructure incident took whole: the stages to make dormant."""
        return tuple(s for s in self.lanes if self.infrastructure and s.whole and s.files >= 1)

    def to_json(self) -> IncidentBaseDoc:
        return {
            "id": self.id, "run": self.run, "ci_run_id": self.ci_run_id, "commit": self.commit,
            "ts": self.ts, "category": self.category, "why": self.why,
            **self.signature.to_json(),
            "lanes": [{"stage": s.lane, "backend": s.backend, "files": s.files, "ran": s.ran}
                      for s in self.lanes],
            "files": list(self.files), "tests": list(self.tests),
        }


def run_key(ci_run_id: str | None, commit: str | None) -> str:
    """A CI run's id; without one (a local run) its commit; else ``local``."""
    if ci_run_id:
        return ci_run_id
    return f"commit:{commit}" if commit else "local"


def unknown_signature(digest: str) -> Signature:
    """A digest whose text history no longer holds (pruned), or a row without one."""
    if not digest:
        return make("exit", "no signature recorded", "no signature recorded")
    return Signature(digest, "output", f"signature {digest}", f"signature {digest[:8]}")


def group(failures: Iterable[Failure], signatures: Mapping[str, Signature],
          ran: Mapping[tuple[str, str], int]) -> list[Incident]:
    """Incidents of ``failures``, newest run first; within a run infrastructure first,
    then the incidents that took the most files. ``ran`` maps (run, lane) to the number
    of files with a verdict there (a lane missing from it counts its failed files)."""
    groups: dict[tuple[str, str], list[Failure]] = {}
    for f in failures:
        groups.setdefault((f.run, f.signature), []).append(f)
    lanes_of_run: dict[str, set[str]] = {}
    for (run, _), items in groups.items():
        lanes_of_run.setdefault(run, set()).update(f.lane for f in items)
    out = []
    for (run, digest), items in groups.items():
        sig = signatures.get(digest) or unknown_signature(digest)
        shares = _shares(run, items, ran)
        category, why = classify(sig, shares)
        newest = max(items, key=lambda f: f.ts)
        out.append(Incident(run, sig, category, why, shares, tuple(items), newest.ts,
                            newest.commit, newest.ci_run_id))
    newest_of_run: dict[str, float] = {}
    for i in out:
        newest_of_run[i.run] = max(newest_of_run.get(i.run, 0.0), i.ts)
    return sorted(out, key=lambda i: (-newest_of_run[i.run], i.run, not i.infrastructure,
                                      -len(i.files), -len(i.failures), i.signature.digest))


def _shares(run: str, items: Sequence[Failure], ran: Mapping[tuple[str, str], int]) -> tuple[LaneShare, ...]:
    by_lane: dict[str, set[str]] = {}
    backend: dict[str, str] = {}
    for f in items:
        by_lane.setdefault(f.lane, set()).add(f.file)
        backend.setdefault(f.lane, f.backend)
    return tuple(LaneShare(lane, backend[lane], len(files), max(ran.get((run, lane), 0), len(files)))
                 for lane, files in sorted(by_lane.items()))


def is_test_shaped(sig: Signature) -> bool:
    return sig.kind == "exception" and sig.label.rsplit(".", 1)[-1] in TEST_SHAPED


def classify(sig: Signature, shares: Sequence[LaneShare]) -> tuple[IncidentCategory, str]:
    """(category, why) of one incident (see the module docstring)."""
    if sig.kind == "infra":
        backends = "/".join(sorted({s.backend for s in shares}))
        return INFRASTRUCTURE, f"matches a {backends} start-up pattern ({sig.label})"
    files = sum(s.files for s in shares)
    if len(shares) == 1:
        share = shares[0]
        spread = (share.files >= 2 and share.whole) or (
            share.files >= SPREAD_MIN_FILES and 2 * share.files >= share.ran)
        if spread and not is_test_shaped(sig):
            scope = (f"all {share.ran} files of {share.lane} that ran" if share.whole
                     else f"{share.files} of the {share.ran} files of {share.lane} that ran")
            return INFRASTRUCTURE, f"{scope} failed alike, and no other stage did"
        if spread:
            return TEST, (f"{share.files} files of {share.lane} failed alike, but with "
                          f"{sig.label}: a test's verdict or broken code, not a runner's fault")
    where = ", ".join(s.lane for s in shares)
    what = f"{files} file{'s' if files != 1 else ''}"
    return TEST, f"{what} in {where}" + (" (several stages: the code, not one runner class)"
                                           if len(shares) > 1 else "")
