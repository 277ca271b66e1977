"""``plan --runners FILE`` (#41): GitHub's self-hosted runners document, parsed with
errors that say where; a lane no online runner serves is held back, and the plan says
whether availability was checked at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testfleet.breaker.runners import RunnersError, parse_runners


def doc(*runners: tuple[str, list[str]]) -> str:
    return json.dumps({"total_count": len(runners), "runners": [
        {"id": i, "name": f"r{i}", "os": "Linux", "status": status, "busy": False,
         "labels": [{"id": j, "name": n, "type": "custom"} for j, n in enumerate(labels)]}
        for i, (status, labels) in enumerate(runners)]})


def test_only_online_runners_serve_and_labels_match_case_insensitively() -> None:
    inv = parse_runners(doc(("online", ["self-hosted", "Linux", "h200"]),
                            ("offline", ["self-hosted", "mi300x"])), "f.json")
    assert inv.total == 2 and len(inv.online) == 1
    assert inv.serves(["self-hosted", "H200"]) and not inv.serves(["self-hosted", "mi300x"])


@pytest.mark.parametrize(("text", "where"), [
    ("{", "not JSON (line 1"),
    ("[]", "want an object with a 'runners' list"),
    ('{"runners": [1]}', "runners[0]: want an object"),
    ('{"runners": [{"status": 1, "labels": []}]}', "runners[0].status"),
    ('{"runners": [{"status": "online", "labels": {}}]}', "runners[0].labels"),
    ('{"runners": [{"status": "online", "labels": [{"name": ""}]}]}', "runners[0].labels[0].name"),
    ("[" * 100000 + "]" * 100000, "f.json"),
])
def test_a_hostile_document_is_an_error_naming_where(text: str, where: str) -> None:
    with pytest.raises(RunnersError, match=None) as info:
        parse_runners(text, "f.json")
    assert where in str(info.value) and str(info.value).startswith("f.json")


CONFIG = """\
[tool.testfleet]
roots = ["tests"]

[tool.testfleet.labels]
g = "gpu tests"

[tool.testfleet.stages.gpu]
backend = "cuda"
runs_on = ["self-hosted", "h200"]
command = "python"
"""


def _project(tmp_path: Path) -> Path:
    (tmp_path / "tests").mkdir()
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    (tmp_path / "tests" / "test_g.py").write_text(
        'from testfleet import register_cuda_ci\nregister_cuda_ci(est_time=5, suite="gpu", '
        'labels=["g"])\n')
    return tmp_path


def _plan(root: Path, *args: str) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "testfleet.cli.main", "-C", str(root), "plan",
                           "--cadence", "nightly", "--format", "json", *args],
                          capture_output=True, text=True, timeout=120, check=False)
    return (proc.returncode, json.loads(proc.stdout) if proc.returncode in (0, 1) else {},
            proc.stdout + proc.stderr)


def test_a_lane_no_online_runner_serves_gets_no_runner_online(tmp_path: Path) -> None:
    root = _project(tmp_path)
    code, plan, _ = _plan(root)
    assert code == 0
    assert plan["runners"] == {"checked": False}  # availability was not checked
    assert [j["stage"] for j in plan["jobs"]] == ["gpu"]
    (root / "runners.json").write_text(doc(("offline", ["self-hosted", "h200"])))
    code, plan, _ = _plan(root, "--runners", "runners.json")
    assert code == 0
    assert not plan["jobs"]
    assert [s["reason"] for s in plan["skipped"]] == ["no-runner-online"]
    stage = plan["stages"][0]
    assert stage["status"] == "no-runner-online" and stage["hole"]
    assert plan["runners"]["checked"] and plan["runners"]["offline_lanes"] == ["gpu"]
    (root / "runners.json").write_text(doc(("online", ["self-hosted", "h200", "x"])))
    _, plan, _ = _plan(root, "--runners", "runners.json")
    assert [j["stage"] for j in plan["jobs"]] == ["gpu"] and not plan["runners"]["offline_lanes"]


@pytest.mark.parametrize(("content", "said"), [
    (None, "--runners: cannot read"), (b"\xff", "not UTF-8"),
    (b'{"runners": [{"status": "online", "labels": [7]}]}', "runners[0].labels[0].name")])
def test_a_bad_runners_file_exits_2_naming_it(tmp_path: Path, content: bytes | None,
                                             said: str) -> None:
    root = _project(tmp_path)
    if content is not None:
        (root / "runners.json").write_bytes(content)
    code, _, out = _plan(root, "--runners", "runners.json")
    assert code == 2 and said in out and "Traceback" not in out
