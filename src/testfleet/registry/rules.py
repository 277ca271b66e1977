"""What the configuration says a registration may be, precomputed once per collection."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from testfleet.config import Config

KEYWORDS = ("est_time", "suite", "labels", "nightly", "disabled")
POSITIONAL = ("est_time", "suite")


@dataclass(frozen=True)
class Signature:
    """A marker's calling convention (``[tool.testfleet.markers.<marker>]``).

    ``extra`` holds (keyword, type) pairs beyond :data:`KEYWORDS`; the suite is
    composed from ``suite_template`` when the call gives its fields instead of ``suite``.
    """

    positional: tuple[str, ...] = POSITIONAL
    extra: tuple[tuple[str, str], ...] = ()
    suite_template: str | None = None
    ignore: tuple[str, ...] = ()
    allow_zero_est_time: bool = False
    allow_empty_suite: bool = False
    #: the declared list[str] keyword whose runner patterns narrow ``disabled``
    disabled_on_runners: str | None = None
    #: the declared str keyword giving a per-runner disable its own reason, and the reason
    #: when a call gives none; either makes the runner patterns independent of ``disabled``
    disabled_on_runners_reason: str | None = None
    disabled_on_runners_default: str | None = None

    @property
    def runner_disable_of_its_own(self) -> bool:
        return self.disabled_on_runners_reason is not None or self.disabled_on_runners_default is not None

    @property
    def keywords(self) -> tuple[str, ...]:
        return KEYWORDS + tuple(name for name, _ in self.extra) + self.ignore

    @property
    def template_fields(self) -> tuple[str, ...]:
        if self.suite_template is None:
            return ()
        import string

        return tuple(f for _, f, _, _ in string.Formatter().parse(self.suite_template) if f is not None)

    def to_json(self) -> list[object]:
        return [list(self.positional), [list(e) for e in self.extra], self.suite_template, list(self.ignore),
                self.allow_zero_est_time, self.allow_empty_suite, self.disabled_on_runners,
                self.disabled_on_runners_reason, self.disabled_on_runners_default]


DEFAULT_SIGNATURE = Signature()


@dataclass(frozen=True)
class StageRule:
    name: str
    backend: str
    command: str
    dormant: bool
    # #12: the backends whose registrations the stage takes (its variants' may add one)
    backends: tuple[str, ...] = ()
    # path-only registrations (suite "") it runs by path (testfleet.config.triggers)
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class ImplicitRule:
    """An implicit directory: every matching file under ``path`` is registered."""

    index: int
    path: str
    backend: str
    suite: str
    est_time: float
    labels: tuple[str, ...]
    pattern: re.Pattern[str]
    pattern_text: str

    def contains(self, rel: str) -> bool:
        return rel.startswith(self.path + "/")


@dataclass(frozen=True)
class Rules:
    """The config distilled into what collection consults for every file."""

    marker_backend: dict[str, str]
    markers: frozenset[str]
    stages: dict[str, StageRule]
    labels: tuple[str, ...]
    labels_required: dict[str, bool]
    gpu: dict[str, bool]
    implicit: tuple[ImplicitRule, ...]
    pattern: re.Pattern[str]
    pattern_text: str
    python_main_check: bool
    gate_marker: str = "register_ci_gate"
    signatures: tuple[tuple[str, Signature], ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def signature_of(self, marker: str) -> Signature:
        """The marker's own signature, else the ``"*"`` one, else the built-in one."""
        fallback = DEFAULT_SIGNATURE
        for name, sig in self.signatures:
            if name == marker:
                return sig
            if name == "*":
                fallback = sig
        return fallback

    def implicit_for(self, rel: str) -> ImplicitRule | None:
        """The deepest implicit directory holding ``rel`` whose pattern matches it."""
        best: ImplicitRule | None = None
        for rule in self.implicit:
            if rule.contains(rel) and (best is None or len(rule.path) > len(best.path)):
                best = rule
        if best is not None and not matches(best.pattern, best.pattern_text, rel):
            return None
        return best

    def markers_of(self, backend: str) -> list[str]:
        return sorted(m for m, b in self.marker_backend.items() if b == backend)

    def stages_of(self, backend: str) -> list[str]:
        return sorted(n for n, s in self.stages.items() if backend in (s.backends or (s.backend,)))


def compile_pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern))


def matches(compiled: re.Pattern[str], pattern_text: str, rel: str) -> bool:
    """A pattern with a '/' matches the repo-relative path, otherwise the file name."""
    target = rel if "/" in pattern_text else rel.rsplit("/", 1)[-1]
    return compiled.match(target) is not None


def build_rules(config: Config) -> Rules:
    from testfleet.config import GATE_MARKER

    specs = config.backend_specs()
    marker_backend = config.marker_backends()
    implicit = tuple(
        ImplicitRule(
            index=i,
            path=imp.path,
            backend=imp.backend,
            suite=imp.suite,
            est_time=float(imp.est_time),
            labels=tuple(imp.labels),
            pattern=compile_pattern(imp.pattern or config.pattern),
            pattern_text=imp.pattern or config.pattern,
        )
        for i, imp in enumerate(config.implicit)
    )
    return Rules(
        marker_backend=marker_backend,
        markers=frozenset(marker_backend) | {GATE_MARKER},
        stages={
            name: StageRule(name, st.backend, st.command, st.dormant,
                            tuple(sorted(st.accepted_backends())), tuple(st.files))
            for name, st in config.stages.items()
        },
        labels=tuple(sorted(config.labels)),
        labels_required={b: s.labels_required for b, s in specs.items()},
        gpu={b: s.gpu for b, s in specs.items()},
        implicit=implicit,
        pattern=compile_pattern(config.pattern),
        pattern_text=config.pattern,
        python_main_check=config.check.python_main_check,
        gate_marker=GATE_MARKER,
        signatures=tuple(sorted(
            (name, Signature(tuple(sig.positional), tuple(sorted(sig.keywords.items())), sig.suite_template,
                             tuple(sig.ignore), sig.allow_zero_est_time, sig.allow_empty_suite,
                             sig.disabled_on_runners, sig.disabled_on_runners_reason,
                             sig.disabled_on_runners_default))
            for name, sig in config.marker_signatures().items()
        )),
        per_file_ignores=tuple((glob, tuple(codes)) for glob, codes in config.check.per_file_ignores.items()),
    )
