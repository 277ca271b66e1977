"""The published artefact, not the editable checkout: build the wheel, check its metadata
with twine, install it (not editable) into a fresh virtual environment and run the
example's check/list/plan with it, and ``python -m testfleet``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "fleet"


def _run(cmd: list[str], cwd: Path | None = None, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "TESTFLEET_", "BUILDKITE", "PYTHON", "VIRTUAL_ENV"))}
    env["NO_COLOR"] = "1"
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheels = list(out.glob("testfleet-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_metadata_and_contents(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(zf.read(meta_name).decode())
    assert "testfleet/py.typed" in names
    assert "testfleet/__main__.py" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    assert not any(n.startswith(("tests/", "examples/", "benchmarks/")) for n in names)
    assert meta["License-Expression"] == "Apache-2.0"
    classifiers = meta.get_all("Classifier") or []
    for minor in ("3.10", "3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {minor}" in classifiers
    assert meta["Requires-Python"] == ">=3.10"
    proc = _run([sys.executable, "-m", "twine", "check", "--strict", str(wheel)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_installed_wheel_runs_the_example(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(env_dir)
    py = env_dir / "bin" / "python"
    proc = _run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    project = tmp_path / "fleet"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".testfleet", "__pycache__"))
    exe = env_dir / "bin" / "testfleet"
    for args in (["check"], ["list", "--format", "json"], ["plan", "--event", "push"]):
        proc = _run([str(exe), *args], cwd=project)
        out = proc.stdout + proc.stderr
        assert "Traceback" not in out, out[-3000:]
        assert proc.returncode in (0, 1), out[-3000:]
    proc = _run([str(py), "-m", "testfleet", "--version"], cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0." in proc.stdout
    # the core install is what a pre-commit hook or a plan job gets: no runner extra
    proc = _run([str(py), "-c", "import importlib.util as u; "
                 "print([m for m in ('pytest', 'psutil') if u.find_spec(m)])"], cwd=tmp_path)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr
    proc = _run([str(exe), "run", "--stage", "stage-a-cpu", "--no-history"], cwd=project)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out, out[-3000:]
    assert "pip install 'testfleet[runner]'" in out and "psutil" in out, out
    # the module really is the installed wheel, not this checkout
    proc = _run([str(py), "-c", "import testfleet; print(testfleet.__file__)"], cwd=tmp_path)
    assert str(env_dir) in proc.stdout, proc.stdout
