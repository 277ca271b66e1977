"""Read a project's central suite lists as data: the runner script's
``suites = {"per-commit-1-gpu": [TestFile("test_x.py", 120), ...], ...}``.

Many GPU projects keep their suites in one dict literal (often several: ``suite_amd``,
``suite_xeon``, ...) in the script their workflows start with ``--suite NAME``, instead of
one registration line per test file. Adoption reads that script with :mod:`ast` and its
comments with :mod:`tokenize`, never importing it (importing it would run the project's
imports, and a plan job may hold secrets). What it gives is the input of
:mod:`testfleet.adopt.migrate`, which writes the in-file registrations the rest of
adoption reads.

The facts taken from the code, each with where it was seen:

- the entry class (``TestFile``) is found where the script imports it from (or in the
  script itself); its first field is the path, the field named like a time
  (``estimated_time``) the estimate, its default the estimate of an entry without one;
- paths resolve against the script's directory (SGLang's runner is started there, and its
  own sanity check globs ``Path(__file__).parent``);
- the estimate's unit is seconds when the code puts the field beside an elapsed time
  measured with ``time.perf_counter()`` / ``time.time()`` / ``time.monotonic()`` (SGLang's
  ``ci_utils`` prints ``{elapsed=:.0f}, {estimated_time=}``), or when the field's own
  comment says so; otherwise the caller must say (``--time-unit``);
- a commented-out entry (``# TestFile("x.py", 60),  # Disabled, see #123``) is kept as a
  disabled entry, its reason the comment after it, else the comment lines right above it;
- a suite named like ``__not_in_ci__`` lists files the project keeps out of CI on
  purpose: they are not suites.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from testfleet.adopt.roots import walk_python
from testfleet.findings import Finding

MAX_BYTES = 1 << 20
TIME_UNITS = ("seconds", "minutes")
_CANDIDATE = re.compile(r"""\b[A-Z]\w*\(\s*["'][^"'\n]+\.py["']""")
_LIST_KEY = re.compile(r"""^[ \t]*["'][^"'\n]+["'][ \t]*:[ \t]*\[""", re.MULTILINE)
_NOT_A_SUITE = re.compile(r"^__\w+__$")
_CLOCKS = {"perf_counter", "time", "monotonic", "perf_counter_ns"}


@dataclass(frozen=True)
class ListEntry:
    """One entry of a central list, in the terms of a registration."""

    suite: str
    file: str  # repo-relative, forward slashes
    listed: str  # the path as the list writes it
    est_time: float  # seconds
    line: int  # in the script
    disabled: str | None = None
    #: fields of the entry a registration has no place for, as ``name=value``
    extra: tuple[str, ...] = ()


@dataclass
class CentralList:
    """Every suite of one runner script, several dicts merged in the order written."""

    script: str
    base_dir: str
    entry_class: str
    dicts: list[str] = field(default_factory=list)
    #: suite -> the dict that lists it (``suite_amd``), a hint of its hardware
    dict_of: dict[str, str] = field(default_factory=dict)
    suites: dict[str, list[ListEntry]] = field(default_factory=dict)
    #: entries of lists the project keeps out of CI (``__not_in_ci__``)
    not_in_ci: list[ListEntry] = field(default_factory=list)
    time_unit: str = "seconds"
    unit_source: str = ""
    notes: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def entries(self) -> list[ListEntry]:
        return [e for entries in self.suites.values() for e in entries]


class CentralError(Exception):
    """The list cannot be read as data; the message names file and line."""


def find_central_lists(repo: Path) -> list[str]:
    """Repository-relative paths of the scripts that hold a central suite list.

    A cheap text test first (a capitalised call whose first argument is a ``.py``
    string), then the syntax tree: a module-level dict literal whose values are lists of
    calls of one class, at least one of them naming a file."""
    found: list[str] = []
    for rel, path in walk_python(repo, repo):
        try:
            data = path.read_bytes()[:MAX_BYTES]
        except OSError:
            continue
        text = data.decode("utf-8", "replace")
        if not _CANDIDATE.search(text) or not _LIST_KEY.search(text):
            continue
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if _suite_dicts(tree):
            found.append(rel)
    return found


def _entry_call(node: ast.expr) -> str | None:
    """The class name of a ``Name("x.py", ...)`` call, else None."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id[:1].isupper() and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return node.func.id
    return None


def _suite_dicts(tree: ast.Module) -> list[tuple[str, ast.Dict, str]]:
    """(variable, dict, entry class) of every module-level ``NAME = {str: [Class(...)]}``."""
    out: list[tuple[str, ast.Dict, str]] = []
    for stmt in tree.body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign):
            target, value = stmt.target, stmt.value
        if not isinstance(target, ast.Name) or not isinstance(value, ast.Dict) or not value.keys:
            continue
        if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in value.keys):
            continue
        if not all(isinstance(v, ast.List) for v in value.values):
            continue
        classes = {_entry_call(e) for v in value.values if isinstance(v, ast.List) for e in v.elts}
        classes.discard(None)
        if len(classes) == 1:
            out.append((target.id, value, next(c for c in classes if c)))
    return out


@dataclass(frozen=True)
class _EntryClass:
    fields: tuple[str, ...]
    time_field: str
    default_time: float | None
    where: str  # file:line of its definition, or "" when not found
    unit_comment: str | None  # "seconds" / "minutes" from the field's own comment


def _class_source(repo: Path, script: Path, tree: ast.Module, name: str) -> Path | None:
    """The file that defines the entry class: the script, or the project module it is
    imported from (``from a.b import C`` is ``a/b.py`` at the top or one directory down)."""
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == name:
            return script
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0 and \
                any(a.name == name and a.asname is None for a in stmt.names):
            rel = Path(*stmt.module.split("."))
            candidates = [repo / f"{rel}.py", repo / rel / "__init__.py"]
            candidates += [d / f"{rel}.py" for d in sorted(repo.iterdir())
                           if d.is_dir() and not d.name.startswith(".")]
            for c in candidates:
                if c.is_file() and not c.is_symlink():
                    return c
    return None


def _read_entry_class(repo: Path, script: Path, tree: ast.Module, name: str) -> _EntryClass:
    source = _class_source(repo, script, tree, name)
    if source is not None:
        try:
            data = source.read_bytes()[:MAX_BYTES]
            mod = ast.parse(data)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            mod = None
        lines = data.decode("utf-8", "replace").splitlines() if mod is not None else []
        for stmt in mod.body if mod is not None else []:
            if not (isinstance(stmt, ast.ClassDef) and stmt.name == name):
                continue
            fields: list[str] = []
            defaults: dict[str, ast.expr | None] = {}
            linenos: dict[str, int] = {}
            for item in stmt.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    fields.append(item.target.id)
                    defaults[item.target.id] = item.value
                    linenos[item.target.id] = item.lineno
            if len(fields) >= 2:
                time_field = next((f for f in fields[1:] if "time" in f or "est" in f), fields[1])
                d = defaults.get(time_field)
                default = (float(d.value) if isinstance(d, ast.Constant)
                           and isinstance(d.value, (int, float)) and not isinstance(d.value, bool)
                           else None)
                comment = lines[linenos[time_field] - 1].partition("#")[2].lower()
                unit = ("seconds" if re.search(r"\bsec", comment) else
                        "minutes" if re.search(r"\bmin", comment) else None)
                rel = source.relative_to(repo).as_posix()
                return _EntryClass(tuple(fields), time_field, default,
                                   f"{rel}:{stmt.lineno}", unit)
    # Not found: the shape every such list shares (name, estimated time), no default.
    return _EntryClass(("name", "estimated_time"), "estimated_time", None, "", None)


def _elapsed_names(tree: ast.AST) -> set[str]:
    """Names assigned ``clock() - x`` (``elapsed = time.perf_counter() - tic``): seconds."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp) and \
                isinstance(node.value.op, ast.Sub) and isinstance(node.value.left, ast.Call):
            func = node.value.left.func
            clock = func.attr if isinstance(func, ast.Attribute) else \
                func.id if isinstance(func, ast.Name) else ""
            if clock in _CLOCKS:
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any((isinstance(n, ast.Name) and n.id in names)
               or (isinstance(n, ast.Attribute) and n.attr in names) for n in ast.walk(node))


def _unit_from_code(repo: Path, files: list[Path], time_field: str) -> tuple[str, str] | None:
    """("seconds", "file:line") where the code sets the estimate beside a measured
    elapsed time (a comparison, an arithmetic, or one f-string printing both)."""
    for path in files:
        try:
            tree = ast.parse(path.read_bytes()[:MAX_BYTES])
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        elapsed = _elapsed_names(tree)
        if not elapsed:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.JoinedStr, ast.Compare, ast.BinOp)) and \
                    _mentions(node, {time_field}) and _mentions(node, elapsed):
                return "seconds", f"{path.relative_to(repo).as_posix()}:{node.lineno}"
    return None


def _comments(data: bytes) -> dict[int, str]:
    """line -> the comment text on it (after ``#``)."""
    out: dict[int, str] = {}
    try:
        for tok in tokenize.tokenize(io.BytesIO(data).readline):
            if tok.type == tokenize.COMMENT:
                out[tok.start[0]] = tok.string[1:].strip()
    except (tokenize.TokenError, SyntaxError):
        pass
    return out


def _commented_call(text: str, cls: str) -> tuple[ast.Call, str] | None:
    """A commented-out ``Cls(...)`` and the comment after it, or None."""
    if not text.startswith(f"{cls}("):
        return None
    depth = 0
    quote = ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                try:
                    call = ast.parse(text[:i + 1], mode="eval").body
                except SyntaxError:
                    return None
                rest = text[i + 1:].lstrip().removeprefix(",").strip()
                reason = rest[1:].strip() if rest.startswith("#") else ""
                return (call, reason) if isinstance(call, ast.Call) else None
    return None


def read_central_list(repo: Path, rel: str, time_unit: str | None = None) -> CentralList:
    """Every suite of the runner script ``rel``, statically.

    ``time_unit`` is the caller's answer when the code does not show the unit; a unit the
    code shows wins over it, and a disagreement is a note. Raises :class:`CentralError`
    when the unit is neither shown nor given."""
    script = repo / rel
    data = script.read_bytes()[:MAX_BYTES]
    try:
        tree = ast.parse(data)
    except SyntaxError as exc:
        raise CentralError(f"{rel}:{exc.lineno or 0}: cannot parse the suite list: "
                           f"{exc.msg}") from None
    dicts = _suite_dicts(tree)
    if not dicts:
        raise CentralError(f"{rel}: no suite list (a module-level dict of lists of "
                           "Entry(\"file.py\", time) calls)")
    cls = dicts[0][2]
    klass = _read_entry_class(repo, script, tree, cls)
    base = PurePosixPath(rel).parent
    out = CentralList(script=rel, base_dir=base.as_posix() or ".", entry_class=cls)
    unit_files = [script]
    if klass.where:
        unit_files.append(repo / klass.where.rsplit(":", 1)[0])
    shown = _unit_from_code(repo, unit_files, klass.time_field)
    if shown is None and klass.unit_comment:
        shown = (klass.unit_comment, f"{klass.where} (the field's comment)")
    if shown is not None:
        out.time_unit, where = shown
        out.unit_source = f"{klass.time_field} is in {out.time_unit}: {where}"
        if time_unit is not None and time_unit != out.time_unit:
            out.notes.append(f"--time-unit {time_unit} ignored: the code shows {out.time_unit} "
                             f"({where})")
    elif time_unit is not None:
        out.time_unit = time_unit
        out.unit_source = f"{klass.time_field} is in {time_unit}: as --time-unit says"
    else:
        raise CentralError(
            f"{rel}: the unit of {cls}.{klass.time_field} is not shown by the code (no "
            "comparison with a measured elapsed time, no comment on the field); "
            "pass --time-unit seconds or --time-unit minutes")
    scale = 60.0 if out.time_unit == "minutes" else 1.0
    comments = _comments(data)
    seen_suites: dict[str, str] = {}
    for var, node, entry_cls in dicts:
        out.dicts.append(var)
        if entry_cls != cls:
            out.findings.append(Finding(rel, node.lineno, node.col_offset + 1, "error",
                                        "adopt-central-list", f"{var} lists {entry_cls}(...) "
                                        f"entries, another class than {cls}: not read"))
            continue
        for key, value in zip(node.keys, node.values, strict=True):
            assert isinstance(key, ast.Constant) and isinstance(value, ast.List)
            suite = str(key.value)
            if suite in seen_suites:
                out.notes.append(f"{rel}:{key.lineno}: suite {suite!r} of {var} replaces the "
                                 f"one of {seen_suites[suite]} (as the runner's dict update does)")
                out.suites.pop(suite, None)
            seen_suites[suite] = var
            out.dict_of[suite] = var
            entries = _entries(rel, suite, value, comments, cls, klass, base, scale, out)
            if _NOT_A_SUITE.match(suite):
                out.not_in_ci += entries
            else:
                out.suites[suite] = entries
    return out


def _entries(rel: str, suite: str, node: ast.List, comments: dict[int, str], cls: str,
             klass: _EntryClass, base: PurePosixPath, scale: float,
             out: CentralList) -> list[ListEntry]:
    """The list's entries in line order, commented-out ones as disabled entries."""
    calls: list[tuple[int, ast.Call, str | None]] = []
    for elt in node.elts:
        if isinstance(elt, ast.Call) and _entry_call(elt) == cls:
            calls.append((elt.lineno, elt, None))
        else:
            out.findings.append(Finding(rel, elt.lineno, elt.col_offset + 1, "error",
                                        "adopt-central-list", f"suite {suite!r}: an entry that is "
                                        f"not a literal {cls}(...) call: not read"))
    lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
    pending: list[str] = []  # comment lines above the next commented-out entry
    for line in lines:
        text = comments.get(line)
        if text is None:
            if not any(c[0] == line for c in calls):
                continue
            pending = []
            continue
        parsed = _commented_call(text, cls)
        if parsed is None:
            if not any(c[0] == line for c in calls):
                pending.append(text)
            continue
        call, after = parsed
        reason = after or " ".join(pending) or f"commented out in {rel}:{line}"
        calls.append((line, call, reason))
        pending = []
    entries: list[ListEntry] = []
    seen: set[str] = set()
    for line, call, disabled in sorted(calls, key=lambda c: c[0]):
        entry = _entry(rel, suite, line, call, disabled, klass, base, scale, out)
        if entry is None:
            continue
        if entry.file in seen:
            out.notes.append(f"{rel}:{line}: {entry.listed} is listed twice in suite "
                             f"{suite!r}; one registration")
            continue
        seen.add(entry.file)
        entries.append(entry)
    return entries


def _entry(rel: str, suite: str, line: int, call: ast.Call, disabled: str | None,
           klass: _EntryClass, base: PurePosixPath, scale: float,
           out: CentralList) -> ListEntry | None:
    values: dict[str, object] = {}
    fields = klass.fields
    for i, arg in enumerate(call.args):
        name = fields[i] if i < len(fields) else f"argument {i + 1}"
        values[name] = arg
    for kw in call.keywords:
        values[kw.arg or "**"] = kw.value
    literal: dict[str, object] = {}
    for name, node in values.items():
        try:
            literal[name] = ast.literal_eval(node)  # type: ignore[arg-type]
        except (ValueError, TypeError, SyntaxError, RecursionError):
            out.findings.append(Finding(rel, line, 0, "error", "adopt-central-list",
                                        f"suite {suite!r}: {name} of this entry is not a literal: "
                                        "not read"))
            return None
    listed = str(literal.pop(fields[0]))
    est = literal.pop(klass.time_field, klass.default_time)
    if not isinstance(est, (int, float)) or isinstance(est, bool):
        out.findings.append(Finding(rel, line, 0, "error", "adopt-central-list",
                                    f"suite {suite!r}: {listed} has no estimate and "
                                    f"{klass.where or _describe(klass)} declares no default"))
        return None
    parts = PurePosixPath(base, listed).parts
    resolved: list[str] = []
    for part in parts:
        if part == "..":
            if resolved:
                resolved.pop()
        elif part != ".":
            resolved.append(part)
    extra = tuple(f"{k}={v!r}" for k, v in literal.items())
    return ListEntry(suite=suite, file="/".join(resolved), listed=listed,
                     est_time=float(est) * scale, line=line, disabled=disabled, extra=extra)


def _describe(klass: _EntryClass) -> str:
    """The entry class by its fields, when its definition was not found."""
    return f"the entry class ({klass.fields[0]}, {klass.time_field})"
