"""Flaky, broken and recovered files that fail for one cause, as one group. Pure.

``testfleet flaky`` judges each (file, stage[, test]) on its own; eight files broken by
one runner class are eight verdicts of one cause. A verdict's cause is the signature
most of its failing runs in the window share; verdicts of one stage in one state with
the same cause form a group (two or more), shown as one row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from testfleet.failures.signature import Signature
from testfleet.results.flaky import FlakyVerdict
from testfleet.results.model import RunResult

if TYPE_CHECKING:
    from testfleet.documents.results import FlakyGroupDoc
    from testfleet.documents.vocabulary import FlakyState


@dataclass(frozen=True)
class FlakyGroup:
    state: FlakyState
    stage: str
    signature: Signature
    verdicts: tuple[FlakyVerdict, ...]

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(sorted({v.file for v in self.verdicts if not v.test}))

    @property
    def tests(self) -> tuple[str, ...]:
        return tuple(sorted({f"{v.file}::{v.test}" for v in self.verdicts if v.test}))

    def to_json(self) -> FlakyGroupDoc:
        return {"state": self.state, "stage": self.stage, "signature": self.signature.digest,
                "label": self.signature.label, "text": self.signature.text,
                "files": list(self.files), "tests": list(self.tests)}


def causes(results: Sequence[RunResult], window: int) -> dict[tuple[str, str, str], str]:
    """(stage, file, test) -> the signature most of its failing runs in the window share."""
    runs: dict[tuple[str, str, str], list[RunResult]] = {}
    for r in results:
        runs.setdefault((r.stage, r.file, r.test), []).append(r)
    out = {}
    for key, rows in runs.items():
        newest = sorted(rows, key=lambda r: r.ts, reverse=True)[:window]
        counts = Counter(r.signature for r in newest if r.failed and r.signature)
        if counts:
            out[key] = counts.most_common(1)[0][0]
    return out


def group_verdicts(verdicts: Sequence[FlakyVerdict], cause: Mapping[tuple[str, str, str], str],
                   signatures: Mapping[str, Signature]) -> tuple[list[FlakyGroup], list[FlakyVerdict]]:
    """(groups of two or more verdicts with one cause, the verdicts in no group)."""
    by: dict[tuple[FlakyState, str, str], list[FlakyVerdict]] = {}
    for v in verdicts:
        digest = cause.get((v.stage, v.file, v.test))
        if digest is not None and v.state != "healthy":
            by.setdefault((v.state, v.stage, digest), []).append(v)
    groups = []
    grouped: set[int] = set()
    for (state, stage, digest), members in sorted(by.items()):
        if len(members) < 2:
            continue
        sig = signatures.get(digest) or Signature(digest, "output", f"signature {digest}",
                                                  f"signature {digest[:8]}")
        groups.append(FlakyGroup(state, stage, sig, tuple(members)))
        grouped.update(id(v) for v in members)
    return groups, [v for v in verdicts if id(v) not in grouped]
