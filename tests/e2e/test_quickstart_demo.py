"""The README's first quick-start command must keep working: run the example's demo.

This is the main job a new user sees; it chains check, list, plan, every job of the
plan, the metric gate's cold start / pass / caught drift, history and the report.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "fleet" / "demo.sh"


def test_quickstart_demo_runs_end_to_end(tmp_path: Path) -> None:
    scripts = Path(sys.executable).parent
    testfleet = shutil.which("testfleet", path=f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}")
    assert testfleet, "the testfleet console script must be installed (pip install -e .)"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "TESTFLEET_", "BUILDKITE"))}
    env.update(PATH=f"{Path(testfleet).parent}{os.pathsep}{env.get('PATH', '')}",
               TESTFLEET_DEMO_DIR=str(tmp_path / "demo"), NO_COLOR="1", COLUMNS="160")
    proc = subprocess.run(["bash", str(DEMO)], env=env, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "Traceback" not in out
    assert "stage-c-4-gpu-mi300x" in out and "dormant" in out
    assert "INACTIVE" in out and "PASS" in out and "FAIL" in out
    work = tmp_path / "demo"
    assert (work / "plan.json").is_file() and (work / "report.html").is_file()
    junit = sorted(p.name for p in (work / "junit").glob("*.xml"))
    assert "stage-a-cpu-1-of-4.xml" in junit and len(junit) >= 5
