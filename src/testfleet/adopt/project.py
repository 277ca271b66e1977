"""What a project's own CI modules say, read statically for adoption.

A tree that already registers tests usually has a collector -- the module that
defines the ``register_<backend>_ci`` markers and walks the tree -- plus a label
registry and a schedule table next to it. Adoption reads them with :mod:`ast`
only (never imports them: they are the project's code) for:

- the directories the collector scans (its discovery roots) and its file pattern;
- directories it registers by location (a synthesized registration with
  ``implicit=True`` or a fixed ``suite=``/``est_time=`` for paths that
  ``startswith`` a literal directory);
- label descriptions (a module-level ``{label: description}`` literal);
- the cadence of each cron (a module-level ``{cron: cadence}`` literal, the
  cadence possibly a module constant or the first item of a tuple).

Anything that is not a literal is simply not used; adoption then falls back to
what the tree and the workflows show.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFINES_MARKER = re.compile(rb"def[ \t]+register_[A-Za-z0-9]+_ci[ \t]*\(")
_CRON = re.compile(r"^\S+(?:\s+\S+){4}$")
MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class ImplicitRule:
    """A directory whose files the collector registers without a marker."""

    path: str
    suite: str
    backend: str
    est_time: float
    source: str  # module that says so


@dataclass
class ProjectCI:
    collector: str | None = None
    discovery_roots: list[str] = field(default_factory=list)
    pattern: str | None = None
    implicit: list[ImplicitRule] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    labels_source: str | None = None
    schedules: dict[str, str] = field(default_factory=dict)
    schedules_source: str | None = None
    gate_defaults: dict[str, dict[str, Any]] = field(default_factory=dict)
    gate_defaults_source: str | None = None


def parse_module(path: Path) -> ast.Module | None:
    try:
        data = path.read_bytes()[:MAX_BYTES]
        return ast.parse(data)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def module_constants(tree: ast.Module) -> dict[str, Any]:
    """Module-level ``NAME = <literal>`` assignments."""
    out: dict[str, Any] = {}
    for stmt in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        if value is None:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                try:
                    out[target.id] = ast.literal_eval(value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    out.setdefault(target.id + "\0node", value)
    return out


def find_collectors(repo: Path, roots: list[str]) -> list[Path]:
    """Modules under the test roots that define ``register_<backend>_ci`` functions."""
    found: list[Path] = []
    for top in roots:
        base = repo / top
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            if any(part.startswith(".") or part in ("node_modules", "__pycache__")
                   for part in path.relative_to(repo).parts):
                continue
            try:
                head = path.read_bytes()[:MAX_BYTES]
            except OSError:
                continue
            if DEFINES_MARKER.search(head) and defines_markers(path):
                found.append(path)
    return found


def defines_markers(path: Path) -> bool:
    """Does the module define a marker at its top level with a real signature? A test
    file's stand-in for an import that failed (``except ImportError: def
    register_cpu_ci(*args, **kwargs): pass``) is nested in a ``try`` and takes anything:
    it is not where the project's markers are defined."""
    tree = parse_module(path)
    return tree is not None and any(
        isinstance(node, ast.FunctionDef) and re.fullmatch(r"register_[A-Za-z0-9]+_ci", node.name)
        and node.args.vararg is None and node.args.kwarg is None for node in tree.body)


def read_project(repo: Path, roots: list[str], used_labels: set[str]) -> ProjectCI:
    """Read the collector and its neighbours; see the module docstring."""
    result = ProjectCI()
    collectors = find_collectors(repo, roots)
    if not collectors:
        return result
    collector = collectors[0]
    result.collector = collector.relative_to(repo).as_posix()
    tree = parse_module(collector)
    if tree is not None:
        _read_collector(repo, tree, result)
    _read_gate_defaults(repo, collector.parent, result)
    neighbours = sorted(collector.parent.glob("*.py"))
    best = 0
    for path in neighbours:
        module = parse_module(path)
        if module is None:
            continue
        rel = path.relative_to(repo).as_posix()
        constants = module_constants(module)
        for value in constants.values():
            if _is_label_table(value):
                score = len(set(value) & used_labels)
                if score > best:
                    best, result.labels, result.labels_source = score, dict(value), rel
        for name, node in constants.items():
            if name.endswith("\0node") and isinstance(node, ast.Dict):
                table = _schedule_table(node, constants)
                if table and not result.schedules:
                    result.schedules, result.schedules_source = table, rel
            elif isinstance(node, dict) and node and all(
                    isinstance(k, str) and _CRON.match(k) for k in node):
                table = {k: v for k, v in ((k, _cadence(v)) for k, v in node.items()) if v}
                if table and not result.schedules:
                    result.schedules, result.schedules_source = table, rel
    return result


def _read_gate_defaults(repo: Path, ci_dir: Path, result: ProjectCI) -> None:
    """``{metric_key: {"steps": ..., "constraint": {...}}}`` in the CI package: the
    defaults the project's own gate fills into a ``register_ci_gate`` that omits them."""
    for path in sorted(ci_dir.rglob("*.py")):
        try:
            if b"steps" not in path.read_bytes()[:MAX_BYTES]:
                continue
        except OSError:
            continue
        module = parse_module(path)
        if module is None:
            continue
        for value in module_constants(module).values():
            if (isinstance(value, dict) and value
                    and all(isinstance(k, str) and isinstance(v, dict) and v
                            and set(v) <= {"steps", "constraint"} for k, v in value.items())):
                result.gate_defaults = value
                result.gate_defaults_source = path.relative_to(repo).as_posix()
                return


def _is_label_table(value: Any) -> bool:
    return (isinstance(value, dict) and bool(value)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
            and not any(_CRON.match(k) for k in value))


def _cadence(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], str):
        return value[0]
    return None


def _schedule_table(node: ast.Dict, constants: dict[str, Any]) -> dict[str, str]:
    """``{"0 15 * * 0-5": (NIGHTLY, ()), ...}`` with NIGHTLY a module string constant."""

    def resolve(expr: ast.expr | None) -> str | None:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return expr.value
        if isinstance(expr, ast.Name) and isinstance(constants.get(expr.id), str):
            return str(constants[expr.id])
        if isinstance(expr, (ast.Tuple, ast.List)) and expr.elts:
            return resolve(expr.elts[0])
        return None

    out: dict[str, str] = {}
    for key, value in zip(node.keys, node.values, strict=False):
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and _CRON.match(key.value):
            cadence = resolve(value)
            if cadence:
                out[" ".join(key.value.split())] = cadence
    return out


def _read_collector(repo: Path, tree: ast.Module, result: ProjectCI) -> None:
    constants = module_constants(tree)
    for name, value in constants.items():
        if (isinstance(value, (tuple, list)) and value and all(isinstance(v, str) for v in value)
                and all((repo / v.strip("/")).is_dir() for v in value)
                and re.search(r"ROOT|DIR|PATH", name, re.IGNORECASE)):
            result.discovery_roots = [v.strip("/") for v in value]
            break
    for node in ast.walk(tree):
        if isinstance(node, (ast.Constant, ast.JoinedStr)):
            text = _string_of(node)
            if text and "*" in text and text.endswith(".py") and result.pattern is None:
                result.pattern = text.rsplit("/", 1)[-1]
    dirs = sorted({arg for arg in _startswith_args(tree) if (repo / arg.strip("/")).is_dir()})
    synthesized = _synthesized(tree)
    if len(synthesized) == 1 and dirs:
        suite, backend, est = synthesized[0]
        for d in dirs:
            result.implicit.append(ImplicitRule(d.strip("/"), suite, backend, est,
                                                result.collector or ""))


def _string_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
        return "".join(parts) if parts else None
    return None


def _startswith_args(tree: ast.Module) -> list[str]:
    out: list[str] = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "startswith" and node.args):
            arg = node.args[0]
            elts = arg.elts if isinstance(arg, ast.Tuple) else [arg]
            out += [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return out


def _synthesized(tree: ast.Module) -> list[tuple[str, str, float]]:
    """Registrations the collector makes up itself: calls with ``implicit=True`` (or, failing
    that, with literal ``suite=`` and ``est_time=`` keywords) that are not markers."""
    found: list[tuple[str, str, float]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if fnmatch.fnmatch(str(name), "register_*_ci"):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        implicit = kw.get("implicit")
        if not (isinstance(implicit, ast.Constant) and implicit.value is True):
            continue
        suite, est = kw.get("suite"), kw.get("est_time")
        if not (isinstance(suite, ast.Constant) and isinstance(suite.value, str)):
            continue
        seconds = est.value if isinstance(est, ast.Constant) and isinstance(est.value, (int, float)) else 1.0
        backend_node = kw.get("backend")
        backend = "cpu"
        if isinstance(backend_node, ast.Attribute):
            backend = backend_node.attr.lower()
        elif isinstance(backend_node, ast.Constant) and isinstance(backend_node.value, str):
            backend = backend_node.value.lower()
        found.append((suite.value, backend, float(seconds)))
    return found
