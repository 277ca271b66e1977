"""Queue mode refuses what it cannot do safely, before anything runs (exit 2, no
traceback): ``--queue`` on a lane in shard mode, a plan that says fork and queue at once,
no PostgreSQL database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from testfleet.planning.model import content_digest

CONFIG = """\
roots = ["tests"]

[stages.q]
backend = "cpu"
command = "python"
shards = 2
execution = "queue"

[stages.s]
backend = "cpu"
command = "python"
"""


def _project(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "tests").mkdir()
    (tmp_path / "testfleet.toml").write_text(CONFIG)
    for suite in ("q", "s"):
        (tmp_path / "tests" / f"test_{suite}.py").write_text(
            f'from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=1, suite="{suite}")\n')
    plan = tmp_path / "plan.json"
    made = _tf(tmp_path, "plan", "--format", "json", "-o", str(plan))
    assert made.returncode == 0, made.stderr
    return tmp_path, plan


def _tf(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    return subprocess.run([sys.executable, "-m", "testfleet", "-C", str(root), *args],
                          capture_output=True, text=True, timeout=120, env=env)


def test_queue_on_a_shard_lane_is_refused(tmp_path: Path) -> None:
    root, plan = _project(tmp_path)
    res = _tf(root, "run", "--plan", str(plan), "--stage", "s", "--queue")
    assert res.returncode == 2 and "runs in shard mode" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def test_no_database_is_refused_with_what_to_do(tmp_path: Path) -> None:
    root, plan = _project(tmp_path)
    res = _tf(root, "run", "--plan", str(plan), "--stage", "q", "--queue")
    assert res.returncode == 2, res.stderr
    assert "no database is configured" in res.stderr and "execution = \"shards\"" in res.stderr
    assert not (root / ".testfleet" / "history.db").exists()  # refused before anything
    status = _tf(root, "queue", "status", "--plan", str(plan))
    assert status.returncode == 2 and "SQLite" in status.stderr


def test_a_plan_that_says_fork_and_queue_is_refused(tmp_path: Path) -> None:
    root, plan = _project(tmp_path)
    doc = json.loads(plan.read_text())
    doc["policy"]["fork"] = True  # edited, and sealed again as whoever edits it can
    doc["digest"] = content_digest({k: v for k, v in doc.items() if k != "digest"})
    plan.write_text(json.dumps(doc))
    job = next(j["id"] for j in doc["jobs"] if j.get("queue"))
    res = _tf(root, "run", "--plan", str(plan), "--job", job, "--database",
              "postgresql://nobody@127.0.0.1:1/none")
    assert res.returncode == 2, res.stderr
    assert "a fork's pull request never touches the shared database" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
