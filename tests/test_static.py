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
