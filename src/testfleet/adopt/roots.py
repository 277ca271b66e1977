"""Where a project's tests are: the directories its runner globs, else the ones holding
markers (read with :mod:`ast`; the runner is never run).
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

from testfleet.adopt.calls import MARKER_SCAN, NEEDLES
from testfleet.adopt.project import MAX_BYTES, parse_module
from testfleet.registry.scan import scan_source

_SKIP_DIRS = {
    ".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "env", "node_modules",
    "__pycache__", "build", "dist", "site-packages", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", ".testfleet", ".eggs",
}


def walk_python(root: Path, start: Path) -> list[tuple[str, Path]]:
    """(relative path, path) of every Python file under ``start``, sorted, skipping VCS,
    virtualenv and cache directories and never following a symlinked directory."""
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
    for rel, path in walk_python(root, root):
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


def marked_runner_roots(root: Path) -> list[str]:
    """The runner script's glob directories (see ``runner_roots``) that hold marker calls."""
    out = []
    for rel in runner_roots(root):
        for _, path in walk_python(root, root / rel):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if b"register_" in data and scan_source(data, MARKER_SCAN, NEEDLES).calls:
                out.append(rel)
                break
    return out


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
            text = path.read_bytes()[:MAX_BYTES].decode("utf-8", errors="replace")
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
        tree = parse_module(path)
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
