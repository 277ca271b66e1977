"""The data that collection produces and every later step consumes."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from testfleet.documents.vocabulary import MAX_EST_TIME as MAX_EST_TIME
from testfleet.findings import Finding

if TYPE_CHECKING:
    from testfleet.documents.registrations import InvalidDoc, RegistrationDoc



@dataclass(frozen=True, order=True)
class Registration:
    """One test file's declaration for one backend.

    ``file`` is repo-relative with forward slashes; ``implicit`` is true when the
    registration comes from an implicit directory rather than a marker call.
    """

    file: str
    backend: str
    suite: str
    est_time: float
    line: int = 0
    col: int = 0
    labels: tuple[str, ...] = ()
    nightly: bool = False
    disabled: str | None = None
    implicit: bool = False
    #: fnmatch patterns over runner labels that narrow ``disabled`` to the lanes whose
    #: ``runs_on`` has a matching label (a project keyword such as ``disabled_on_runners``,
    #: see ``MarkerRoles``); empty: ``disabled`` applies everywhere
    disabled_on: tuple[str, ...] = ()
    #: a per-runner disable of its own (the marker signature names a reason keyword or a
    #: default reason): the reason on a lane ``disabled_on`` matches, ``{pattern}`` standing
    #: for the pattern that matched; ``disabled`` then stays the whole registration's switch.
    #: None: ``disabled_on`` narrows ``disabled``
    disabled_on_reason: str | None = None

    def to_json(self) -> RegistrationDoc:
        out: RegistrationDoc = {
            "file": self.file,
            "line": self.line,
            "backend": self.backend,
            "suite": self.suite,
            "est_time": self.est_time,
            "labels": list(self.labels),
            "nightly": self.nightly,
            "disabled": self.disabled,
            "implicit": self.implicit,
        }
        if self.disabled_on:
            out["disabled_on"] = list(self.disabled_on)
        if self.disabled_on_reason is not None:
            out["disabled_on_reason"] = self.disabled_on_reason
        return out

    @property
    def off_everywhere(self) -> str | None:
        """The reason it runs on no lane at all (its ``disabled``, unless that is narrowed
        to some runners), else None."""
        if self.disabled is None or (self.disabled_on and self.disabled_on_reason is None):
            return None
        return self.disabled

    def runner_reason(self, pattern: str) -> str:
        """Why it does not run where ``pattern`` matched a runner label."""
        if self.disabled_on_reason is None:
            return f"{self.disabled} (disabled on runners matching {', '.join(self.disabled_on)}"
        return self.disabled_on_reason.replace("{pattern}", pattern)

    def disabled_for(self, runs_on: Sequence[str]) -> str | None:
        """Why this registration does not run on a lane with these runner labels: its
        ``disabled`` reason everywhere, or only where ``disabled_on`` matches a label."""
        if self.disabled is not None and (self.disabled_on_reason is not None or not self.disabled_on):
            return self.disabled
        if self.disabled is None and self.disabled_on_reason is None:
            return None
        for label in runs_on:
            for p in self.disabled_on:
                if fnmatch.fnmatchcase(label, p):
                    if self.disabled_on_reason is None:
                        return f"{self.runner_reason(p)}: {label})"
                    return f"{self.runner_reason(p)} (runner label {label})"
        return None


@dataclass(frozen=True, order=True)
class InvalidRegistration:
    """A marker call that could not become a registration (#12: errors are fates).

    It keeps what could be read (backend, and the suite when it was a string) and
    the first error found, so a plan gives it the fate ``invalid`` and counts it
    as a hole of its stage instead of refusing to plan the whole tree.
    """

    file: str
    backend: str
    suite: str
    line: int
    col: int
    code: str
    message: str

    def to_json(self) -> InvalidDoc:
        return {"file": self.file, "line": self.line, "backend": self.backend, "suite": self.suite,
                "code": self.code, "message": self.message}


@dataclass(frozen=True)
class GateCall:
    """A ``register_ci_gate(...)`` call as found in a file, arguments still literal.

    ``kwargs`` holds the literal values (``ast.literal_eval`` results); arguments
    that were not literals are listed in ``non_literal`` so the gate parser can
    report them. Interpretation belongs to :mod:`testfleet.gate`.
    """

    file: str
    line: int
    col: int
    kwargs: dict[str, Any]
    positional: int = 0
    non_literal: tuple[str, ...] = ()
    # ``constraint`` dict keys written more than once (``literal_eval`` kept only the
    # last), found while the call's syntax tree was at hand, so that no reader of a
    # cached registry has to parse the file again to report them.
    duplicate_keys: tuple[str, ...] = ()


@dataclass
class Registry:
    """Everything collection found in one pass over the tree."""

    registrations: list[Registration] = field(default_factory=list)
    gates: list[GateCall] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    # marker calls rejected by validation; each also has its error in ``findings``
    invalid: list[InvalidRegistration] = field(default_factory=list)
    # per file, line -> codes of its ``# testfleet: ignore[...]`` comments
    suppressions: dict[str, dict[int, tuple[str, ...]]] = field(default_factory=dict)
    # findings a suppression silenced (``check`` needs them to know which suppressions were used)
    suppressed: list[Finding] = field(default_factory=list)
    # file -> content digest (16 bytes) of every file collection read or took from its
    # cache: the key of the per-file caches of ``check`` and of ``plan``'s file styles,
    # trusted as far as the registry cache trusts its entries, so that a warm run reads
    # no file to find its cached syntax and style results
    digests: dict[str, bytes] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)
