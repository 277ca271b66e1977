"""Scan a tree for its ``register_*_ci(...)`` calls and test files, for adoption.

It reads the same literal calls the registry reads -- top-level
``register_<backend>_ci(...)`` statements, whatever module the names were imported
from -- with the registry's own statement scanner, never importing a test file.
Everything the tree does that a configuration cannot make valid (a non-literal argument,
an aliased or attribute call, a file that does not parse) is a
:class:`~testfleet.findings.Finding`, never dropped silently, so ``testfleet init
--from-existing`` can say what still stands between the tree and a clean ``check``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testfleet.adopt.calls import (
    GATE,
    MARKER_SCAN,
    NEEDLES,
    FoundCall,
    backend_of,
    check_gate,
    parse_call,
)
from testfleet.adopt.project import defines_markers, find_collectors, read_project
from testfleet.adopt.roots import detect_roots, marked_runner_roots, walk_python
from testfleet.adopt.signatures import SignatureRead, find_marker_module, read_signatures
from testfleet.findings import Finding
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

_PYTEST_TESTS = re.compile(r"^(?:async[ \t]+)?def[ \t]+test|^class[ \t]+Test", re.MULTILINE)


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
    #: modules the tree imports its markers from (``from X import register_cuda_ci``), each
    #: with the number of registrations in the files that import it
    marker_modules: Counter[str] = field(default_factory=Counter)
    #: the marker calls found, parsed once the signatures are known
    raw_calls: list[tuple[str, MarkerCall]] = field(default_factory=list)

    @property
    def registered_files(self) -> set[str]:
        return {c.file for c in self.calls}


def search_roots(scan_result: Scan) -> list[str]:
    """Where to look for the collector: the scanned roots and their top directories."""
    return sorted({*scan_result.roots, *(r.split("/", 1)[0] for r in scan_result.roots)})


_UNREAD = {
    INDENTED_CALL: "called inside {detail}, not as a top-level statement",
    ATTRIBUTE_CALL: "called as an attribute ({detail})",
    ALIASED_IMPORT: "imported under another name ({detail})",
    EMBEDDED_CALL: "called inside a larger expression ({detail})",
}


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
        roots = project.discovery_roots or marked_runner_roots(root) or detected
    result = Scan(roots=roots, repo=root)
    for top in result.roots:
        start = root / top
        if not start.is_dir():
            result.findings.append(Finding(top, 0, 0, "warning", "adopt-root",
                                           "root directory does not exist"))
            continue
        for rel, path in walk_python(root, start):
            if path.is_symlink():
                result.findings.append(Finding(rel, 0, 0, "warning", "adopt-symlink",
                                               "symlinked file: testfleet never follows it"))
                continue
            result.test_files.append(rel)
            _scan_file(rel, path, result)
    result.test_files = sorted(set(result.test_files))
    _read_signatures(root, result)
    for rel, call in result.raw_calls:
        found = parse_call(rel, call, result.findings, result.signatures.get(call.name))
        if found is not None:
            result.calls.append(found)
    result.outside = sorted(rel for rel, _ in walk_python(root, root)
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
_IMPORT_FROM = re.compile(r"^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]*(?:\([^)]*?|[^\n(]*?)"
                          r"\bregister_[A-Za-z0-9]+_ci\b", re.MULTILINE)


def _read_signatures(root: Path, result: Scan) -> None:
    """The markers' signatures from the module that defines them: of the modules the
    tree imports its markers from, the one most registrations import, else a collector
    under the roots. A candidate counts only when it defines a marker at its top level
    with a real signature, so a test file's catch-all stand-in is never taken for it."""
    candidates = [find_marker_module(root, [m]) for m, _ in result.marker_modules.most_common(5)]
    candidates += find_collectors(root, search_roots(result))
    module = next((c for c in candidates if c is not None and defines_markers(c)), None)
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
            check_gate(rel, call, result.findings)
            continue
        result.raw_calls.append((rel, call))
    if fs.calls:
        text = data.decode("utf-8", errors="replace")
        # weighed by the registrations of the file: the real module is the one most
        # registrations come from, whatever a few files do when the import fails
        registrations = sum(1 for c in fs.calls if c.name != GATE)
        for module in {m.group(1) for m in _IMPORT_FROM.finditer(text)}:
            result.marker_modules[module] += registrations
    if not (fs.others and defines_markers(path)):  # the markers' own module is no finding
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
