"""Moving miles over, end to end (#39 item 1): adopt its tree, run shadow mode against
recorded runs of its existing CI (fixtures of its runner's listing output), switch the old
test jobs off, and roll back -- each file checked byte for byte where it must not change.
Also the switch's edges: jobs that are not testfleet's are never touched, an existing
``if:`` comes back exactly, a workflow edited since the switch, bad input."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from support import run_cli

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real_trees" / "miles-ci"
RECORDS = Path(__file__).resolve().parents[1] / "fixtures" / "shadow"
OLD = (".github/workflows/pr-test.yml", ".github/workflows/pr-test-rocm.yml",
       ".github/workflows/_run-ci.yml", ".github/workflows/_run-cpu-ci.yml",
       ".github/workflows/_run-ci-rocm.yml")


@pytest.fixture
def miles(tmp_path: Path) -> Path:
    dest = tmp_path / "miles"
    shutil.copytree(REAL, dest)
    return dest


def snapshot(root: Path) -> dict[str, str]:
    """Every file of the tree -> its SHA-256."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def adopt(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "-C", str(root), "init", "--from-existing", "--github",
                             "--allow-findings", "--install", "pip install testfleet")
    assert code == 0, out + err


def plan(root: Path, capsys: pytest.CaptureFixture[str], name: str, *args: str) -> Path:
    path = root / name
    code, out, err = run_cli(capsys, "-C", str(root), "plan", *args, "--format", "json",
                             "-o", str(path))
    assert code == 0, out + err
    return path


def shadow(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> dict:  # type: ignore[type-arg]
    code, out, err = run_cli(capsys, "-C", str(root), "shadow", "compare", *args, "--format", "json")
    assert code == 0, out + err
    return json.loads(out)  # type: ignore[no-any-return]


def test_miles_adopts_shadows_switches_and_rolls_back(miles: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(miles)
    adopt(miles, capsys)
    adopted = snapshot(miles)
    assert {k: v for k, v in adopted.items() if k in before} == before  # adoption edits no old file
    history = miles / ".testfleet" / "shadow-history.json"

    # shadow mode, a pull request: pr-test.yml's jobs listed what they ran; the plan agrees,
    # its GPU job found nothing to run (where testfleet asks for no runner); never recorded
    pr = plan(miles, capsys, "pr.json", "--event", "pull_request")
    doc = shadow(miles, capsys, "--plan", str(pr), "--observed", str(RECORDS / "miles-pr-run.txt"),
                 "--stage", "stage-a-cpu", "--stage", "stage-c-4-gpu-h200",
                 "--history", str(history), "--record", "--run-id", "101", "--commit", "a" * 40)
    assert doc["same"] and not doc["recorded"] and not history.exists()
    cpu = next(lane for lane in doc["lanes"] if lane["stage"] == "stage-a-cpu")
    assert (cpu["runs_on_observed"], cpu["runs_on_planned"]) == (["ubuntu-latest"], ["ubuntu-latest"])
    assert (cpu["shards_observed"], cpu["shards_planned"]) == (2, 2)
    assert any("ran no file" in n and "stage-c-4-gpu-h200" in n for n in doc["notes"])
    assert "not recorded: a pull_request run never writes shared history" in doc["notes"]
    assert doc["verdict"]["safe"] is False

    # the nightly cron: every lane the same, recorded; two in a row make the switch safe
    nightly = plan(miles, capsys, "nightly.json", "--event", "schedule", "--schedule", "0 15 * * 0-5")
    for run_id in ("201", "202"):
        doc = shadow(miles, capsys, "--plan", str(nightly), "--observed",
                     str(RECORDS / "miles-nightly-run.txt"), "--history", str(history),
                     "--record", "--runs", "2", "--run-id", run_id)
        assert doc["same"] and doc["recorded"], doc
    gpu = next(lane for lane in doc["lanes"] if lane["stage"] == "stage-c-4-gpu-h200")
    assert (gpu["runs_on_observed"], gpu["runs_on_planned"]) == (["4gpu", "h200"], ["4gpu", "h200"])
    assert doc["verdict"] == {"safe": True, "needed": 2, "clean_streak": 2, "recorded": 2,
                              "events": ["schedule"], "message": doc["verdict"]["message"]}
    assert "the switch is safe" in doc["verdict"]["message"]
    for name in ("pr.json", "nightly.json"):
        (miles / name).unlink()
    after_shadow = snapshot(miles)
    new = set(after_shadow) - set(adopted)  # the history, beside plan's own caches
    assert ".testfleet/shadow-history.json" in new and all(k.startswith(".testfleet/") for k in new)
    assert {k: v for k, v in after_shadow.items() if k in adopted} == adopted  # nothing else

    # the switch: one line per old test job; the reusable workflows and the image job untouched
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--switch")
    assert code == 0, out + err
    assert "shadow mode (.testfleet/shadow-history.json): not yet: 2 of 10" in err
    shutil.rmtree(miles / ".testfleet")
    assert "left-alone .github/workflows/pr-test-rocm.yml job resolve-ci-image: only feeds " \
           "replaced job(s) stage-c-4-gpu-mi350" in out
    switched = snapshot(miles)
    changed = {k for k in switched if switched[k] != adopted.get(k)}  # and nothing else:
    assert changed == {".github/workflows/pr-test.yml", ".github/workflows/pr-test-rocm.yml",
                       ".github/testfleet-switch.json"}
    for rel in (".github/workflows/pr-test.yml", ".github/workflows/pr-test-rocm.yml"):
        old = (REAL / rel).read_text().splitlines()
        new = (miles / rel).read_text().splitlines()
        added = [line for line in new if line not in old]
        assert len(new) - len(old) == len(added) and all(
            line.strip().startswith("if: false  # replaced by testfleet.yml") for line in added)
        jobs = yaml.safe_load((miles / rel).read_text())["jobs"]
        for job_id, job in jobs.items():
            assert (job.get("if") is False) == job_id.startswith("stage-"), (rel, job_id)
    # switching twice is refused, and changes nothing
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--switch")
    assert code == 2 and "switched already" in err and snapshot(miles) == switched

    # rollback: every byte back, the record gone
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--unswitch")
    assert code == 0, out + err
    assert "restored   .github/workflows/pr-test.yml job stage-a-cpu" in out
    assert snapshot(miles) == adopted
    for rel in OLD:
        assert (miles / rel).read_bytes() == (REAL / rel).read_bytes()


EXTRA_JOBS = """\
  lint:
    runs-on: ubuntu-latest
    steps:
      - run: ruff check .
  report:
    needs: [stage-a-cpu]
    if: always()
    runs-on: ubuntu-latest
    steps:
      - run: echo done
  docs-tests:
    runs-on: ubuntu-latest
    steps:
      - run: python -m pytest docs/   # tests testfleet does not own
"""


def test_only_owned_jobs_are_switched_and_an_existing_if_comes_back(
        miles: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pr_test = miles / ".github/workflows/pr-test.yml"
    text = pr_test.read_text().replace(
        "  stage-c-4-gpu-h200:\n",
        "  stage-c-4-gpu-h200:\n    # only on the main repository\n"
        "    if: ${{ github.repository == 'radixark/miles' }}   # keep forks off\n") + EXTRA_JOBS
    pr_test.write_bytes(text.replace("\n", "\r\n").encode())  # CRLF kept as it is
    adopt(miles, capsys)
    adopted = snapshot(miles)
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--switch")
    assert code == 0, out + err
    assert "kept       .github/workflows/pr-test.yml job lint: runs no test" in out
    assert "left-alone .github/workflows/pr-test.yml job report: needs replaced job(s) " \
           "stage-a-cpu" in out
    assert "left-alone .github/workflows/pr-test.yml job docs-tests: runs tests testfleet " \
           "does not own" in out
    raw = pr_test.read_bytes()
    assert b"\r\n    # only on the main repository\r\n    if: false  # replaced by" in raw
    assert b"radixark/miles" not in raw.split(b"docs-tests")[0].split(b"stage-c-4-gpu-h200:")[1]
    assert raw.count(b"\n") == raw.count(b"\r\n")
    jobs = yaml.safe_load(raw)["jobs"]
    assert {j: jobs[j].get("if") for j in ("lint", "report", "docs-tests")} == \
        {"lint": None, "report": "always()", "docs-tests": None}
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--unswitch")
    assert code == 0, out + err
    assert snapshot(miles) == adopted


def test_a_workflow_edited_since_the_switch_keeps_the_later_edit(
        miles: Path, capsys: pytest.CaptureFixture[str]) -> None:
    adopt(miles, capsys)
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--switch")
    assert code == 0, out + err
    pr_test = miles / ".github/workflows/pr-test.yml"
    pr_test.write_text("# a later edit\n" + pr_test.read_text())
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--unswitch")
    assert code == 0, out + err
    assert "was edited since the switch" in out
    assert pr_test.read_text() == "# a later edit\n" + (REAL / ".github/workflows/pr-test.yml").read_text()


def test_bad_input_is_named_and_nothing_is_written(miles: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--switch")
    assert code == 2 and "no testfleet configuration" in err
    adopt(miles, capsys)
    (miles / ".github/workflows/testfleet.yml").rename(miles / "elsewhere.yml")
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--switch")
    assert code == 2 and "run 'testfleet init --github' first" in err
    (miles / "elsewhere.yml").rename(miles / ".github/workflows/testfleet.yml")
    (miles / ".github/workflows/lint.yml").write_text("on: push\njobs:\n  lint: [unclosed\n")
    before = snapshot(miles)
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--switch")
    assert code == 2 and ".github/workflows/lint.yml:" in err and "nothing was switched" in err
    assert snapshot(miles) == before
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--unswitch")
    assert code == 2 and "nothing was switched by 'testfleet init --switch' here" in err
    (miles / ".github/workflows/lint.yml").unlink()
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--switch")
    assert code == 0, out + err
    record = miles / ".github/testfleet-switch.json"
    record.write_text(record.read_text().replace('"line": 11', '"line": "11"'))
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--unswitch")
    assert code == 2 and ".github/testfleet-switch.json: workflows." in err
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--switch", "--github")
    assert code == 2 and "commands of their own" in err


def test_the_adoption_report_lists_every_job_and_counts_agree(
        miles: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """#39 item 4: the configuration's comment and the report count the same registrations,
    and what is not carried over is said once per line."""
    report = miles / "adoption.md"
    code, out, err = run_cli(capsys, "-C", str(miles), "init", "--from-existing", "--github",
                             "--allow-findings", "--report", str(report))
    assert code == 0, out + err
    text = report.read_text()
    assert "| `.github/workflows/pr-test-rocm.yml` | `resolve-ci-image` | left-alone |" in text
    assert "| `.github/workflows/pr-test.yml` | `stage-a-cpu` | replaced | runs stage-a-cpu |" in text
    assert "- registrations kept: **3 / 3**" in text
    assert "from 3 registrations." in (miles / "testfleet.toml").read_text()
    told = [line for line in text.split("## Not carried over")[1].split("## Findings")[0].splitlines()
            if line.startswith("- ")]
    assert told and len(told) == len(set(told))


def test_the_comment_counts_registrations_by_location_as_the_report_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """miles' real tree said "from 183 registrations" above a report of 422/422: most of its
    files register by location."""
    from .test_workflows import realistic_tree

    tree = realistic_tree(tmp_path / "rl")
    report = tmp_path / "adoption.md"
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing",
                             "--allow-findings", "--report", str(report))
    assert code == 0, out + err
    kept = next(line for line in report.read_text().splitlines() if "registrations kept" in line)
    total = int(kept.split("/ ")[1].split("**")[0])
    text = (tree / "pyproject.toml").read_text()
    header = text.splitlines()[text.splitlines().index("[tool.testfleet]") + 1]
    calls = sum(1 for p in tree.rglob("test_*.py") if "register_" in p.read_text())
    assert header == (f"# Adopted by 'testfleet init --from-existing' from {total} registrations "
                      f"({calls} marker calls, {total - calls} by location).")
    assert total > calls
