"""``testfleet run`` end to end, as a real process: exit codes, JUnit, summary, signals."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import psutil
import pytest

from support import process_gone, wait_until_ready

PASS = "print('ok')\n"
FAIL = "import sys\nprint('boom')\nsys.exit(3)\n"


def run_cli(root: Path, *args: str, env: dict[str, str] | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "testfleet.cli.main", "-C", str(root), "run", *args],
                          capture_output=True, text=True, timeout=timeout, env=full_env)


def junit_cases(path: Path) -> dict[str, str]:
    """testcase name -> 'passed' | 'failure' | 'error' | 'skipped' (parsing proves validity)."""
    tree = ET.parse(path)
    out = {}
    for case in tree.iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        out[case.get("name")] = kinds[0] if kinds else "passed"
    return out


def test_passing_job_exit_0_junit_summary_history(cli_project, tmp_path: Path) -> None:
    root, plan, [job] = cli_project({"test_a.py": PASS, "test_b.py": PASS})
    summary = tmp_path / "summary.md"
    res = run_cli(root, "--plan", str(plan), "--job", job, "--junit", "out/junit.xml",
                  env={"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_RUN_ID": "777",
                       "GITHUB_SHA": "abc123"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert junit_cases(root / "out" / "junit.xml") == {"tests/test_a.py": "passed",
                                                       "tests/test_b.py": "passed"}
    md = summary.read_text()
    assert "PASSED" in md and "tests/test\\_a.py" in md
    db = sqlite3.connect(root / ".testfleet" / "history.db")
    rows = db.execute("select file, outcome, attempt, commit_sha, ci_run_id from executions "
                      "order by id").fetchall()
    assert rows == [("tests/test_a.py", "PASSED", 1, "abc123", "777"),
                    ("tests/test_b.py", "PASSED", 1, "abc123", "777")]


def test_failing_job_fast_fails_and_reports_not_run(cli_project) -> None:
    root, plan, [job] = cli_project({"test_a.py": FAIL, "test_b.py": PASS})
    res = run_cli(root, "--plan", str(plan), "--job", job, "--junit", "j.xml", "--no-history")
    assert res.returncode == 1
    assert junit_cases(root / "j.xml") == {"tests/test_a.py": "failure", "tests/test_b.py": "skipped"}
    assert "NOT RUN" in res.stdout
    tree = ET.parse(root / "j.xml")
    failure = next(tree.iter("failure"))
    assert "boom" in (failure.text or "")
    res = run_cli(root, "--plan", str(plan), "--job", job, "--junit", "j.xml", "--no-history",
                  "--continue-on-error")
    assert res.returncode == 1
    assert junit_cases(root / "j.xml") == {"tests/test_a.py": "failure", "tests/test_b.py": "passed"}


def test_github_actions_output_is_grouped_and_fenced(cli_project) -> None:
    body = "print('::add-mask::secret')\nprint('::error::injected')\n"
    root, plan, [job] = cli_project({"test_a.py": body, "test_b.py": FAIL})
    res = run_cli(root, "--plan", str(plan), "--job", job, "--no-history",
                  env={"GITHUB_ACTIONS": "true"})
    lines = res.stdout.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("::group::[1/2]")))
    token = lines[start + 1].removeprefix("::stop-commands::")
    assert len(token) == 32
    assert lines[start + 2] == "::add-mask::secret"
    assert lines[start + 4] == f"::{token}::" and lines[start + 5] == "::endgroup::"
    assert any(line.startswith("::error file=tests/test_b.py,title=testfleet%3A FAILED::")
               for line in lines)


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(digest="sha256:" + "0" * 64), "digest"),
    (lambda d: d.update(schema="testfleet.plan/99"), "schema"),
])
def test_tampered_plan_is_exit_2(cli_project, tmp_path: Path, mutate, message: str) -> None:
    root, plan, [job] = cli_project({"test_a.py": PASS})
    data = json.loads(plan.read_text())
    mutate(data)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    res = run_cli(root, "--plan", str(bad), "--job", job, "--junit", "j.xml")
    assert res.returncode == 2, res.stdout + res.stderr
    assert message in res.stderr
    assert not (root / "j.xml").exists()


@pytest.mark.parametrize("args, message", [
    (["--job", "nope"], "has no job 'nope'"),
    ([], "--plan needs --job"),
    (["--job", "x", "--stage", "s-py"], "do not apply"),
])
def test_plan_usage_errors_are_exit_2(cli_project, args: list[str], message: str) -> None:
    root, plan, _ = cli_project({"test_a.py": PASS})
    res = run_cli(root, "--plan", str(plan), *args)
    assert res.returncode == 2
    assert message in res.stderr


def test_nothing_to_run_is_exit_2(cli_project) -> None:
    root, _, _ = cli_project({"test_a.py": PASS})
    res = run_cli(root)
    assert res.returncode == 2
    assert "say what to run" in res.stderr
    res = run_cli(root, "--job", "x")
    assert res.returncode == 2


def test_dry_run_executes_nothing(cli_project) -> None:
    root, plan, [job] = cli_project({"test_a.py": "open('ran', 'w').close()\n"})
    res = run_cli(root, "--plan", str(plan), "--job", job, "--dry-run")
    assert res.returncode == 0
    assert "tests/test_a.py" in res.stdout and "dry run" in res.stdout
    assert " 1 file, max 1 attempt(s)" in " ".join(res.stdout.split())
    assert not (root / "ran").exists()


@pytest.mark.parametrize(("args", "env", "origin"), [
    ((), {"TESTFLEET_DATABASE_URL": "mysql://x/y"}, "TESTFLEET_DATABASE_URL: unsupported"),
    (("--database", "mysql://x/y"), {}, "--database: unsupported"),
])
def test_database_url_origin_is_reported_truthfully(cli_project, args: tuple[str, ...],
                                                     env: dict[str, str], origin: str) -> None:
    """A URL from the environment is named as such, as by every other command."""
    registered = "from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=5, suite='s-py')\n"
    root, _, _ = cli_project({"test_a.py": registered + PASS})
    res = run_cli(root, "--stage", "s-py", "--dry-run", *args, env=env)
    assert res.returncode == 0, res.stderr
    assert origin in res.stderr


def test_database_error_warns_and_keeps_verdict(cli_project, tmp_path: Path) -> None:
    root, plan, [job] = cli_project({"test_a.py": PASS})
    bad = tmp_path / "not-a-dir" / "x"
    (tmp_path / "not-a-dir").write_text("a file, so the database cannot be created below it")
    res = run_cli(root, "--plan", str(plan), "--job", job, "--database", str(bad))
    assert res.returncode == 0, res.stderr
    assert "warning" in res.stderr and "history" in res.stderr


SLOW_WITH_CHILD = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
open(sys.argv[0] + ".pids.tmp", "w").write(f"{os.getpid()} {child.pid}")
os.replace(sys.argv[0] + ".pids.tmp", sys.argv[0] + ".pids")  # whole or absent
print("running", flush=True)
time.sleep(3600)
"""


def _spawn(root: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    return subprocess.Popen([sys.executable, "-m", "testfleet.cli.main", "-C", str(root), "run",
                             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_mid_file_writes_partial_junit(cli_project, sig: int, code: int) -> None:
    root, plan, [job] = cli_project({"test_a.py": PASS, "test_b.py": SLOW_WITH_CHILD,
                                     "test_c.py": PASS}, floor=60.0, grace=2.0)
    proc = _spawn(root, "--plan", str(plan), "--job", job, "--junit", "j.xml")
    pids_file = root / "tests" / "test_b.py.pids"
    wait_until_ready(pids_file, proc)  # a condition: load makes it slower, never red
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)  # grace 2 s; the bound only catches a hang
    assert proc.returncode == code, out + err
    assert junit_cases(root / "j.xml") == {"tests/test_a.py": "passed", "tests/test_b.py": "error",
                                           "tests/test_c.py": "skipped"}
    for pid in map(int, pids_file.read_text().split()):
        assert process_gone(pid), pid


def test_kill_9_leaves_history_intact_and_junit_red(cli_project) -> None:
    root, plan, [job] = cli_project({"test_a.py": PASS, "test_b.py": SLOW_WITH_CHILD},
                                    floor=60.0)
    proc = _spawn(root, "--plan", str(plan), "--job", job, "--junit", "j.xml")
    pids_file = root / "tests" / "test_b.py.pids"
    wait_until_ready(pids_file, proc)
    proc.kill()
    proc.communicate(timeout=120)
    for pid in map(int, pids_file.read_text().split()):  # orphans now; CI would reap them
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()
    db = sqlite3.connect(root / ".testfleet" / "history.db")
    assert db.execute("pragma integrity_check").fetchone() == ("ok",)
    rows = db.execute("select file, outcome from executions").fetchall()
    assert rows == [("tests/test_a.py", "PASSED")]
    cases = junit_cases(root / "j.xml")
    assert cases["tests/test_b.py"] == "error"  # the placeholder is red, never green


def test_example_stage_b_runs_green(example_project: Path) -> None:
    res = run_cli(example_project, "--stage", "stage-b-cpu", "--junit", "j.xml", "--display", "plain")
    assert res.returncode == 0, res.stdout + res.stderr
    cases = junit_cases(example_project / "j.xml")
    assert cases and set(cases.values()) == {"passed"}
    assert "tests/unit/test_weight_sync.py" in cases


def test_example_stage_a_shard_runs_green(example_project: Path) -> None:
    res = run_cli(example_project, "--stage", "stage-a-cpu", "--shard", "1/4", "--junit", "j.xml")
    assert res.returncode == 0, res.stdout + res.stderr
    cases = junit_cases(example_project / "j.xml")
    assert 1 <= len(cases) < 40 and set(cases.values()) == {"passed"}
    # one testcase per test of a pytest stage, each naming its file
    files = [p.get("value") for p in ET.parse(example_project / "j.xml").iter("property")
             if p.get("name") == "file"]
    assert len(files) == len(cases) and all(f.startswith("tests/fast/") for f in files)


def test_example_single_file(example_project: Path) -> None:
    res = run_cli(example_project, "--file", "tests/unit/test_rollout_buffer.py", "--junit", "j.xml")
    assert res.returncode == 0, res.stdout + res.stderr
    assert junit_cases(example_project / "j.xml") == {"tests/unit/test_rollout_buffer.py": "passed"}


@pytest.mark.parametrize("args, message", [
    (["--stage", "stage-c-4-gpu-mi300x"], "dormant"),
    (["--stage", "stage-b-cpu", "--shard", "1/7"], "not 7"),
    (["--stage", "stage-b-cpu", "--shard", "x"], "expected I/N"),
    (["--file", "tests/unit/test_weight_sync.py", "--shard", "1/2"], "--shard needs --stage"),
    (["--stage", "stage-a-cpu", "--stage", "stage-b-cpu"], "one stage at a time"),
    (["--stage", "no-such-stage"], "no-such-stage"),
    (["--file", "../outside.py"], "escapes the repository"),
])
def test_example_usage_errors(example_project: Path, args: list[str], message: str) -> None:
    res = run_cli(example_project, *args)
    assert res.returncode == 2, res.stdout + res.stderr
    assert message in res.stderr


def test_closed_stdout_does_not_change_the_verdict(cli_project) -> None:
    root, plan, [job] = cli_project({"test_a.py": "print('x' * 100000)\n", "test_b.py": PASS})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    proc = subprocess.Popen([sys.executable, "-m", "testfleet.cli.main", "-C", str(root), "run",
                             "--plan", str(plan), "--job", job, "--junit", "j.xml",
                             "--display", "plain"], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    proc.stdout.read(10)
    proc.stdout.close()  # like `testfleet run ... | head -c 10`
    assert proc.wait(timeout=60) == 0
    assert junit_cases(root / "j.xml") == {"tests/test_a.py": "passed", "tests/test_b.py": "passed"}


def test_nightly_policy_bypasses_fast_fail(cli_project) -> None:
    root, plan, [job] = cli_project({"test_a.py": FAIL, "test_b.py": PASS}, cadence="nightly")
    assert json.loads(plan.read_text())["policy"]["bypass_fastfail"] is True
    res = run_cli(root, "--plan", str(plan), "--job", job, "--junit", "j.xml", "--no-history")
    assert res.returncode == 1
    assert junit_cases(root / "j.xml") == {"tests/test_a.py": "failure", "tests/test_b.py": "passed"}


def test_unwritable_junit_path_is_exit_2_before_anything_runs(cli_project) -> None:
    """A JUnit file that cannot be written (here: its directory is a file) is a usage
    error up front, not a warning after the whole job has run."""
    root, plan, [job] = cli_project({"test_a.py": "open('ran.marker', 'w').close()\n"})
    (root / "blocker").write_text("a file, not a directory\n")
    res = run_cli(root, "--plan", str(plan), "--job", job, "--junit", "blocker/j.xml",
                  "--no-history")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "testfleet: error: --junit" in res.stderr and "blocker/j.xml" in res.stderr
    assert "nothing was run" in res.stderr and "Traceback" not in res.stderr
    assert not list(root.rglob("ran.marker"))


def test_unusable_records_directory_is_exit_2(cli_project) -> None:
    """--records where no directory can be made is the caller's mistake (exit 2), not a
    test failure (exit 1) of every file."""
    root, plan, [job] = cli_project({"test_a.py": PASS})
    (root / "blocker").write_text("a file, not a directory\n")
    res = run_cli(root, "--plan", str(plan), "--job", job, "--records", "blocker/recs",
                  "--no-history")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "testfleet: error: --records blocker/recs: cannot create it" in res.stderr
    assert "nothing was run" in res.stderr and "Traceback" not in res.stderr


def test_unusable_cache_dir_is_exit_2(cli_project) -> None:
    """The default record directory lives under cache_dir; a file in its way is exit 2
    naming it, not an ERROR (exit 1) for every test file."""
    root, plan, [job] = cli_project({"test_a.py": PASS})
    import shutil

    shutil.rmtree(root / ".testfleet", ignore_errors=True)
    (root / ".testfleet").write_text("a file, not a directory\n")
    res = run_cli(root, "--plan", str(plan), "--job", job, "--no-history")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "testfleet: error: record directory" in res.stderr
    assert "(under cache_dir): cannot create it" in res.stderr and "nothing was run" in res.stderr


def test_cache_dir_that_is_a_file_is_named(cli_project) -> None:
    """`run --stage` plans in-process: the same accurate note as `testfleet plan`."""
    registered = "from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=5, suite='s-py')\n"
    root, _, _ = cli_project({"test_a.py": registered + PASS})
    cache = root / ".testfleet"
    if cache.is_dir():
        import shutil

        shutil.rmtree(cache)
    cache.write_text("")
    res = run_cli(root, "--stage", "s-py", "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "is a file, not a directory" in res.stderr and "yet" not in res.stderr
