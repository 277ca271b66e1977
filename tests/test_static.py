"""Static checks as tests, so CI fails on a lint or typing regression like on any other.

Both tools read their settings from pyproject.toml (``[tool.ruff]``, ``[tool.mypy]``);
they run through ``sys.executable -m`` so the interpreter under test is the one checked.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=240)


def test_ruff_is_clean() -> None:
    r = _run("ruff", "check", "--no-cache", "src", "tests", "benchmarks")
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_is_clean() -> None:
    # files, strictness and per-module exceptions come from [tool.mypy] in pyproject.toml
    r = _run("mypy")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success: no issues found" in r.stdout, r.stdout


def _needs_311(pattern: str) -> bool:
    """Does a regex use syntax that Python 3.10's ``re`` rejects (possessive, atomic)?"""
    import re._parser as parser  # type: ignore[import-not-found]  # 3.11+, where this runs

    late = {parser.POSSESSIVE_REPEAT, parser.ATOMIC_GROUP}

    def walk(items: object) -> bool:
        for op, arg in items:  # type: ignore[attr-defined]
            if op in late:
                return True
            for sub in arg if isinstance(arg, (tuple, list)) else ():
                if isinstance(sub, parser.SubPattern) and walk(sub):
                    return True
                if isinstance(sub, (tuple, list)) and any(
                        isinstance(x, parser.SubPattern) and walk(x) for x in sub):
                    return True
        return False

    return walk(parser.parse(pattern))


@pytest.mark.skipif(sys.version_info < (3, 11), reason="on 3.10 importing the modules is the check")
def test_module_regexes_compile_on_python_310() -> None:
    """requires-python says 3.10: no module-level regex may use 3.11-only syntax."""
    import importlib
    import pkgutil
    import re

    import testfleet

    offenders = []
    for info in pkgutil.walk_packages(testfleet.__path__, "testfleet."):
        module = importlib.import_module(info.name)
        for attr, value in vars(module).items():
            if isinstance(value, re.Pattern) and isinstance(value.pattern, str) \
                    and _needs_311(value.pattern):
                offenders.append(f"{info.name}.{attr}")
    assert not offenders, f"3.11-only regex syntax (possessive/atomic) in: {offenders}"


def test_imports_flow_one_way() -> None:
    """No import cycle between testfleet's modules, counting imports inside functions (a
    lazy import hides a cycle from Python, not from the reader) and annotation imports
    under ``if TYPE_CHECKING:`` (a type named across floors is an arrow like any other).
    Between packages, the floors contract (``.importlinter``, tests/test_floors.py) holds
    the direction; this holds modules inside one package. grimp builds the graph, uncached
    (its cache is keyed so that an edited tree could be read stale)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("testfleet", exclude_type_checking_imports=False, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_tomllib_is_imported_only_on_python_311_and_later() -> None:
    """The suite runs on 3.10 too (requires-python), where ``tomllib`` does not exist: every
    import of it sits under ``if sys.version_info >= (3, 11):`` with ``tomli`` as the
    fallback. A bare import broke collection of a whole test module on 3.10 once."""
    import ast

    bare = []
    for path in sorted([*REPO.glob("src/**/*.py"), *REPO.glob("tests/**/*.py"),
                        *REPO.glob("benchmarks/**/*.py")]):
        if "fixtures" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        guarded = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and "version_info" in ast.unparse(node.test) for n in ast.walk(node)}
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if "tomllib" in names and id(node) not in guarded:
                bare.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not bare, bare
