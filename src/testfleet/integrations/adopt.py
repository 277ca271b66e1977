"""Adopt an existing tree: read its ``register_*_ci(...)`` calls and derive a config.

This runs *before* any configuration exists, so it cannot use the registry
(which validates against configured stages and labels). It reads the same
literal calls the registry reads -- top-level ``register_<backend>_ci(...)``
statements, whatever module the names were imported from -- never importing a
test file, and derives the stages, backends and labels the tree already uses.

Everything the tree does that a configuration cannot make valid (a call with a
non-literal argument, an aliased or attribute call, a file that does not parse)
is reported as a :class:`~testfleet.findings.Finding`, never dropped silently,
so ``testfleet init --from-existing`` can say what still stands between the
tree and a clean ``testfleet check``.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testfleet.config import BUILTIN_BACKENDS, NAME_RE
from testfleet.findings import Finding
from testfleet.integrations.adopt_ci import CIRead, CIStage, NotCarried, read_workflows
from testfleet.integrations.adopt_project import (
    ProjectCI,
    SignatureRead,
    find_collectors,
    find_marker_module,
    read_project,
    read_signatures,
    runner_roots,
)
from testfleet.registry.scan import (
    ALIASED_IMPORT,
    ATTRIBUTE_CALL,
    EMBEDDED_CALL,
    INDENTED_CALL,
    MENTION,
    MarkerCall,
    scan_source,
)
from testfleet.registry.syntax import syntax_error

MARKER_RE = re.compile(r"^register_([A-Za-z0-9]+)_ci$")
#: Any ``register_<backend>_ci`` name: before a config exists, every backend is possible.
MARKER_SCAN = re.compile(r"register_(?:[A-Za-z0-9]+_ci|ci_gate)(?!\w)")
GATE = "register_ci_gate"
NEEDLES = (b"register_",)
_PYTEST_TESTS = re.compile(r"^(?:async[ \t]+)?def[ \t]+test|^class[ \t]+Test", re.MULTILINE)
ALIASES = {"amd": "rocm"}
_NAME = re.compile(NAME_RE)
_SKIP_DIRS = {
    ".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "env", "node_modules",
    "__pycache__", "build", "dist", "site-packages", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", ".testfleet", ".eggs",
}
PATTERNS = ("test_*.py", "*_test.py", "test*.py", "*.py")


@dataclass(frozen=True)
class FoundCall:
    """One literal ``register_<backend>_ci(...)`` call as written in a file."""

    file: str
    line: int
    col: int
    marker: str
    backend: str
    suite: str
    est_time: float
    labels: tuple[str, ...] = ()
    nightly: bool = False
    disabled: str | None = None


@dataclass
class Scan:
    """What a pass over the tree found."""

    roots: list[str]
    calls: list[FoundCall] = field(default_factory=list)
    test_files: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    python_style: dict[str, bool] = field(default_factory=dict)  # file -> runs as a script
    repo: Path | None = None
    #: Python files outside every root (the project's CI does not discover them either)
    outside: list[str] = field(default_factory=list)
    #: files holding a registration marker, read or not: never excluded
    marked: set[str] = field(default_factory=set)
    #: marker -> its signature, as the project's module that defines the markers declares it
    signatures: dict[str, SignatureRead] = field(default_factory=dict)
    signatures_source: str | None = None
    #: modules the tree imports its markers from (``from X import register_cuda_ci``)
    marker_modules: Counter[str] = field(default_factory=Counter)
    #: the marker calls found, parsed once the signatures are known
    raw_calls: list[tuple[str, MarkerCall]] = field(default_factory=list)

    @property
    def registered_files(self) -> set[str]:
        return {c.file for c in self.calls}


# -- scanning ---------------------------------------------------------------

def _walk(root: Path, start: Path) -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(start):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")
                             and not os.path.islink(os.path.join(dirpath, d)))
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = Path(dirpath) / name
                out.append((path.relative_to(root).as_posix(), path))
    return out


def detect_roots(root: Path) -> list[str]:
    """Top-level directories that hold marker calls, plus ``tests``/``test`` if present."""
    roots: set[str] = set()
    for name in ("tests", "test"):
        if (root / name).is_dir() and not (root / name).is_symlink():
            roots.add(name)
    for rel, path in _walk(root, root):
        if "/" not in rel:
            continue
        top = rel.split("/", 1)[0]
        if top in roots:
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b"register_" in data and scan_source(data, MARKER_SCAN, NEEDLES).calls:
            roots.add(top)
    return sorted(roots) or ["tests"]


def _marked_runner_roots(root: Path) -> list[str]:
    """The runner script's glob directories (see ``runner_roots``) that hold marker calls."""
    out = []
    for rel in runner_roots(root):
        for _, path in _walk(root, root / rel):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if b"register_" in data and scan_source(data, MARKER_SCAN, NEEDLES).calls:
                out.append(rel)
                break
    return out


def backend_of(marker: str) -> str:
    m = MARKER_RE.match(marker)
    assert m is not None
    name = m.group(1).lower()
    return ALIASES.get(name, name)


def _literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _parse_call(rel: str, call_at: MarkerCall, findings: list[Finding],
                sig: SignatureRead | None = None) -> FoundCall | None:
    """One call read as the marker's signature says (testfleet's own when ``sig`` is None:
    ``marker(est_time, suite, *, labels, nightly, disabled)``)."""
    call, marker = call_at.node, call_at.name
    where = (rel, call_at.line, call_at.col)
    sig = sig or SignatureRead()
    keywords = {"est_time", "suite", "labels", "nightly", "disabled", *dict(sig.keywords), *sig.ignore}

    def bad(message: str) -> None:
        findings.append(Finding(*where, "error", "adopt-call", f"{marker}(...): {message}"))

    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        bad("starred arguments cannot be read statically")
        return None
    values: dict[str, Any] = {}
    names = sig.positional
    if len(call.args) > len(names):
        bad(f"{len(call.args)} positional arguments; at most {', '.join(names)}")
        return None
    for name, arg in zip(names, call.args, strict=False):
        ok, value = _literal(arg)
        if not ok:
            bad(f"argument {name} is not a literal")
            return None
        values[name] = value
    for kw in call.keywords:
        assert kw.arg is not None
        if kw.arg not in keywords:
            bad(f"unknown keyword {kw.arg!r} (testfleet reads {', '.join(sorted(keywords))}; a "
                "project's own keywords are read from the module that defines its markers)")
            return None
        if kw.arg in sig.ignore:
            continue
        ok, value = _literal(kw.value)
        if not ok:
            bad(f"argument {kw.arg} is not a literal")
            return None
        values[kw.arg] = value
    fields = sorted(_template_fields(sig.suite_template))
    given = [f for f in fields if f in values]
    if given and "suite" in values and values["suite"] is not None:
        bad(f"gives both suite and {', '.join(given)}, which compose the suite ({sig.suite_template!r})")
        return None
    if given:
        if len(given) < len(fields) or not all(isinstance(values[f], (str, int))
                                               and not isinstance(values[f], bool) for f in fields):
            bad(f"the suite is composed as {sig.suite_template!r}: give every field as a "
                "string literal")
            return None
        values["suite"] = str(sig.suite_template).format(**{f: values[f] for f in fields})
    suite, est = values.get("suite"), values.get("est_time")
    if not isinstance(suite, str) or not suite:
        bad("suite must be a non-empty string literal")
        return None
    zero_ok = sig != SignatureRead()  # the project's own parser decides; 0 is a number to it
    if isinstance(est, bool) or not isinstance(est, (int, float)) or not (est > 0 or (zero_ok and est == 0)):
        bad(f"est_time must be a number > 0, got {est!r}")
        return None
    labels = values.get("labels") or ()
    if not isinstance(labels, (list, tuple)) or not all(isinstance(x, str) for x in labels):
        bad("labels must be a list of string literals")
        return None
    nightly = values.get("nightly", False)
    if not isinstance(nightly, bool):
        bad("nightly must be True or False")
        return None
    disabled = values.get("disabled")
    if disabled is not None and (not isinstance(disabled, str) or not disabled.strip()):
        bad("disabled must be a non-empty reason string or None")
        return None
    return FoundCall(rel, call_at.line, call_at.col, marker, backend_of(marker), suite,
                     float(est), tuple(labels), nightly, disabled)


def _template_fields(template: str | None) -> set[str]:
    import string

    if template is None:
        return set()
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


_UNREAD = {
    INDENTED_CALL: "called inside {detail}, not as a top-level statement",
    ATTRIBUTE_CALL: "called as an attribute ({detail})",
    ALIASED_IMPORT: "imported under another name ({detail})",
    EMBEDDED_CALL: "called inside a larger expression ({detail})",
}


def _check_gate(rel: str, call: MarkerCall, findings: list[Finding]) -> None:
    """A gate that leaves ``steps``/``constraint`` to a config default needs one that
    no tree can supply by itself: say so rather than invent thresholds."""
    given = {k.arg for k in call.node.keywords if k.arg}
    missing = [k for k in ("steps", "constraint") if k not in given]
    if not missing:
        return
    key = next((k.value for k in call.node.keywords if k.arg == "metric_key"), None)
    metric = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "?"
    findings.append(Finding(
        rel, call.line, call.col, "error", "adopt-gate-default",
        f"register_ci_gate(metric_key={metric!r}) omits {' and '.join(missing)}: add them to the "
        f'call or add [tool.testfleet.gate.defaults."{metric}"] with steps and constraint'))


def scan(root: Path, roots: list[str] | None = None) -> Scan:
    """Scan ``roots`` for marker calls and test files.

    Without ``roots``: the directories the project's own collector scans, when it
    names them as literals (so the adopted registry is the collector's), else the
    detected ones.
    """
    root = root.resolve()
    if roots is None:
        detected = detect_roots(root)
        project = read_project(root, detected, set())
        roots = project.discovery_roots or _marked_runner_roots(root) or detected
    result = Scan(roots=roots, repo=root)
    for top in result.roots:
        start = root / top
        if not start.is_dir():
            result.findings.append(Finding(top, 0, 0, "warning", "adopt-root",
                                           "root directory does not exist"))
            continue
        for rel, path in _walk(root, start):
            if path.is_symlink():
                result.findings.append(Finding(rel, 0, 0, "warning", "adopt-symlink",
                                               "symlinked file: testfleet never follows it"))
                continue
            result.test_files.append(rel)
            _scan_file(rel, path, result)
    result.test_files = sorted(set(result.test_files))
    _read_signatures(root, result)
    for rel, call in result.raw_calls:
        found = _parse_call(rel, call, result.findings, result.signatures.get(call.name))
        if found is not None:
            result.calls.append(found)
    result.outside = sorted(rel for rel, _ in _walk(root, root)
                            if not any(rel.startswith(r.rstrip("/") + "/") for r in result.roots))
    return result


def _not_called(rel: str, fs: Any, findings: list[Finding]) -> None:
    """A marker named (imported) in a file that never calls it, or any marker of its
    backend: ``check`` says ``marker-not-called``, so adoption says it first."""
    called = {GATE if c.name == GATE else backend_of(c.name) for c in fs.calls}
    named: dict[str, Any] = {}
    for occ in fs.others:
        key = GATE if occ.name == GATE else backend_of(occ.name)
        if occ.kind != MENTION:
            called.add(key)  # reported on its own (an unread call)
        else:
            named.setdefault(key, occ)
    for key, occ in sorted(named.items()):
        if key not in called:
            findings.append(Finding(rel, occ.line, occ.col, "error", "adopt-not-called",
                                    f"{occ.name} is named here but this file has no top-level "
                                    f"{occ.name}(...) call ('check' reports marker-not-called); "
                                    "remove the unused name"))


# ``from X import a, register_cuda_ci`` and the parenthesized, multi-line form black writes
_IMPORT_FROM = re.compile(r"^from[ \t]+([\w.]+)[ \t]+import[ \t]*(?:\([^)]*?|[^\n(]*?)"
                          r"\bregister_[A-Za-z0-9]+_ci\b", re.MULTILINE)


def _read_signatures(root: Path, result: Scan) -> None:
    """The markers' signatures from the module that defines them: the collector under
    the roots, else the module the tree imports its markers from."""
    module = next(iter(find_collectors(root, _search_roots(result))), None)
    if module is None:
        module = find_marker_module(root, [m for m, _ in result.marker_modules.most_common(3)])
    if module is None:
        return
    signatures = {name: sig for name, sig in read_signatures(module).items() if not sig.is_default}
    if signatures:
        result.signatures = signatures
        result.signatures_source = module.relative_to(root).as_posix()


def _scan_file(rel: str, path: Path, result: Scan) -> None:
    """One file, read with the registry's own statement parser (so adoption sees
    exactly the calls ``testfleet check`` will see)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        result.findings.append(Finding(rel, 0, 0, "error", "adopt-read", f"cannot read: {exc}"))
        return
    fs = scan_source(data, MARKER_SCAN, NEEDLES)
    if (fs.syntax_errors or any(c.name != GATE for c in fs.calls)
            or any(o.kind in _UNREAD and o.name != GATE for o in fs.others)
            or (fs.decode_error is not None and MARKER_SCAN.search(data.decode("latin-1")))):
        result.marked.add(rel)
    if fs.decode_error is not None:
        if b"register_" in data:
            result.findings.append(Finding(rel, 0, 0, "error", "adopt-encoding",
                                           f"not UTF-8: {fs.decode_error}"))
        return
    if fs.has_main_call:
        text = data.decode("utf-8", errors="replace")
        result.python_style[rel] = not _PYTEST_TESTS.search(text)
    for line, col, message in fs.syntax_errors:
        result.findings.append(Finding(rel, line, col, "error", "adopt-syntax", message))
    if not fs.syntax_errors:
        # 'testfleet check' compiles every discovered file; say now what it will say
        error = syntax_error(data, rel)
        if error is not None:
            result.findings.append(Finding(rel, error[0], error[1], "error", "adopt-file-syntax",
                                           f"syntax error: {error[2]}"))
    for call in fs.calls:
        if call.name == GATE:
            _check_gate(rel, call, result.findings)
            continue
        result.raw_calls.append((rel, call))
    if fs.calls:
        text = data.decode("utf-8", errors="replace")
        result.marker_modules.update(m.group(1) for m in _IMPORT_FROM.finditer(text))
    _not_called(rel, fs, result.findings)
    for occ in fs.others:
        template = _UNREAD.get(occ.kind)
        if template is None:
            continue
        if getattr(occ, "in_function", False):
            # as 'check' has it: most likely a unit test of the marker itself
            result.findings.append(Finding(
                rel, occ.line, occ.col, "warning", "adopt-in-function",
                f"{occ.name} {template.format(detail=occ.detail or '?')} inside a function: "
                "not a registration (fine for a test of the marker itself)"))
            continue
        result.findings.append(Finding(
            rel, occ.line, occ.col, "error", "adopt-unread",
            f"{occ.name} {template.format(detail=occ.detail or '?')}: testfleet reads only "
            "top-level calls by their own name, so this registration will not be seen"))


# -- deriving the configuration ---------------------------------------------

@dataclass
class Adoption:
    """The derived configuration (as plain data) and what could not be adopted."""

    data: dict[str, Any]
    findings: list[Finding]
    notes: list[str]
    registrations: int
    #: what the existing CI does that the configuration does not carry (read at the end)
    not_carried: list[NotCarried] = field(default_factory=list)
    ci: CIRead = field(default_factory=CIRead)
    project: ProjectCI = field(default_factory=ProjectCI)
    #: stage -> why it is dormant (no job of the existing CI runs it)
    dormant: dict[str, str] = field(default_factory=dict)


def _pattern_for(files: set[str]) -> str:
    for pattern in PATTERNS:
        if all(fnmatch.fnmatch(f.rsplit("/", 1)[-1], pattern) for f in files):
            return pattern
    return "*.py"


def _excludes(candidates: list[str], registered: set[str], marked: set[str]) -> list[str]:
    """Unregistered files, listed one by one and sorted.

    Never a ``dir/**`` glob: a glob would also swallow the next test file added to
    that directory, which then passes ``check`` and never runs. Never a file that
    holds a marker (``marked``): a registration adoption could not read is a finding
    to fix, not a file to drop.
    """
    return sorted(f for f in candidates if f not in registered and f not in marked)


def _outside_excludes(scan_result: Scan, pattern: str) -> list[str]:
    """Excludes for test files outside every root (so ``check`` does not warn about
    files the project never ran): a whole directory (``dir/**``) when it lies outside
    every root and holds no root, else the file itself."""
    roots = [r.rstrip("/") for r in scan_result.roots]
    out: set[str] = set()
    for rel in scan_result.outside:
        if not fnmatch.fnmatch(rel.rsplit("/", 1)[-1], pattern):
            continue
        parts = rel.split("/")[:-1]
        chosen = rel
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if not any(r == d or r.startswith(d + "/") for r in roots):
                chosen = d + "/**"
                break
        out.add(chosen)
    return sorted(out)


def derive(scan_result: Scan, *, schedules: dict[str, str] | None = None) -> Adoption:
    """Turn a scan into configuration data that makes the tree's calls valid as written."""
    notes: list[str] = []
    calls = scan_result.calls

    registered = scan_result.registered_files
    pattern = _pattern_for(registered) if registered else "test_*.py"
    # A file the registry will not discover (a helper that defines the markers,
    # a module outside the pattern) cannot break 'testfleet check'.
    findings = [f for f in scan_result.findings
                if f.code in ("adopt-root", "adopt-symlink")
                or fnmatch.fnmatch(f.file.rsplit("/", 1)[-1], pattern)]
    # a file may register once per stage (several stages of one backend are fine);
    # twice to the same stage is the registry's duplicate-stage error
    seen: dict[tuple[str, str], FoundCall] = {}
    for c in calls:
        key = (c.file, c.suite)
        if key in seen:
            findings.append(Finding(c.file, c.line, c.col, "error", "adopt-duplicate",
                                    f"second registration of this file to stage {c.suite!r} "
                                    f"(first at line {seen[key].line})"))
        else:
            seen[key] = c

    candidates = [f for f in scan_result.test_files
                  if fnmatch.fnmatch(f.rsplit("/", 1)[-1], pattern)]
    data: dict[str, Any] = {"roots": list(scan_result.roots), "pattern": pattern}
    exclude = _excludes(candidates, registered, scan_result.marked)
    outside = _outside_excludes(scan_result, pattern)
    # an excluded file is never compiled by 'check'; a marker it fails to make still matters
    findings = [f for f in findings
                if not (f.code == "adopt-file-syntax" and f.file in exclude)]

    project = ProjectCI()
    ci = CIRead()
    if scan_result.repo is not None:
        project = read_project(scan_result.repo, _search_roots(scan_result),
                               {label for c in calls for label in c.labels})
    implicit, implicit_notes = _implicit(project, scan_result, calls, candidates)
    notes += implicit_notes
    if implicit:
        data["implicit"] = implicit
        under = [f for f in exclude if any(f.startswith(i["path"] + "/") for i in implicit)]
        exclude = [f for f in exclude if f not in under]
        data.pop("exclude", None)
        notes.append(f"{len(under)} file(s) registered by location ({', '.join(i['path'] for i in implicit)}, "
                     f"read from {project.collector}) are [[implicit]], not excluded")
    if exclude:
        notes.append(f"{len(exclude)} test file(s) without a registration are listed in exclude, "
                     "one per line; register them or declare their directory [[implicit]] to "
                     "run them (a new file there is not excluded)")
    if exclude or outside:
        data["exclude"] = sorted(exclude) + outside
    if outside:
        notes.append(f"test files outside every root are excluded ({', '.join(outside[:4])}"
                     f"{', ...' if len(outside) > 4 else ''}): the project's CI does not run them")
    suites = {c.suite for c in calls} | {i["suite"] for i in implicit}
    if scan_result.repo is not None:
        ci = read_workflows(scan_result.repo, suites)
        ran = _run_command_implicit(scan_result, ci, calls, candidates, implicit, notes)
        if ran:
            implicit += ran
            data["implicit"] = implicit
            covered = [f for f in data.get("exclude", [])
                       if any(f.startswith(i["path"] + "/") for i in ran)]
            rest = [f for f in data.get("exclude", []) if f not in covered]
            data.pop("exclude", None)
            if rest:
                data["exclude"] = rest
            ci = read_workflows(scan_result.repo, suites | {i["suite"] for i in ran})
        findings += ci.findings

    data["labels"] = _labels(calls, project, findings, notes)
    backends = _backends(calls, notes)
    if backends:
        data["backends"] = backends
    markers = _marker_tables(scan_result, notes)
    if markers:
        data["markers"] = markers
    stages, dormant, not_carried = _stages(calls, implicit, scan_result, ci, findings, notes)
    data["stages"] = stages
    data["policy"] = {}
    _pr_gate_policy(stages, ci, data["policy"], notes)
    exact = sorted({st.runner.script for st in ci.stages.values()
                    if st.runner is not None and st.runner.exact_nightly})
    sched = dict(schedules) if schedules is not None else _schedules(project, ci, notes, bool(exact))
    data["policy"] = {"schedules": sched, **data.get("policy", {})}
    if exact:
        # the cadences the project's --nightly runs are scheduled as (else plain nightly)
        split = {cadence for cron, cadence in sched.items()
                 if any(st.nightly_run for st in ci.stages.values()
                        if st.workflow == ci.crons.get(cron))} or {"nightly"}
        data["policy"]["cadences"] = _exact_cadences(split)
        chosen = sorted(n for n, c in data["policy"]["cadences"].items() if "nightly_split" in c)
        notes.append(f"{', '.join(exact)} keeps nightly and per-commit registrations apart "
                     "(--nightly selects only nightly=True, a run without it only nightly=False): "
                     f"nightly_split = \"exact\" for the {', '.join(chosen)} cadence(s), which "
                     "the workflows that pass --nightly are scheduled as")
    ignores = _per_file_ignores(findings, data.get("exclude", []), pattern, notes)
    if ignores:
        data["check"] = {"per-file-ignores": ignores}
        findings = [f for f in findings if not (f.code == "adopt-in-function" and f.file in ignores)]
    if project.gate_defaults:
        data["gate"] = {"defaults": dict(sorted(project.gate_defaults.items()))}
        notes.append(f"{len(project.gate_defaults)} metric gate default(s) from "
                     f"{project.gate_defaults_source}")
        findings = [f for f in findings if not (f.code == "adopt-gate-default"
                                                and _gate_metric(f.message) in project.gate_defaults)]
    return Adoption(data=data, findings=findings, notes=notes, registrations=len(calls),
                    not_carried=[*not_carried, *ci.not_carried, *ci.ignored_crons], ci=ci,
                    project=project, dormant=dormant)


def _marker_tables(scan_result: Scan, notes: list[str]) -> dict[str, dict[str, Any]]:
    """``[markers.<marker>]`` tables for the markers the tree calls, as the project's module
    declares them: one ``"*"`` table when they all share a signature, else one per marker."""
    used = sorted({c.marker for c in scan_result.calls} | {m for _, c in scan_result.raw_calls
                                                          for m in [c.name] if m != GATE})
    sigs = {m: scan_result.signatures[m] for m in used if m in scan_result.signatures}
    if not sigs:
        return {}
    # est_time = 0 is valid to the project's own parser for every marker it defines
    zero = any(c.est_time == 0 for c in scan_result.calls)
    tables: dict[str, dict[str, Any]] = {}
    for marker, sig in sigs.items():
        tables[marker] = {**sig.table(), **({"allow_zero_est_time": True} if zero else {})}
    distinct = {repr(t) for t in tables.values()}
    if len(distinct) == 1 and len(tables) == len(used):
        tables = {"*": next(iter(tables.values()))}
    notes.append(f"marker signature(s) read from {scan_result.signatures_source}: "
                 + "; ".join(f"{m}: {', '.join(f'{k}={v}' for k, v in t.items())}"
                             for m, t in tables.items()))
    ignored: Counter[str] = Counter(
        k.arg for _, c in scan_result.raw_calls if c.name in sigs
        for k in c.node.keywords if k.arg in sigs[c.name].ignore)
    if ignored:
        notes.append("keyword(s) the configuration does not read, accepted and ignored: "
                     + ", ".join(f"{k} ({n} call(s))" for k, n in sorted(ignored.items()))
                     + "; whatever the project's runner does with them (SGLang's in_process_group "
                       "starts several files in one process) testfleet does not: each file runs "
                       "on its own with the stage's command")
    return tables


def _per_file_ignores(findings: list[Finding], exclude: list[str], pattern: str,
                      notes: list[str]) -> dict[str, list[str]]:
    """A marker called inside a test function is a unit test of the marker itself:
    ``check`` warns about it (``marker-in-function``); adoption records that the project
    lives with it, per file, so the adopted tree checks clean and a new case elsewhere
    still warns."""
    files = sorted({f.file for f in findings if f.code == "adopt-in-function"
                    and f.file not in exclude and fnmatch.fnmatch(f.file.rsplit("/", 1)[-1], pattern)})
    if files:
        notes.append(f"marker calls inside test functions (unit tests of the markers) are "
                     f"suppressed per file in [check] per-file-ignores: {', '.join(files)}")
    return {f: ["marker-in-function"] for f in files}


def _gate_metric(message: str) -> str | None:
    m = re.match(r"register_ci_gate\(metric_key='([^']*)'\)", message)
    return m.group(1) if m else None


def _search_roots(scan_result: Scan) -> list[str]:
    """Where to look for the collector: the scanned roots and their top directories."""
    return sorted({*scan_result.roots, *(r.split("/", 1)[0] for r in scan_result.roots)})


def _implicit(project: ProjectCI, scan_result: Scan, calls: list[FoundCall],
              candidates: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """``[[implicit]]`` entries for the directories the project's collector registers by
    location. A directory qualifies only if every marker in it is a CPU one (a GPU
    marker there would be an error) and it holds unregistered files to cover."""
    out: list[dict[str, Any]] = []
    notes: list[str] = []
    for rule in project.implicit:
        inside = [f for f in candidates if f.startswith(rule.path + "/")]
        gpu = sorted({c.file for c in calls if c.file.startswith(rule.path + "/") and c.backend != "cpu"})
        if not inside:
            continue
        if gpu or rule.backend != "cpu" or not _NAME.match(rule.suite):
            notes.append(f"{rule.path}: the collector registers it by location, but "
                         f"{'it holds GPU markers (' + ', '.join(gpu[:3]) + ')' if gpu else 'its rule is not a CPU one'}; "
                         "its files stay explicit")
            continue
        out.append({"path": rule.path, "backend": rule.backend, "suite": rule.suite,
                    "est_time": rule.est_time})
    return out, notes


_SHELL_END = re.compile(r"\s(?:&&|\|\||;|\|)\s")


def _pytest_dirs(line: str) -> list[str]:
    """Directory arguments of a ``pytest`` command line (options and expressions skipped)."""
    m = re.search(r"\bpytest\b(.*)", line)
    if not m:
        return []
    args = _SHELL_END.split(m.group(1))[0].split()
    out = []
    for word in args:
        word = word.strip("'\"").rstrip("/")
        if not word or word.startswith("-") or "$" in word or "{" in word or word.startswith("/"):
            continue
        if ".." not in word.split("/") and not word.endswith(".py") and "::" not in word:
            out.append(word.removeprefix("./"))
    return out


def _run_command_implicit(scan_result: Scan, ci: CIRead, calls: list[FoundCall],
                          candidates: list[str], implicit: list[dict[str, Any]],
                          notes: list[str]) -> list[dict[str, Any]]:
    """``[[implicit]]`` entries for directories a workflow job hands to ``pytest`` whole
    (``pytest tests/unit``) when no file in them carries a marker: the job is the stage
    (the stage it runs, or one named after the job)."""
    assert scan_result.repo is not None
    taken = {i["path"] for i in implicit}
    by_suite: dict[str, list[float]] = defaultdict(list)
    for c in calls:
        by_suite[c.suite].append(c.est_time)
    out: list[dict[str, Any]] = []
    for workflow, job, line in ci.test_commands:
        for d in _pytest_dirs(line):
            if d in taken or any(d.startswith(t + "/") or t.startswith(d + "/") for t in taken):
                continue
            if not (scan_result.repo / d).is_dir():
                continue
            inside = [f for f in candidates if f.startswith(d + "/")]
            if not inside or any(f in scan_result.marked or f in scan_result.registered_files
                                 for f in inside):
                continue
            stage = next((name for name, st in ci.stages.items()
                          if st.workflow == workflow and st.job == job), job)
            if not _NAME.match(stage) or any(c.suite == stage and c.backend != "cpu" for c in calls):
                notes.append(f"{workflow} job {job} runs pytest on {d}, but no CPU stage can be "
                             "named after it; its files stay in exclude")
                continue
            known = sorted(by_suite.get(stage, []))
            est = known[len(known) // 2] if known else 60.0
            out.append({"path": d, "backend": "cpu", "suite": stage, "est_time": est})
            taken.add(d)
            notes.append(f"{d}: every file runs in {workflow} job {job} ('{line[:80]}') without a "
                         f"marker; declared [[implicit]] in stage {stage}"
                         + ("" if known else " (est_time 60 s assumed until history exists)"))
    return out


def _labels(calls: list[FoundCall], project: ProjectCI, findings: list[Finding],
            notes: list[str]) -> dict[str, str]:
    """Every label the tree uses, described as the project's label registry describes it
    (its other labels too: a PR may already carry them)."""
    label_use = Counter(label for c in calls for label in set(c.labels))
    labels: dict[str, str] = {}
    for label, description in project.labels.items():
        if _NAME.match(label):
            labels[label] = description
    missing = []
    for label, _ in sorted(label_use.items()):
        if label in labels:
            continue
        if _NAME.match(label):
            labels[label] = ""
            missing.append(label)
        else:
            for c in calls:
                if label in c.labels:
                    findings.append(Finding(c.file, c.line, c.col, "error", "adopt-label",
                                            f"label {label!r} is not a valid label name "
                                            f"(letters, digits, '.', '_', '-')"))
    if project.labels_source:
        notes.append(f"label descriptions from {project.labels_source}")
        if missing:
            notes.append(f"label(s) used but not in {project.labels_source}: {', '.join(missing)} "
                         "(no description)")
    return labels


def _backends(calls: list[FoundCall], notes: list[str]) -> dict[str, dict[str, Any]]:
    """Custom backends, and built-ins whose label requirement the tree does not meet."""
    by_backend: dict[str, list[FoundCall]] = defaultdict(list)
    markers: dict[str, set[str]] = defaultdict(set)
    for c in calls:
        by_backend[c.backend].append(c)
        markers[c.backend].add(c.marker)
    backends: dict[str, dict[str, Any]] = {}
    for backend, bcalls in sorted(by_backend.items()):
        all_labelled = all(c.labels for c in bcalls)
        builtin = BUILTIN_BACKENDS.get(backend)
        if builtin is None:
            backends[backend] = {"markers": sorted(markers[backend]),
                                 "labels_required": all_labelled, "gpu": True}
            notes.append(f"backend {backend!r} is not built in; declared with marker(s) "
                         f"{', '.join(sorted(markers[backend]))}")
        elif builtin["labels_required"] and not all_labelled:
            backends[backend] = {"markers": list(builtin["markers"]), "labels_required": False,
                                 "gpu": builtin["gpu"]}
            notes.append(f"some {backend} registrations have no labels; labels are made optional "
                         f"for {backend} (label-less tests run on every trigger, as before)")
    return backends


def _stages(calls: list[FoundCall], implicit: list[dict[str, Any]], scan_result: Scan,
            ci: CIRead, findings: list[Finding], notes: list[str],
            ) -> tuple[dict[str, dict[str, Any]], dict[str, str], list[NotCarried]]:
    by_suite: dict[str, list[FoundCall]] = defaultdict(list)
    for c in calls:
        by_suite[c.suite].append(c)
    implicit_suites = {i["suite"]: i["backend"] for i in implicit}
    stages: dict[str, dict[str, Any]] = {}
    dormant: dict[str, str] = {}
    not_carried: list[NotCarried] = []
    have_ci = bool(ci.stages)
    for suite in sorted(set(by_suite) | set(implicit_suites)):
        scalls = by_suite.get(suite, [])
        if not _NAME.match(suite):
            for c in scalls:
                findings.append(Finding(c.file, c.line, c.col, "error", "adopt-suite",
                                        f"suite {suite!r} is not a valid stage name "
                                        "(letters, digits, '.', '_', '-')"))
            continue
        counts = Counter(c.backend for c in scalls)
        if suite in implicit_suites:
            counts[implicit_suites[suite]] += 1_000_000  # the location rule decides
        backend, _ = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        others = sorted(b for b in counts if b != backend)
        if others and suite in implicit_suites:
            for c in scalls:
                if c.backend != backend:
                    findings.append(Finding(c.file, c.line, c.col, "error", "adopt-suite-backend",
                                            f"suite {suite!r} is a {backend} stage registered "
                                            f"by location, but this one is {c.backend}"))
            others = []
        files = sorted({c.file for c in scalls if c.backend in (backend, *others)})
        gpu = any(b != "cpu" and BUILTIN_BACKENDS.get(b, {"gpu": True})["gpu"] for b in (backend, *others))
        stage: dict[str, Any] = {"backend": backend}
        from_ci = _job_for(ci.stages.get(suite), backend)
        stage["runs_on"] = (from_ci.runs_on if from_ci and from_ci.runs_on
                            else ["self-hosted", backend] if gpu else ["ubuntu-latest"])
        if from_ci and from_ci.container:
            stage["container"] = from_ci.container
            if from_ci.container_options or from_ci.container_volumes:
                stage["container"] = {"image": from_ci.container,
                                      **({"options": from_ci.container_options}
                                         if from_ci.container_options else {}),
                                      **({"volumes": from_ci.container_volumes}
                                         if from_ci.container_volumes else {})}
        if others:
            stage["variants"] = _backend_variants(suite, backend, others, stage["runs_on"],
                                                  ci.stages.get(suite), notes)
        elif from_ci and from_ci.runs_on_variants:
            stage["variants"] = _runner_variants(from_ci.runs_on_variants)
            notes.append(f"stage {suite}: {from_ci.workflow} job {from_ci.job} runs it on "
                         f"{len(from_ci.runs_on_variants)} runner classes (its matrix); one variant each")
        if from_ci:
            notes += from_ci.notes
        stage["command"] = _command(files if suite not in implicit_suites else [], scan_result)
        if from_ci is not None:
            stage["command"] = _runner_command(stage["command"], from_ci, suite, files, notes)
        if from_ci and from_ci.shards:
            stage["shards"] = from_ci.shards
        if gpu:
            stage["trusted_only"] = True
        if from_ci is None and have_ci:
            reason = ("no job of the existing CI runs this stage (adopted from "
                      f"{', '.join(ci.test_workflows)}); remove this line to schedule it")
            stage["disabled"] = reason
            dormant[suite] = reason
        if from_ci is not None:
            if from_ci.env:
                stage["env"] = dict(sorted(from_ci.env.items()))
            stage.update(_job_settings(from_ci, stage["command"], suite, notes))
            not_carried += _unmapped(from_ci)
        stages[suite] = stage
    for suite, stage in stages.items():
        from_ci = ci.stages.get(suite)
        if from_ci and from_ci.needs:
            needs = [n for n in from_ci.needs if n in stages]
            if needs:
                stage["needs"] = needs
    if any(s.get("trusted_only") for s in stages.values()):
        notes.append("GPU stages get trusted_only = true (fork PRs need a run-ci-* label)")
    guessed = [n for n, s in stages.items() if n not in ci.stages and "disabled" not in s
               and s["backend"] != "cpu"]
    if guessed:
        notes.append(f"no runner labels found in the workflows for {', '.join(guessed)}: "
                     "runs_on = [\"self-hosted\", <backend>]; edit it to your runner labels")
    return stages, dormant, not_carried


def _command(files: list[str], scan_result: Scan) -> str:
    """How the stage's files run: as scripts when every one of them has a ``__main__``
    block that calls something (the way a per-file runner starts them); ``auto`` (each
    file by its own style) when script-only files sit beside files without a
    ``__main__`` block, since one command cannot run both; else pytest."""
    if files and all(f in scan_result.python_style for f in files):
        return "python"
    if any(scan_result.python_style.get(f) for f in files):
        return "auto"
    return "pytest"


def _job_for(ci: CIStage | None, backend: str) -> CIStage | None:
    """The stage job that runs ``backend``'s registrations (by its runner's ``--hw``)."""
    if ci is None:
        return None
    for job in (ci, *ci.by_hw.values()):
        if job.hw is not None and ALIASES.get(job.hw.lower(), job.hw.lower()) == backend:
            return job
    return ci


def _backend_variants(suite: str, backend: str, others: list[str], runs_on: list[str],
                      ci: CIStage | None, notes: list[str]) -> dict[str, dict[str, Any]]:
    """One suite name under several backends (SGLang registers ``base-a-test-1-gpu-small``
    for CUDA and NPU; its runner selects by ``--hw`` and suite): one variant per backend,
    the explicit opt-in the configuration asks for, each with its job's runner labels."""
    out: dict[str, dict[str, Any]] = {backend: {"runs_on": runs_on}}
    for other in others:
        job = _job_for(ci, other) if ci is not None else None
        if job is not None and (job.hw is None or ALIASES.get(job.hw.lower(), job.hw.lower()) != other):
            job = None
        labels = job.runs_on if job is not None and job.runs_on else (
            ["self-hosted", other] if other != "cpu" else ["ubuntu-latest"])
        out[other] = {"backend": other, "runs_on": labels}
    notes.append(f"stage {suite}: registered for {', '.join([backend, *others])}; one variant per "
                 "backend (each runs only its backend's registrations)")
    return out


def _runner_variants(found: list[list[str]]) -> dict[str, dict[str, Any]]:
    """One variant per runner label list, named by the labels that set it apart."""
    out: dict[str, dict[str, Any]] = {}
    for i, labels in enumerate(found):
        own = [label for label in labels if not all(label in other for other in found)] or labels
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", "-".join(own)).strip("-._")[:40]
        if not name or not _NAME.match(name) or name in out:
            name = f"runner-{i + 1}"
        out[name] = {"runs_on": labels}
    return out


def _runner_command(command: str, ci: CIStage, name: str, files: list[str],
                    notes: list[str]) -> str:
    """The command the project's runner starts each file with (SGLang's ``python3 FILE -f``,
    read from its code), for a stage whose files all run as scripts; a stage with files
    that have no ``__main__`` block keeps ``auto`` (the runner's command would run none
    of their tests), and says so."""
    runner = ci.runner
    if runner is None or runner.file_command is None:
        if runner is not None and len(runner.file_commands_seen) > 1 and command == "python":
            notes.append(f"stage {name}: {runner.script} starts files in more than one way "
                         f"({', '.join(runner.file_commands_seen)}); command = \"python\" adopted")
        return command
    if command == "python":
        if runner.file_command != "python":
            notes.append(f"stage {name}: command = {runner.file_command!r}, as {runner.script} "
                         f"starts each file ({runner.file_command_at})")
        return runner.file_command
    if command == "auto" and runner.file_command != "python":
        notes.append(f"stage {name}: {runner.script} starts every file as "
                     f"{runner.file_command!r} ({runner.file_command_at}), but some of its "
                     f"{len(files)} files have no __main__ block (they would run no test that "
                     "way); command = \"auto\" runs each by its own style")
    return command


def _job_settings(ci: CIStage, command: str, name: str, notes: list[str]) -> dict[str, Any]:
    """The stage keys a stage job's settings map to (CI job and runner settings).

    The runner flags come from the job's command, else from the runner script's own
    defaults: the per-file timeout only for a stage whose files the runner starts one by
    one (``command = "python"``; a runner that hands a CPU stage to one pytest call has
    no per-file timeout), the retry settings when the job enables retries. As miles' and
    SGLang's ``run_suite.py`` do, ``--retry-timeout-increase`` with retries enabled raises
    the per-file timeout of every attempt.
    """
    out: dict[str, Any] = {}
    defaults = ci.runner_defaults
    used: list[str] = []

    def flag(key: str) -> int | None:
        if key in ci.retry:
            return ci.retry[key]
        if key in defaults and key not in ci.runner_dynamic:
            used.append(f"--{key.replace('_', '-')} {defaults[key]}")
            return defaults[key]
        return None

    file_timeout: float | None = ci.file_timeout
    if (file_timeout is None and command not in ("pytest", "auto") and "timeout_per_file" in defaults
            and "timeout_per_file" not in ci.runner_dynamic):
        file_timeout = defaults["timeout_per_file"]
        used.append(f"--timeout-per-file {file_timeout}")
    if ci.setup:
        out["setup"] = list(ci.setup)
    secrets = _carried_secrets(ci)
    if secrets:
        out["secrets"] = secrets
    if ci.fail_fast is not None:
        out["fail_fast"] = ci.fail_fast
    if ci.max_parallel is not None:
        out["max_parallel"] = min(256, ci.max_parallel)
    if ci.timeout_minutes is not None and float(ci.timeout_minutes).is_integer():
        out["job_timeout_minutes"] = max(1, min(4320, int(ci.timeout_minutes)))
    if ci.retry.get("enabled"):
        attempts = flag("max_attempts")
        out["max_attempts"] = min(10, max(1, attempts if attempts is not None else 2))
        wait = flag("retry_wait_seconds")
        if wait is not None:
            out["retry_wait"] = min(3600, wait)
        increase = flag("retry_timeout_increase") if file_timeout else None
        if increase and file_timeout:
            file_timeout += increase
    if file_timeout:
        out["file_timeout"] = file_timeout
    if used:
        verb = "is the default" if len(used) == 1 else "are the defaults"
        notes.append(f"stage {name}: {', '.join(used)} {verb} of {ci.runner_script}, which "
                     f"{ci.workflow} job {ci.job} runs without passing {'it' if len(used) == 1 else 'them'}")
    if ci.extra_args and command == "pytest":
        out["extra_args"] = list(ci.extra_args)
    return out


def _carried_secrets(ci: CIStage) -> list[str]:
    """Secrets a stage can name: exposed under their own name (``X: ${{ secrets.X }}``,
    or used only inside the job's steps), and not GitHub's own token."""
    return sorted(name for name in set(ci.secrets)
                  if not name.upper().startswith("GITHUB_")
                  and ci.secret_env.get(name, name) == name)


def _unmapped(stage: CIStage) -> list[NotCarried]:
    """Settings of a stage job that the configuration cannot hold as they are."""
    where = f"{stage.workflow} job {stage.job}"
    out = []
    if stage.timeout_minutes is not None and not float(stage.timeout_minutes).is_integer():
        out.append(NotCarried(where, f"timeout-minutes {stage.timeout_minutes:g}",
                              "job_timeout_minutes takes whole minutes"))
    if (stage.container_options or stage.container_volumes) and not stage.container:
        out.append(NotCarried(where, "container options and volumes",
                              "no literal container image to attach them to"))
    for name in sorted(set(stage.secrets) - set(_carried_secrets(stage))):
        why = ("GitHub's own token is given to every job; it is not a repository secret"
               if name.upper().startswith("GITHUB_") else
               f"exposed as {stage.secret_env[name]!r}; a stage's secrets are exposed under "
               "their own names" if stage.secret_env.get(name) else
               "used inside a larger expression; a stage's secrets are exposed as variables "
               "of their own names")
        out.append(NotCarried(where, f"secret {name}", why))
    if stage.retry.get("enabled") and "max_attempts" not in stage.retry \
            and "max_attempts" not in stage.runner_defaults:
        out.append(NotCarried(where, "--enable-retry without --max-attempts",
                              "the runner's own default number of attempts is not read; "
                              "max_attempts = 2 adopted (edit it if the runner uses another)"))
    if "retry_timeout_increase" in stage.retry and not stage.file_timeout \
            and "timeout_per_file" not in stage.runner_defaults:
        out.append(NotCarried(where, f"retry timeout increase {stage.retry['retry_timeout_increase']}s",
                              "it raises a fixed per-file timeout (--timeout-per-file), and "
                              "the job has none"))
    if stage.retry and not stage.retry.get("enabled"):
        out.append(NotCarried(where, "retry flags without --enable-retry",
                              "retries are off for this job; nothing adopted"))
    return out


DEFAULT_SCHEDULES = {"0 3 * * 1-6": "nightly", "0 3 * * 0": "weekly"}
_CADENCES = {"regular", "nightly", "weekly", "release"}


def _pr_gate_policy(stages: dict[str, dict[str, Any]], ci: CIRead, policy: dict[str, Any],
                    notes: list[str]) -> None:
    """The existing CI's pull-request gates (a job every stage job needs fails without a
    label, or on a draft) as the policy's ``required_label`` / ``drafts``, or as a stage's
    ``requires_labels`` when only some stages wait for a label."""
    jobs: list[tuple[str, bool, CIStage]] = []
    for name, stage in stages.items():
        job = ci.stages.get(name)
        if job is None or "disabled" in stage:
            continue
        for j in (job, *job.by_hw.values()):
            if {"pull_request", "pull_request_target"} & set(j.events):
                backend = ALIASES.get((j.hw or "").lower(), (j.hw or "").lower()) if j is not job \
                    else stage["backend"]
                gpu = backend != "cpu" and BUILTIN_BACKENDS.get(backend, {"gpu": True})["gpu"]
                jobs.append((name, gpu, j))
    if not jobs:
        return
    gated = [j for j in jobs if j[2].pr_labels_required]
    common = set.intersection(*(j[2].pr_labels_required for j in jobs))
    gpu_common = set.intersection(*(j[2].pr_labels_required for j in jobs if j[1])) \
        if any(j[1] for j in jobs) else set()
    label = None
    if common:
        label, scope = sorted(common)[0], "all"
    elif gpu_common and not any(j[2].pr_labels_required for j in jobs if not j[1]):
        label, scope = sorted(gpu_common)[0], "gpu"
    if label is not None:
        policy["required_label"] = label
        if scope == "all":
            policy["required_label_scope"] = "all"
        notes.append(f"every {'stage' if scope == 'all' else 'GPU stage'} job of the existing CI "
                     f"waits on a pull request for the label {label!r} (a job it needs fails "
                     f"without it): policy.required_label = {label!r}")
    else:
        for name in sorted({j[0] for j in gated}):
            mine = [j for j in jobs if j[0] == name]
            labels = set.intersection(*(j[2].pr_labels_required for j in mine))
            if labels:
                stages[name]["requires_labels"] = sorted(labels)
                notes.append(f"stage {name}: its job waits on a pull request for the label(s) "
                             f"{', '.join(sorted(labels))}: requires_labels")
    if all(j[2].draft_fails for j in jobs):
        policy["drafts"] = "skip"
    elif all(j[2].draft_fails for j in jobs if j[1]) and any(j[1] for j in jobs) \
            and not any(j[2].draft_fails for j in jobs if not j[1]):
        policy["drafts"] = "skip-gpu"
    elif any(j[2].draft_fails for j in jobs):
        notes.append("the existing CI fails the jobs of "
                     + ", ".join(sorted({j[0] for j in jobs if j[2].draft_fails}))
                     + " on a draft pull request but not the others; policy.drafts cannot say that "
                       "(it skips every stage or every GPU stage), so drafts run as usual")
    if "drafts" in policy:
        notes.append(f"the existing CI fails {'every' if policy['drafts'] == 'skip' else 'every GPU'} "
                     f"stage job of a draft pull request: policy.drafts = {policy['drafts']!r}")


def _exact_cadences(split: set[str]) -> dict[str, dict[str, Any]]:
    """The default cadences, written out (a ``cadences`` table replaces them all), with
    ``nightly_split = "exact"`` on those of ``split`` that admit nightly registrations."""
    from testfleet.config import CadenceConfig, PolicyConfig

    out: dict[str, dict[str, Any]] = {}
    for name, cadence in PolicyConfig().cadences.items():
        body = {k: v for k, v in cadence.model_dump().items()
                if v != CadenceConfig.model_fields[k].get_default(call_default_factory=True)}
        if cadence.admit_nightly and name in split:
            body["nightly_split"] = "exact"
        out[name] = body
    return out


def _schedules(project: ProjectCI, ci: CIRead, notes: list[str],
               exact: bool = False) -> dict[str, str]:
    """Crons of the workflows that run tests, each mapped to the cadence the project's
    schedule table gives it (else: a single day-of-week is weekly, otherwise nightly).
    With a runner that keeps nightly registrations apart, a cron of a workflow whose
    stage jobs never pass its nightly switch runs the per-commit suites: ``regular``."""
    crons = sorted(ci.crons)
    if not crons:
        if ci.test_workflows:
            notes.append("the workflows that run tests have no schedule; none adopted")
            return {}
        return dict(DEFAULT_SCHEDULES)
    out: dict[str, str] = {}
    for cron in crons:
        cadence = project.schedules.get(cron)
        jobs = [st for st in ci.stages.values() if st.workflow == ci.crons[cron]]
        if cadence not in _CADENCES and exact and jobs and not any(st.nightly_run for st in jobs):
            cadence = "regular"
        if cadence not in _CADENCES:
            dow = cron.split()[4]
            cadence = "weekly" if re.fullmatch(r"\d", dow) else "nightly"
        out[cron] = cadence
    source = f" (cadences from {project.schedules_source})" if project.schedules_source else ""
    notes.append("schedules from the workflows that run tests: "
                 + ", ".join(f"{c!r} -> {v}" for c, v in out.items()) + source)
    return out


def scaffold(root: Path) -> dict[str, Any]:
    """A starting configuration for a tree with no registrations yet: every test
    file under ``tests`` is a CPU test of one implicit stage."""
    test_root = "tests" if (root / "tests").is_dir() or not (root / "test").is_dir() else "test"
    return {
        "roots": [test_root],
        "pattern": "test_*.py",
        "implicit": [{"path": test_root, "backend": "cpu", "suite": "stage-cpu", "est_time": 30}],
        "labels": {},
        "stages": {"stage-cpu": {"backend": "cpu", "runs_on": ["ubuntu-latest"],
                                 "command": "pytest", "target_minutes": 15, "max_shards": 4}},
        "policy": {"schedules": dict(DEFAULT_SCHEDULES)},
    }


# -- TOML ---------------------------------------------------------------------

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: str) -> str:
    import json

    return k if _BARE.match(k) else json.dumps(k, ensure_ascii=False)


def _value(v: Any) -> str:
    import json

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v) if isinstance(v, float) and not v.is_integer() else str(int(v))
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _assign(k: str, v: Any) -> str:
    """``key = value``; a file list (``exclude``) or a long list goes one item per line,
    so a reviewer reads it and a diff adding one file touches one line."""
    line = f"{_key(k)} = {_value(v)}"
    if isinstance(v, (list, tuple)) and v and (k == "exclude" or len(line) > 100):
        return f"{_key(k)} = [\n" + "".join(f"    {_value(x)},\n" for x in v) + "]"
    return line


def render_toml(data: dict[str, Any], prefix: str = "", header_comment: str = "") -> str:
    """Write the configuration as TOML under ``prefix`` (``tool.testfleet`` or empty).

    Scalars and lists go in the first table; ``implicit`` is an array of tables;
    ``labels``, ``backends.<name>``, ``stages.<name>`` and ``policy`` get tables
    of their own so the file reads like the documented examples.
    """
    def header(*parts: str, array: bool = False) -> str:
        name = ".".join([*([prefix] if prefix else []), *(_key(p) for p in parts)])
        return f"[[{name}]]" if array else f"[{name}]"

    lines: list[str] = []
    # Under a prefix the comment goes inside the section's first table, so that
    # replacing the section later (init --rederive-config) replaces the comment too.
    if prefix:
        lines.append(header())
    if header_comment:
        lines += [f"# {line}" if line else "#" for line in header_comment.split("\n")]
    simple = {k: v for k, v in data.items() if not isinstance(v, dict) and k != "implicit"}
    lines += [_assign(k, v) for k, v in simple.items()]
    for entry in data.get("implicit", []):
        lines += ["", header("implicit", array=True)]
        lines += [_assign(k, v) for k, v in entry.items()]
    if "labels" in data:
        lines += ["", header("labels")]
        lines += [_assign(k, v) for k, v in data["labels"].items()]
    for name, body in data.get("markers", {}).items():
        lines += ["", header("markers", name)]
        lines += [_assign(k, v) for k, v in body.items()]
    if "check" in data:
        lines += ["", header("check")]
        lines += [_assign(k, v) for k, v in data["check"].items()]
    for section in ("backends", "stages"):
        for name, body in data.get(section, {}).items():
            lines += ["", header(section, name)]
            lines += [_assign(k, v) for k, v in body.items() if k != "variants"]
            for variant, vbody in body.get("variants", {}).items() if section == "stages" else []:
                lines += ["", header(section, name, "variants", variant)]
                lines += [_assign(k, v) for k, v in vbody.items()]
    if "policy" in data:
        lines += ["", header("policy")]
        lines += [_assign(k, v) for k, v in data["policy"].items() if k != "cadences"]
        for name, body in data["policy"].get("cadences", {}).items():
            lines += ["", header("policy", "cadences", name)]
            lines += [_assign(k, v) for k, v in body.items()]
    gate = data.get("gate", {})
    if any(not isinstance(v, dict) for v in gate.values()):
        lines += ["", header("gate")]
        lines += [_assign(k, v) for k, v in gate.items() if not isinstance(v, dict)]
    for metric, body in gate.get("defaults", {}).items():
        lines += ["", header("gate", "defaults", metric)]
        lines += [_assign(k, v) for k, v in body.items()]
    return "\n".join(lines).strip("\n") + "\n"
