"""The floors of ``src/testfleet`` (docs/architecture.md) hold: the import-linter contracts
in ``.importlinter`` pass on the tree, and an import that runs back up makes them fail.

``lint-imports`` runs in ``.ci/run`` too; running it here keeps the contract in every
local ``pytest``, and the second test shows the contract is not vacuous (a layers
contract whose layer names were all misspelt would pass everything).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT / ".importlinter"


def _lint_imports(src: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` in a fresh interpreter whose ``testfleet`` is the one under
    ``src`` (grimp finds the package through the import system), with no cache."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True))")
    return subprocess.run([sys.executable, "-c", code, str(CONTRACT)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_the_floors_hold() -> None:
    pytest.importorskip("importlinter")
    proc = _lint_imports(ROOT / "src", ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 kept, 0 broken" in proc.stdout


@pytest.mark.parametrize(("module", "upward"), [
    # a word reaching back up: the document floor importing the planner
    ("documents/vocabulary.py", "import testfleet.planning.model"),
    # an annotation import counts too: the configuration naming a feature's type
    ("config/root.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                       "    from testfleet.gate.spec import GateSpec"),
    # the report reading the history itself instead of getting the gathered value
    ("report/model.py", "import testfleet.store.core"),
])
def test_an_upward_import_breaks_the_contract(tmp_path: Path, module: str, upward: str) -> None:
    pytest.importorskip("importlinter")
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "testfleet", src / "testfleet",
                    ignore=shutil.ignore_patterns("__pycache__"))
    target = src / "testfleet" / module
    target.write_text(target.read_text(encoding="utf-8") + "\n" + upward + "\n", encoding="utf-8")
    proc = _lint_imports(src, tmp_path)
    assert proc.returncode != 0, proc.stdout
    assert "BROKEN" in proc.stdout


def test_report_reads_no_file_and_runs_no_git() -> None:
    """The import contract keeps ``report/`` off the store and the history queries; this
    keeps it off the disk and git as well (the application floor reads the plan file,
    ``pyproject.toml`` and ``git blame`` and hands the report values)."""
    import ast

    reads = {"read_text", "read_bytes", "open", "read_capped", "stat", "is_file", "exists"}
    modules = {"subprocess", "sqlite3", "shutil"}
    found = []
    for path in sorted((ROOT / "src" / "testfleet" / "report").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                found += [f"{path.name}: import {n}" for n in names if n.split(".")[0] in modules]
            elif isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in reads:
                    found.append(f"{path.name}:{node.lineno}: {name}()")
    assert not found, found
