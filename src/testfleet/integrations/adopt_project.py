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

_DEFINES_MARKER = re.compile(rb"def[ \t]+register_[A-Za-z0-9]+_ci[ \t]*\(")
_CRON = re.compile(r"^\S+(?:\s+\S+){4}$")
_MAX_BYTES = 1 << 20


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


def _parse(path: Path) -> ast.Module | None:
    try:
        data = path.read_bytes()[:_MAX_BYTES]
        return ast.parse(data)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _module_constants(tree: ast.Module) -> dict[str, Any]:
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
                head = path.read_bytes()[:_MAX_BYTES]
            except OSError:
                continue
            if _DEFINES_MARKER.search(head):
                found.append(path)
    return found


def read_project(repo: Path, roots: list[str], used_labels: set[str]) -> ProjectCI:
    """Read the collector and its neighbours; see the module docstring."""
    result = ProjectCI()
    collectors = find_collectors(repo, roots)
    if not collectors:
        return result
    collector = collectors[0]
    result.collector = collector.relative_to(repo).as_posix()
    tree = _parse(collector)
    if tree is not None:
        _read_collector(repo, tree, result)
    _read_gate_defaults(repo, collector.parent, result)
    neighbours = sorted(collector.parent.glob("*.py"))
    best = 0
    for path in neighbours:
        module = _parse(path)
        if module is None:
            continue
        rel = path.relative_to(repo).as_posix()
        constants = _module_constants(module)
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
            if b"steps" not in path.read_bytes()[:_MAX_BYTES]:
                continue
        except OSError:
            continue
        module = _parse(path)
        if module is None:
            continue
        for value in _module_constants(module).values():
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
    constants = _module_constants(tree)
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


# -- marker signatures: how the project's own markers are called ---------------------

#: The keywords testfleet's markers understand (``testfleet.config.BASE_KEYWORDS``).
_BASE = ("est_time", "suite", "labels", "nightly", "disabled")
_MARKER_DEF = re.compile(r"^register_[A-Za-z0-9]+_ci$")


@dataclass(frozen=True)
class SignatureRead:
    """A project's marker as its ``def`` declares it, in the terms of
    ``[tool.testfleet.markers.<marker>]``: the positional order, the keywords that
    compose the suite (with their types), the suite template and every other extra
    keyword, which is accepted but not read (``ignore``)."""

    positional: tuple[str, ...] = ("est_time", "suite")
    keywords: tuple[tuple[str, str], ...] = ()
    suite_template: str | None = None
    ignore: tuple[str, ...] = ()

    @property
    def is_default(self) -> bool:
        return self == SignatureRead()

    def table(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.positional != ("est_time", "suite"):
            out["positional"] = list(self.positional)
        if self.keywords:
            out["keywords"] = dict(self.keywords)
        if self.suite_template is not None:
            out["suite_template"] = self.suite_template
        if self.ignore:
            out["ignore"] = list(self.ignore)
        return out


def find_marker_module(repo: Path, modules: list[str]) -> Path | None:
    """The file a ``from <module> import register_*_ci`` names: ``<module>.py`` at the
    repository's top or one directory down (``src/``, ``python/``), never searched
    deeper (adoption stays bounded on a large tree)."""
    for module in modules:
        if not re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", module):
            continue
        rel = module.replace(".", "/") + ".py"
        tops = [repo, *sorted(p for p in repo.iterdir() if p.is_dir() and not p.is_symlink()
                              and not p.name.startswith("."))]
        for top in tops:
            path = top / rel
            if path.is_file() and repo.resolve() in path.resolve().parents:
                try:
                    if _DEFINES_MARKER.search(path.read_bytes()[:_MAX_BYTES]):
                        return path
                except OSError:
                    continue
    return None


def _type_of(annotation: ast.expr | None) -> str | None:
    """``str``, ``Optional[int]``, ``float | None``, ``List[str]`` ... as a keyword type."""
    if annotation is None:
        return None
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        sides = [annotation.left, annotation.right]
        rest = [s for s in sides if not (isinstance(s, ast.Constant) and s.value is None)]
        return _type_of(rest[0]) if len(rest) == 1 else None
    if isinstance(annotation, ast.Subscript):
        outer = annotation.value
        name = outer.id if isinstance(outer, ast.Name) else getattr(outer, "attr", "")
        if name == "Optional":
            return _type_of(annotation.slice)
        if name in ("List", "list", "Sequence", "Tuple", "tuple") and _type_of(annotation.slice) == "str":
            return "list[str]"
        return None
    if isinstance(annotation, ast.Name):
        return {"str": "str", "int": "int", "float": "number", "bool": "bool"}.get(annotation.id)
    return None


def _suite_templates(tree: ast.Module, params: set[str]) -> list[str]:
    """f-strings made only of the markers' own parameters and literal text
    (``f"{self.stage}-test-{self.runner_config}"``), preferring those inside a
    function whose name says ``suite``."""
    found: list[tuple[bool, str]] = []

    def visit(node: ast.AST, in_suite: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_suite = in_suite or "suite" in node.name
        if isinstance(node, ast.JoinedStr):
            parts: list[str] = []
            fields = 0
            for value in node.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    parts.append(value.value.replace("{", "{{").replace("}", "}}"))
                    continue
                inner = value.value if isinstance(value, ast.FormattedValue) else None
                name = (inner.attr if isinstance(inner, ast.Attribute)
                        else inner.id if isinstance(inner, ast.Name) else None)
                if (name is None or name not in params or not isinstance(value, ast.FormattedValue)
                        or value.conversion != -1 or value.format_spec is not None):
                    return
                parts.append("{" + name + "}")
                fields += 1
            if fields and any(isinstance(v, ast.Constant) for v in node.values):
                found.append((in_suite, "".join(parts)))
            return
        for child in ast.iter_child_nodes(node):
            visit(child, in_suite)

    visit(tree, False)
    preferred = sorted({t for s, t in found if s})
    return preferred or sorted({t for _, t in found})


def read_signatures(path: Path) -> dict[str, SignatureRead]:
    """Marker name -> its signature, from the ``def register_<backend>_ci(...)`` of the
    module that defines the markers (read with :mod:`ast`, never imported)."""
    tree = _parse(path)
    if tree is None:
        return {}
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and _MARKER_DEF.match(n.name)]
    extra_params = {a.arg for d in defs for a in [*d.args.posonlyargs, *d.args.args, *d.args.kwonlyargs]
                    if a.arg not in _BASE}
    templates = _suite_templates(tree, extra_params)
    out: dict[str, SignatureRead] = {}
    for d in defs:
        if d.args.vararg or d.args.kwarg:
            continue  # a catch-all stand-in (``def register_cuda_ci(*a, **k)``) says nothing
        positional_args = [*d.args.posonlyargs, *d.args.args]
        params = positional_args + d.args.kwonlyargs
        # a field the f-string formats without an annotation is taken as a string
        types = {a.arg: _type_of(a.annotation) or ("str" if a.annotation is None else None)
                 for a in params}
        names = {a.arg for a in params}
        template = next((t for t in templates if _template_fields(t) <= names
                         and all(types.get(f) in ("str", "int") for f in _template_fields(t))), None)
        fields = _template_fields(template) if template else set()
        keywords = tuple(sorted((f, str(types[f])) for f in fields))
        ignore = tuple(a.arg for a in params if a.arg not in _BASE and a.arg not in fields)
        positional: list[str] = []
        for a in positional_args:
            if a.arg in ignore:
                break  # a positional slot testfleet does not read ends the readable prefix
            positional.append(a.arg)
        out[d.name] = SignatureRead(tuple(positional), keywords, template, ignore)
    return out


def _template_fields(template: str | None) -> set[str]:
    import string

    if template is None:
        return set()
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


# -- discovery roots from the runner script a workflow starts --------------------------

_WORKFLOW_SCRIPT = re.compile(r"\bpython3?(?:[ \t]+-[A-Za-z]+)*[ \t]+([\w./-]+\.py)(?![\w/])")
_WORKFLOW_CD = re.compile(r"\bcd[ \t]+([\w./-]+)")


def runner_roots(repo: Path) -> list[str]:
    """Directories the project's runner globs for its test files, when a workflow starts a
    script (``cd test && python3 run_suite.py``) that does
    ``glob.glob(os.path.join(script_dir, "registered", "**", "*.py"), recursive=True)``
    (``script_dir`` the script's own directory) or globs a literal ``"dir/**/*.py"``.
    Read with ast; the script is never run."""
    wf_dir = repo / ".github" / "workflows"
    if not wf_dir.is_dir():
        return []
    scripts: list[str] = []
    for path in sorted(wf_dir.glob("*.y*ml"))[:200]:
        try:
            text = path.read_bytes()[:_MAX_BYTES].decode("utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            for m in _WORKFLOW_SCRIPT.finditer(line):
                rel = m.group(1).removeprefix("./")
                for d in [""] + [c.strip("/") for c in _WORKFLOW_CD.findall(text)]:
                    candidate = f"{d}/{rel}" if d else rel
                    if candidate not in scripts and (repo / candidate).is_file():
                        scripts.append(candidate)
    roots: list[str] = []
    for script in scripts[:20]:
        path = repo / script
        if repo.resolve() not in path.resolve().parents:
            continue
        tree = _parse(path)
        if tree is None:
            continue
        base = path.parent.relative_to(repo).as_posix()
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("glob", "iglob")
                    and node.args):
                continue
            found = _glob_dir(node.args[0], base)
            if found and (repo / found).is_dir() and found not in roots:
                roots.append(found)
    return roots


def _glob_dir(arg: ast.expr, base: str) -> str | None:
    """The directory part before ``**`` of a glob argument: ``os.path.join(<script dir>,
    "registered", "**", "*.py")`` (relative to the script) or ``"tests/**/*.py"``."""
    parts: list[str]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        parts, relative_to = arg.value.split("/"), ""
    elif (isinstance(arg, ast.Call) and getattr(arg.func, "attr", "") == "join" and arg.args
          and isinstance(arg.args[0], ast.Name)
          and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in arg.args[1:])):
        parts = [str(a.value) for a in arg.args[1:] if isinstance(a, ast.Constant)]
        relative_to = base
    else:
        return None
    if "**" not in parts or not parts[-1].endswith(".py"):
        return None
    head = [p for p in parts[:parts.index("**")] if p not in ("", ".")]
    if not head or any(p == ".." or any(c in p for c in "*?[") for p in head):
        return None
    return "/".join([relative_to, *head] if relative_to else head)
