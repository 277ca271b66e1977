"""Quarantine as a plan fate: a flaky file runs, its failure does not fail the job, its
results are recorded, and the quarantine lifts by itself after clean passes; a broken
file is never quarantined."""

from __future__ import annotations

import json
import sqlite3

from .conftest import as_json, cli


def quarantined(root) -> dict[str, str]:
    doc = as_json(cli(root, "plan", "--stage", "s-py", "--format", "json"))
    return {t["file"]: t.get("quarantined", "") for j in doc["jobs"] for t in j["tests"]}


def run_split(root, run_id: str, fail: bool):
    return cli(root, "run", "--file", "tests/test_split.py", "--stage", "s-py",
               "--display", "plain",
               env={"GITHUB_RUN_ID": run_id, "GITHUB_SHA": "c" * 40,
                    "SPLIT_RUNS": run_id if fail else ""})


def test_quarantine_fate_non_blocking_failure_and_automatic_lift(fleet) -> None:
    root = fleet(runs=4, split="103")
    fates = quarantined(root)
    assert fates["tests/test_flip.py"].startswith("flaky in 4/4 recent runs (4 pass(es) on retry)")
    assert fates["tests/test_split.py"].startswith("flaky in 1/4 recent runs (failed and passed on 1 commit(s))")
    assert fates["tests/test_broken.py"] == "" and fates["tests/test_ok.py"] == ""  # broken: never
    table = cli(root, "plan", "--stage", "s-py")
    assert "quarantined: tests/test_split.py (s-py) runs but its failure does not fail the job" in (
        table.stdout + table.stderr)

    failed = run_split(root, "105", fail=True)  # a quarantined failure does not fail the job
    assert failed.returncode == 0, failed.stdout + failed.stderr
    assert "quarantined, does not fail the job" in failed.stdout
    db = sqlite3.connect(root / ".testfleet" / "history.db")
    last = db.execute("select outcome, reason from executions where file = 'tests/test_split.py' "
                      "order by id desc limit 1").fetchone()
    db.close()
    assert last[0] == "FAILED" and last[1].startswith("quarantined, does not fail the job")

    assert run_split(root, "106", fail=False).returncode == 0
    assert "tests/test_split.py" in [f for f, why in quarantined(root).items() if why]
    assert run_split(root, "107", fail=False).returncode == 0  # restore_after = 2 clean passes
    assert quarantined(root)["tests/test_split.py"] == ""
    flaky = as_json(cli(root, "flaky", "--format", "json"))
    split = next(f for f in flaky["files"] if f["file"] == "tests/test_split.py")
    assert split["state"] == "recovered" and not split["quarantined"] and split["clean_streak"] == 2


def test_without_quarantine_flaky_files_block(fleet) -> None:
    root = fleet(runs=3, split="")
    config = (root / "testfleet.toml").read_text().replace("quarantine = true", "quarantine = false")
    (root / "testfleet.toml").write_text(config)
    assert not any(quarantined(root).values())
    doc = json.loads(cli(root, "flaky", "--format", "json").stdout)
    assert [f["file"] for f in doc["files"] if f["state"] == "flaky"] == ["tests/test_flip.py"]
