"""Suppressions, as linters do them: ``# testfleet: ignore[code]`` on a line and
``per-file-ignores`` in ``[tool.testfleet.check]``.

A suppression hides a finding a project has decided to live with. It can never
hide a finding whose silence would make a test vanish without a trace: an error
that rejects a registration (the registration would drop out of every plan
unseen), a file that cannot be read or parsed, or a broken gate declaration.
Those codes are :data:`NEVER_SILENCED`; naming one in a suppression is itself a
warning, and so is a suppression that silenced nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from testfleet.findings import Finding
from testfleet.globs import matches

# Codes no suppression can hide (documented in docs/registration.md).
NEVER_SILENCED = frozenset({
    # the file could not be read at all
    "read-error", "encoding", "syntax", "internal",
    # the call was rejected: silencing it would drop a registration without a trace
    "starred-argument", "too-many-positional", "unknown-keyword", "duplicate-keyword", "non-literal",
    "missing-argument", "wrong-type", "est-time-range", "unknown-suite", "suite-backend", "suite-conflict",
    "unknown-label", "labels-required", "empty-disabled", "duplicate-stage", "backend-in-implicit",
    # the configuration itself, and the suppression machinery's own findings
    "config", "unused-suppression",
})
# Gate declaration errors (``gate-*``) are never silenced either: the gate would be dropped.
NEVER_SILENCED_PREFIXES = ("gate-",)

PerFileIgnores = Iterable[tuple[str, tuple[str, ...]]]


def silenceable(code: str) -> bool:
    return code not in NEVER_SILENCED and not code.startswith(NEVER_SILENCED_PREFIXES)


def _file_matches(glob: str, rel: str) -> bool:
    """gitignore's rules, as every path pattern of the configuration (:mod:`testfleet.globs`)."""
    return matches((glob,), rel)


def apply_suppressions(
    findings: Iterable[Finding],
    suppressions: Mapping[str, Mapping[int, tuple[str, ...]]],
    per_file: PerFileIgnores,
    *,
    config_name: str | None = None,
) -> tuple[list[Finding], list[Finding], list[Finding]]:
    """(kept, silenced, problems) where ``problems`` are the suppressions' own warnings.

    ``problems`` is only computed when ``config_name`` is given (``check`` passes it,
    with every finding of the tree; collection alone passes None and ignores them,
    since a suppression of a gate or check-rule finding looks unused to it).
    """
    globs = list(per_file)
    used: set[tuple[str, int, str]] = set()
    used_globs: set[tuple[str, str]] = set()
    kept: list[Finding] = []
    silenced: list[Finding] = []
    for f in findings:
        if silenceable(f.code):
            codes = suppressions.get(f.file, {}).get(f.line, ()) if f.line else ()
            if f.code in codes:
                used.add((f.file, f.line, f.code))
                silenced.append(f)
                continue
            glob = next((g for g, cs in globs if f.code in cs and _file_matches(g, f.file)), None)
            if glob is not None:
                used_globs.add((glob, f.code))
                silenced.append(f)
                continue
        kept.append(f)
    if config_name is None:
        return kept, silenced, []
    problems: list[Finding] = []
    for rel, lines in sorted(suppressions.items()):
        for line, codes in sorted(lines.items()):
            if not codes:
                problems.append(Finding(rel, line, 0, "warning", "unused-suppression",
                                        "'# testfleet: ignore' needs the codes it silences, e.g. "
                                        "'# testfleet: ignore[no-main-call]'; it silences nothing"))
            for code in codes:
                if (rel, line, code) in used:
                    continue
                problems.append(Finding(rel, line, 0, "warning", "unused-suppression",
                                        _unused(code, "on this line")))
    for glob, codes in globs:
        for code in codes:
            if (glob, code) not in used_globs:
                problems.append(Finding(config_name, 0, 0, "warning", "unused-suppression",
                                        _unused(code, f"in files matching {glob!r}"),
                                        "tool.testfleet.check.per-file-ignores"))
    return kept, silenced, problems


def _unused(code: str, where: str) -> str:
    if not silenceable(code):
        return (f"suppression of {code!r} has no effect: {code} can never be silenced (it would hide a "
                "test or a file testfleet cannot read); fix the cause instead")
    return f"unused suppression: no {code!r} finding {where}; remove it"
