""".ci/smoke.sh picks the interpreters of its multi-Python smoke pass correctly.

The pass itself (fresh venv, install, the example's check/list/plan/report) runs
in .ci/run after the test suite; here only its choice is checked, against
interpreters made for the test: supported minors only, one per minor, never the
default python3's own minor (the whole suite ran on it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _fake_python(path: Path, minor: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho {minor}\n", encoding="utf-8")
    path.chmod(0o755)


def test_smoke_lists_each_other_supported_minor_once(tmp_path: Path) -> None:
    default = f"{sys.version_info[0]}.{sys.version_info[1]}"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(sys.executable)
    pyenv = tmp_path / "pyenv"
    _fake_python(pyenv / "versions" / "3.9.18" / "bin" / "python", "3.9")     # unsupported
    # one supported minor twice (not the running one, which the smoke pass leaves out)
    twice = "3.12" if default == "3.10" else "3.10"
    _fake_python(pyenv / "versions" / f"{twice}.2" / "bin" / "python", twice)
    _fake_python(pyenv / "versions" / f"{twice}.13" / "bin" / "python", twice)   # same minor
    _fake_python(pyenv / "versions" / "3.17.0" / "bin" / "python", "3.17")
    _fake_python(pyenv / "versions" / f"{default}.99" / "bin" / "python", default)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}/usr/bin{os.pathsep}/bin",
           "PYENV_ROOT": str(pyenv)}
    proc = subprocess.run(["bash", str(REPO / ".ci" / "smoke.sh"), "--list"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    chosen = dict(line.split("=", 1) for line in proc.stdout.split())
    assert "3.9" not in chosen and default not in chosen
    assert chosen[twice].startswith(str(pyenv / "versions" / f"{twice}."))
    assert chosen["3.17"] == str(pyenv / "versions" / "3.17.0" / "bin" / "python")
    assert all(int(m.split(".")[1]) >= 10 for m in chosen)
