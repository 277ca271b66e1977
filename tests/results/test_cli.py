"""`testfleet results` and `testfleet flaky` on a history written by real runs."""

from __future__ import annotations

from .conftest import as_json, cli


def test_results_flaky_and_quarantine_from_real_runs(fleet) -> None:
    root = fleet(runs=4, split="103")
    doc = as_json(cli(root, "results", "--format", "json"))
    assert doc["schema"] == "testfleet.results/1"
    strips = {f["file"]: f["strip"] for f in doc["files"]}
    assert strips == {"tests/test_broken.py": "FFFF", "tests/test_flip.py": "RRRR",
                      "tests/test_ok.py": "PPPP", "tests/test_split.py": "PPFP"}
    ok = next(f for f in doc["files"] if f["file"] == "tests/test_ok.py")
    assert ok["pass_rate"] == 1.0 and ok["last"] == "PASSED"
    assert [r["url"] for r in ok["runs"]] == [
        f"https://github.com/octo/fleet/actions/runs/{n}" for n in (104, 103, 102, 101)]
    broken = next(f for f in doc["files"] if f["file"] == "tests/test_broken.py")
    assert broken["runs"][0]["reason"] == "exit status 1" and broken["pass_rate"] == 0.0

    one = as_json(cli(root, "results", "--file", "tests/test_ok.py", "--runs", "2",
                      "--format", "json"))
    assert [(f["file"], f["strip"]) for f in one["files"]] == [("tests/test_ok.py", "PP")]

    table = cli(root, "results")
    assert table.returncode == 0 and "test_split.py" in table.stdout and "PPFP" in table.stdout

    flaky = as_json(cli(root, "flaky", "--format", "json"))
    states = {f["file"]: (f["state"], f["quarantined"]) for f in flaky["files"]}
    assert states == {"tests/test_broken.py": ("broken", False),
                      "tests/test_flip.py": ("flaky", True),
                      "tests/test_split.py": ("flaky", True)}
    split = next(f for f in flaky["files"] if f["file"] == "tests/test_split.py")
    assert split["split_commits"] == ["c" * 40] and split["evidence"][0]["ci_run_id"] == "103"
    flip = next(f for f in flaky["files"] if f["file"] == "tests/test_flip.py")
    assert flip["retry_passes"] == 4 and flip["rate"] == 1.0
    text = cli(root, "flaky")
    assert text.returncode == 0 and "quarantined" in text.stdout and "broken" in text.stdout


def test_results_usage_errors_and_empty_history(fleet) -> None:
    root = fleet(runs=0)
    empty = cli(root, "results")
    assert empty.returncode == 0 and "no results recorded yet" in empty.stdout
    assert as_json(cli(root, "flaky", "--format", "json"))["files"] == []
    bad = cli(root, "results", "--stage", "nope")
    assert bad.returncode == 2 and "'nope' is not a configured stage" in bad.stderr
    assert cli(root, "results", "--runs", "0").returncode == 2
    assert cli(root, "flaky", "--stage", "nope").returncode == 2
