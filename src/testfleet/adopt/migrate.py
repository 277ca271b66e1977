"""Migrate a central suite list into in-file registrations, as a reviewable change.

Each listed test file gets one registration line per suite that lists it, written after
its imports in the marker vocabulary the project already has (its module that defines
``register_<backend>_ci``) or testfleet's own, with ``est_time`` in seconds, ``suite``, and
``disabled`` with the comment's reason for a commented-out entry. The central list itself
is left as it is: the project's runner keeps working while the change is reviewed, and
the two can be compared file by file.

This module only computes new file contents (pure: bytes in, bytes out); the command
writes them under the same lock and all-or-nothing in-place edit that ``testfleet
disable`` / ``enable`` use (:mod:`testfleet.results.inplace`).

A file is left alone, and named, when it does not parse, is not UTF-8, or already
registers in-file with other lines than the ones the list gives; a file that already holds
exactly the migrated lines is unchanged, so running the migration twice changes nothing.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from testfleet.adopt.central import CentralList, ListEntry
from testfleet.adopt.project import MAX_BYTES, parse_module
from testfleet.adopt.signatures import find_marker_module

_MARKER = re.compile(r"^register_([A-Za-z0-9]+)_ci$")
#: the marker testfleet itself exports per backend (``from testfleet import ...``)
_TESTFLEET_MARKERS = {"cpu": "register_cpu_ci", "cuda": "register_cuda_ci",
                      "rocm": "register_rocm_ci"}
_TESTFLEET_EXPORTS = {*_TESTFLEET_MARKERS.values(), "register_amd_ci"}
#: words of a suite's name, or of the dict that holds it, that name its hardware
_BACKEND_WORDS = (("rocm", ("amd", "rocm", "mi300", "mi325", "mi35x", "mi355")),
                  ("cpu", ("cpu", "xeon")),
                  ("npu", ("npu", "ascend")),
                  ("xpu", ("xpu",)))


@dataclass(frozen=True)
class Vocabulary:
    """The markers a migrated line may call: the project's (module, marker -> the
    parameters its ``def`` accepts by keyword, None for ``**kwargs``)."""

    module: str | None = None
    markers: Mapping[str, frozenset[str] | None] = field(default_factory=dict)

    def marker_for(self, backend: str, keywords: set[str]) -> tuple[str, str]:
        """(module, marker) for a line of ``backend`` passing ``keywords``: the project's
        marker when its ``def`` takes them all, else testfleet's own."""
        own = _TESTFLEET_MARKERS.get(backend, f"register_{backend}_ci")
        for name, params in sorted(self.markers.items()):
            m = _MARKER.match(name)
            if m is None or _backend_name(m.group(1)) != backend:
                continue
            if self.module is not None and (params is None or keywords <= params):
                return self.module, name
            if name in _TESTFLEET_EXPORTS:  # the project's word, from testfleet
                own = name
        return "testfleet", own


def _backend_name(word: str) -> str:
    word = word.lower()
    return "rocm" if word == "amd" else word


def read_vocabulary(repo: Path, modules: list[str]) -> Vocabulary:
    """The project's marker module (the one its existing registrations import, most used
    first) and the keywords each of its markers accepts, read with :mod:`ast`."""
    path = find_marker_module(repo, modules)
    if path is None:
        return Vocabulary()
    tree = parse_module(path)
    if tree is None:
        return Vocabulary()
    rel = path.relative_to(repo).with_suffix("")
    module = next((m for m in modules if rel.as_posix().endswith(m.replace(".", "/"))), None)
    markers: dict[str, frozenset[str] | None] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and _MARKER.match(stmt.name):
            a = stmt.args
            markers[stmt.name] = None if a.kwarg is not None else frozenset(
                p.arg for p in [*a.args, *a.kwonlyargs])
    return Vocabulary(module, markers)


_IMPORT_FROM = re.compile(rb"^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]*(?:\([^)]*?|[^\n(]*?)"
                          rb"\bregister_[A-Za-z0-9]+_ci\b", re.MULTILINE)


def marker_imports(repo: Path) -> list[str]:
    """The modules the tree's test files import markers from, most used first: where the
    migrated lines import them from too (a text pass; the files are not parsed)."""
    from collections import Counter

    from testfleet.adopt.roots import detect_roots, walk_python

    counts: Counter[str] = Counter()
    for top in detect_roots(repo):
        for _, path in walk_python(repo, repo / top):
            try:
                data = path.read_bytes()[:MAX_BYTES]
            except OSError:
                continue
            if b"register_" in data:
                counts.update(m.decode("ascii", "replace") for m in set(_IMPORT_FROM.findall(data)))
    return [m for m, _ in counts.most_common()]


def backend_of_suite(suite: str, dict_name: str = "") -> str:
    """The hardware a suite runs on, from the words of its name, else of the dict that
    holds it (``suite_amd``), else CUDA (the lists' main dict is a GPU project's)."""
    for text in (suite, dict_name):
        words = set(re.split(r"[^a-z0-9]+", text.lower()))
        for backend, names in _BACKEND_WORDS:
            if words & set(names) or any(w.startswith(names) for w in words if w):
                return backend
    return "cuda"


@dataclass(frozen=True)
class Wanted:
    """One registration line to write."""

    backend: str
    entry: ListEntry

    def keywords(self) -> set[str]:
        return {"est_time", "suite", *(["disabled"] if self.entry.disabled else [])}


def targets(lists: list[CentralList]) -> dict[str, list[Wanted]]:
    """file -> the lines it gets, in the order the lists give them."""
    out: dict[str, list[Wanted]] = defaultdict(list)
    for cl in lists:
        for suite, entries in cl.suites.items():
            backend = backend_of_suite(suite, cl.dict_of.get(suite, ""))
            for e in entries:
                out[e.file].append(Wanted(backend, e))
    return dict(out)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def line_for(marker: str, w: Wanted) -> str:
    e = w.entry
    parts = [f"est_time={_number(e.est_time)}", f"suite={json.dumps(e.suite, ensure_ascii=False)}"]
    if e.disabled:
        parts.append(f"disabled={json.dumps(e.disabled, ensure_ascii=False)}")
    return f"{marker}({', '.join(parts)})"


@dataclass
class FileResult:
    new: bytes | None = None  # None: unchanged or left alone
    why: str | None = None  # why it is left alone
    lines: int = 0


def _existing(tree: ast.Module) -> set[tuple[str, str]]:
    """(marker, suite) of every top-level marker call the file already holds."""
    out: set[tuple[str, str]] = set()
    for stmt in tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and \
                _MARKER.match(call.func.id):
            suite = next((k.value for k in call.keywords if k.arg == "suite"),
                         call.args[1] if len(call.args) > 1 else None)
            value = suite.value if isinstance(suite, ast.Constant) else None
            out.add((call.func.id, str(value)))
    return out


def _insert_at(tree: ast.Module) -> int:
    """The line after which the registrations go: the end of the last top-level import
    before the first definition, else the module docstring, else the top (0)."""
    at = 0
    for i, stmt in enumerate(tree.body):
        docstring = i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        if docstring or isinstance(stmt, (ast.Import, ast.ImportFrom)):
            at = stmt.end_lineno or stmt.lineno
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            break
    return at


def _imported(tree: ast.Module) -> set[str]:
    return {a.asname or a.name for stmt in tree.body if isinstance(stmt, ast.ImportFrom)
            for a in stmt.names}


def migrate_file(data: bytes, wanted: list[Wanted], vocab: Vocabulary) -> FileResult:
    """The file with its registration lines, or why it is left alone."""
    if len(data) > MAX_BYTES:
        return FileResult(why="larger than 1 MiB: not read")
    try:
        text = data.decode("utf-8")
        tree = ast.parse(text)
    except UnicodeDecodeError:
        return FileResult(why="not UTF-8: not edited")
    except SyntaxError as exc:
        return FileResult(why=f"does not parse (line {exc.lineno}: {exc.msg}): not edited")
    chosen = [(vocab.marker_for(w.backend, w.keywords()), w) for w in wanted]
    # One marker name comes from one module in a file: the project's only when every line
    # of that marker can call it.
    by_marker: dict[str, set[str]] = defaultdict(set)
    for (module, marker), _ in chosen:
        by_marker[marker].add(module)
    chosen = [((("testfleet" if len(by_marker[marker]) > 1 else module), marker), w)
              for (module, marker), w in chosen]
    existing = _existing(tree)
    wants = {(marker, w.entry.suite) for (_, marker), w in chosen}
    if existing:
        if wants <= existing:
            return FileResult()
        return FileResult(why="already registers in-file (" + ", ".join(
            f"{m} {s!r}" for m, s in sorted(existing)) + "): left alone")
    newline = "\r\n" if b"\r\n" in data[:4096] else "\n"
    imported = _imported(tree)
    imports: dict[str, list[str]] = defaultdict(list)
    for (module, marker), _ in chosen:
        if marker not in imported and marker not in imports[module]:
            imports[module].append(marker)
    block = [f"from {module} import {', '.join(sorted(names))}"
             for module, names in sorted(imports.items())]
    block.append("")
    block += [line_for(marker, w) for (_, marker), w in chosen]
    lines = text.splitlines(keepends=True)
    at = _insert_at(tree)
    if at and not lines[at - 1].endswith(("\n", "\r")):
        lines[at - 1] += newline
    head, tail = lines[:at], lines[at:]
    if at == 0:
        block = block[len(imports):] if not imports else block
        inserted = newline.join(block) + newline + newline
    else:
        inserted = newline.join(block) + newline
        if tail and tail[0].strip():
            inserted += newline
    new = "".join(head) + inserted + "".join(tail)
    return FileResult(new=new.encode("utf-8"), lines=len(chosen))


def unified_diff(rel: str, old: bytes, new: bytes) -> str:
    return "".join(difflib.unified_diff(
        old.decode("utf-8", "replace").splitlines(keepends=True),
        new.decode("utf-8", "replace").splitlines(keepends=True),
        fromfile=f"a/{rel}", tofile=f"b/{rel}"))


@dataclass
class Migration:
    """What a migration writes and what it leaves alone."""

    new: dict[str, bytes] = field(default_factory=dict)
    lines: int = 0
    unchanged: list[str] = field(default_factory=list)
    left_alone: list[tuple[str, str]] = field(default_factory=list)


def plan_migration(contents: Mapping[str, bytes | None], wanted: Mapping[str, list[Wanted]],
                   vocab: Vocabulary) -> Migration:
    """New contents of every listed file (``contents``: its bytes, None when missing)."""
    out = Migration()
    for rel in sorted(wanted):
        data = contents.get(rel)
        if data is None:
            out.left_alone.append((rel, "listed but not on disk: nothing to write into"))
            continue
        result = migrate_file(data, wanted[rel], vocab)
        if result.why is not None:
            out.left_alone.append((rel, result.why))
        elif result.new is None:
            out.unchanged.append(rel)
        else:
            out.new[rel] = result.new
            out.lines += result.lines
    return out
