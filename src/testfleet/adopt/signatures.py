"""How a project's own markers are called: the ``def register_<backend>_ci(...)`` of the
module that defines them, read with :mod:`ast` (never imported), in the terms of
``[tool.testfleet.markers.<marker>]``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testfleet.adopt.project import DEFINES_MARKER, MAX_BYTES, parse_module

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
    #: the project's own parser takes ``suite=""`` (its module never compares the suite
    #: with an empty string or tests it for truth): such a call is valid to it
    empty_suite: bool = False

    @property
    def is_default(self) -> bool:
        return (self.positional, self.keywords, self.suite_template, self.ignore) == \
            (("est_time", "suite"), (), None, ())

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
                    if DEFINES_MARKER.search(path.read_bytes()[:MAX_BYTES]):
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
    tree = parse_module(path)
    if tree is None:
        return {}
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and _MARKER_DEF.match(n.name)]
    extra_params = {a.arg for d in defs for a in [*d.args.posonlyargs, *d.args.args, *d.args.kwonlyargs]
                    if a.arg not in _BASE}
    templates = _suite_templates(tree, extra_params)
    empty_suite = not _rejects_empty_suite(tree)
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
        template = next((t for t in templates if template_fields(t) <= names
                         and all(types.get(f) in ("str", "int") for f in template_fields(t))), None)
        fields = template_fields(template) if template else set()
        keywords = tuple(sorted((f, str(types[f])) for f in fields))
        ignore = tuple(a.arg for a in params if a.arg not in _BASE and a.arg not in fields)
        positional: list[str] = []
        for a in positional_args:
            if a.arg in ignore:
                break  # a positional slot testfleet does not read ends the readable prefix
            positional.append(a.arg)
        out[d.name] = SignatureRead(tuple(positional), keywords, template, ignore, empty_suite)
    return out


def _rejects_empty_suite(tree: ast.Module) -> bool:
    """Does the module test a suite for emptiness anywhere (``suite == ""``,
    ``not suite``, ``len(suite)``)? Only a module that never does accepts an empty one."""

    def is_suite(node: ast.AST) -> bool:  # suite, effective_suite, self.suite; not suite_set
        name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
        return re.search(r"(?:^|_)suite$", str(name)) is not None

    for node in ast.walk(tree):
        sides = [node.left, *node.comparators] if isinstance(node, ast.Compare) else []
        if any(isinstance(s, ast.Constant) and s.value == "" for s in sides) \
                and any(is_suite(s) for s in sides):
            return True
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and is_suite(node.operand):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("len", "bool") and node.args and is_suite(node.args[0]):
            return True
    return False


def template_fields(template: str | None) -> set[str]:
    import string

    if template is None:
        return set()
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}
