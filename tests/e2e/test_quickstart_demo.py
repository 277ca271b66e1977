"""The README's first quick-start command must work on a fresh machine.

The test makes that machine: a brand-new virtual environment without system site
packages and without the test extras, then runs the command exactly as the README
writes it. (Run inside the test venv, it would never see a missing runtime
dependency such as pytest, which the example's stages need.) pip's download cache
keeps it to an install, not a download.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def quickstart_command() -> str:
    """The first ``bash`` block under "## Quick start" in the README."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1]
    block = re.search(r"```bash\n(.+?)\n```", section, re.DOTALL)
    assert block, "README: no bash block under '## Quick start'"
    return block.group(1).strip()


def _fresh_env(bindir: Path, demo_dir: Path) -> dict[str, str]:
    drop = ("GITHUB_", "TESTFLEET_", "BUILDKITE", "PYTHON", "VIRTUAL_ENV", "PIP_REQUIRE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(bindir.parent),
               TESTFLEET_DEMO_DIR=str(demo_dir), NO_COLOR="1", COLUMNS="160",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


@pytest.mark.timeout(1500)
def test_quickstart_command_works_in_a_brand_new_venv(tmp_path: Path) -> None:
    command = quickstart_command()
    assert command.startswith("python3 -m pip install"), command
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(env_dir)
    bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / "python3"
    assert python.exists()
    cfg = (env_dir / "pyvenv.cfg").read_text(encoding="utf-8")
    assert "include-system-site-packages = false" in cfg
    env = _fresh_env(bindir, tmp_path / "demo")
    proc = subprocess.run(["bash", "-c", command], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=1400, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    offline = "Could not find a version that satisfies" in out or "NewConnectionError" in out
    if proc.returncode and offline and os.environ.get("CI") != "true":
        pytest.skip("no package index reachable for the fresh install (CI=true fails instead)")
    assert proc.returncode == 0, out[-6000:]
    assert "Traceback" not in out
    # nothing but the project's runtime dependencies went in: no test extras
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], env=env,
                            capture_output=True, text=True, timeout=300).stdout.lower()
    assert "hypothesis" not in listed and "ruff" not in listed and "mypy" not in listed
    assert "pytest==" in listed
    assert sys.prefix != str(env_dir)

    assert "stage-c-4-gpu-mi300x" in out and "dormant" in out
    assert "INACTIVE" in out and "PASS" in out and "FAIL" in out
    work = tmp_path / "demo"
    assert (work / "plan.json").is_file() and (work / "report.html").is_file()
    junit = sorted(p.name for p in (work / "junit").glob("*.xml"))
    assert "stage-a-cpu-1-of-4.xml" in junit and len(junit) >= 5
    summary = out.rsplit("== Summary", 1)[-1]
    assert re.search(r"Ran here \(CPU\): 5 job\(s\) of the fork-PR plan, \d+ test file\(s\), "
                     r"\d+ JUnit testcase\(s\), 0 failed", summary), summary
    assert re.search(r"Planned, not run here \(needs GPU runners\): [1-9]\d* GPU job", summary)
    assert "stage-c-4-gpu-h200:" in summary and "stage-c-4-gpu-mi300x: dormant" in summary
    assert f"Report: {work}/report.html" in summary
