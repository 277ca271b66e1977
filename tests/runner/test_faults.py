"""Fault injection with real processes: timeouts, escaped descendants, floods, retries."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from testfleet.runner.loop import execute
from testfleet.runner.model import Outcome
from testfleet.runner.reporting import NullReporter

SLEEP_FOREVER = """
import time
print("started", flush=True)
time.sleep(3600)
"""

GRANDCHILD_IGNORES_TERM = """
import os, signal, sys, time
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with open(sys.argv[0] + ".pids", "a") as fh:
        fh.write(f"{os.getpid()}\\n")
    time.sleep(3600)
    os._exit(0)
with open(sys.argv[0] + ".pids", "a") as fh:
    fh.write(f"{os.getpid()}\\n")
time.sleep(3600)
"""

SETSID_KEEPS_CHILD = """
import os, sys, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        with open(sys.argv[0] + ".pids", "a") as fh:
            fh.write(f"{os.getpid()}\\n")
        time.sleep(3600)
        os._exit(0)
    with open(sys.argv[0] + ".pids", "a") as fh:
        fh.write(f"{os.getpid()}\\n")
    time.sleep(3600)
    os._exit(0)
time.sleep(3600)
"""

DAEMON_THEN_PASS = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(sys.argv[0] + ".pids", "a") as fh:
            fh.write(f"{os.getpid()}\\n")
        time.sleep(3600)
    os._exit(0)
# the test passes only once its daemon is up (on a loaded machine the sweep could
# otherwise kill it before it wrote its pid)
deadline = time.monotonic() + 30
while not os.path.exists(sys.argv[0] + ".pids") and time.monotonic() < deadline:
    time.sleep(0.01)
print("parent passes and leaves a daemon behind")
"""


def _pids(spec, name: str) -> list[int]:
    path = spec.root / (name + ".pids")
    deadline = time.monotonic() + 5
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_sleep_forever_times_out_within_timeout_plus_grace(make_spec) -> None:
    spec = make_spec({"test_sleep.py": SLEEP_FOREVER}, floor=1.0, grace=0.5)
    t0 = time.monotonic()
    job = execute(spec, reporter=NullReporter())
    elapsed = time.monotonic() - t0
    [res] = job.results
    assert res.outcome is Outcome.TIMEOUT
    assert len(res.attempts) == 1
    assert "timed out after 1s" in res.message
    assert "started" in res.tail
    assert res.attempts[0].returncode == -signal.SIGTERM  # the polite signal was enough
    assert elapsed < 1.0 + 0.5 + 5.0  # timeout + grace + generous start/stop slack (loaded CI)
    assert job.exit_code == 1


@pytest.mark.parametrize("reaper", [True, False], ids=["subreaper", "polling"])
def test_grandchild_ignoring_sigterm_is_killed(make_spec, reaper: bool) -> None:
    spec = make_spec({"test_gc.py": GRANDCHILD_IGNORES_TERM}, floor=1.0, grace=0.3)
    job = execute(spec, reporter=NullReporter(), use_subreaper=reaper)
    assert job.results[0].outcome is Outcome.TIMEOUT
    pids = _pids(spec, "test_gc.py")
    assert len(pids) == 2
    assert not any(_alive(p) for p in pids), pids


@pytest.mark.parametrize("reaper", [True, False], ids=["subreaper", "polling"])
def test_setsid_child_is_killed(make_spec, reaper: bool) -> None:
    spec = make_spec({"test_setsid.py": SETSID_KEEPS_CHILD}, floor=1.0, grace=0.3)
    job = execute(spec, reporter=NullReporter(), use_subreaper=reaper)
    assert job.results[0].outcome is Outcome.TIMEOUT
    pids = _pids(spec, "test_setsid.py")
    assert len(pids) == 2
    for pid in pids:  # they really were outside the test's process group
        assert not _alive(pid), pid


def test_daemon_left_behind_by_passing_test_is_killed(make_spec) -> None:
    spec = make_spec({"test_daemon.py": DAEMON_THEN_PASS}, floor=5.0, grace=0.3)
    job = execute(spec, reporter=NullReporter())
    [res] = job.results
    assert res.outcome is Outcome.PASSED
    [pid] = _pids(spec, "test_daemon.py")
    assert not _alive(pid)
    assert res.attempts[0].leftovers == 1
    assert "leftover" in res.attempts[0].reason


def test_fifty_megabytes_of_output_are_streamed_not_held(make_spec) -> None:
    import tracemalloc

    body = """
    import sys
    chunk = ("x" * 1023 + "\\n").encode()
    for _ in range(50 * 1024):
        sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.write(b"the end\\n")
    """
    # The timeout only catches a hang (which fails the outcome check below): 50 MB read
    # under tracemalloc takes ~15 s at load 9 on 2 cores, and longer on a busier machine.
    spec = make_spec({"test_flood.py": body}, floor=900.0)
    reporter = NullReporter()
    tracemalloc.start()
    try:
        job = execute(spec, reporter=reporter)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    [res] = job.results
    assert res.outcome is Outcome.PASSED
    assert reporter.output_bytes == 50 * 1024 * 1024 + len(b"the end\n")
    assert res.attempts[0].output_bytes == reporter.output_bytes
    assert res.tail.rstrip().endswith("the end")
    assert len(res.tail) < 70 * 1024
    assert peak < 8 * 1024 * 1024, peak


def test_fails_once_then_passes_is_flaky(make_spec) -> None:
    body = """
    import os, sys
    marker = sys.argv[0] + ".ran"
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise AssertionError("accuracy 0.71 below threshold 0.75")
    print("attempt", os.environ["TESTFLEET_ATTEMPT"], "passes")
    """
    spec = make_spec({"test_flaky.py": body}, max_attempts=3)
    job = execute(spec, reporter=NullReporter())
    [res] = job.results
    assert res.outcome is Outcome.FLAKY
    assert [a.outcome for a in res.attempts] == [Outcome.FAILED, Outcome.PASSED]
    assert "retriable pattern matched" in res.attempts[0].retry_reason
    assert job.exit_code == 0
    assert res.attempts[0].record_dir != res.attempts[1].record_dir


def test_import_error_is_not_retried(make_spec) -> None:
    body = """
    import accuracy_module_that_does_not_exist  # AssertionError accuracy below, still fatal
    """
    spec = make_spec({"test_imp.py": body}, max_attempts=3)
    job = execute(spec, reporter=NullReporter())
    [res] = job.results
    assert res.outcome is Outcome.FAILED
    assert len(res.attempts) == 1
    assert "fatal pattern matched" in res.attempts[0].retry_reason
    assert "ModuleNotFoundError" in res.tail


def test_timeout_is_not_retried(make_spec) -> None:
    spec = make_spec({"test_sleep.py": SLEEP_FOREVER}, floor=0.5, grace=0.2, max_attempts=3)
    job = execute(spec, reporter=NullReporter())
    [res] = job.results
    assert res.outcome is Outcome.TIMEOUT
    assert len(res.attempts) == 1
    assert res.attempts[0].retry_reason == "timeouts are not retried"


def test_fast_fail_reports_not_run(make_spec) -> None:
    spec = make_spec({
        "test_a.py": "print('a')\n",
        "test_b.py": "raise SystemExit(3)\n",
        "test_c.py": "print('c')\n",
    })
    job = execute(spec, reporter=NullReporter())
    assert [r.outcome for r in job.results] == [Outcome.PASSED, Outcome.FAILED, Outcome.NOT_RUN]
    assert "fast-fail: test_b.py FAILED" in job.results[2].message
    assert job.results[1].message == "exit status 3"
    assert job.exit_code == 1


def test_continue_on_error_runs_everything(make_spec) -> None:
    spec = make_spec({
        "test_a.py": "raise SystemExit(1)\n",
        "test_b.py": "print('b')\n",
    }, fast_fail=False)
    job = execute(spec, reporter=NullReporter())
    assert [r.outcome for r in job.results] == [Outcome.FAILED, Outcome.PASSED]
    assert job.exit_code == 1


def test_environment_and_cwd(make_spec) -> None:
    body = """
    import json, os, sys
    keys = ["TESTFLEET_STAGE", "TESTFLEET_JOB", "TESTFLEET_ATTEMPT", "TESTFLEET_RECORD_DIR",
            "CUDA_VISIBLE_DEVICES", "STAGE_VAR"]
    json.dump({k: os.environ.get(k) for k in keys} | {"cwd": os.getcwd()},
              open(os.path.join(os.environ["TESTFLEET_RECORD_DIR"], "env.json"), "w"))
    """
    os.environ["CUDA_VISIBLE_DEVICES"] = "2,3"
    try:
        spec = make_spec({"sub/test_env.py": body}, env={"STAGE_VAR": "v"})
        job = execute(spec, reporter=NullReporter())
    finally:
        del os.environ["CUDA_VISIBLE_DEVICES"]
    [res] = job.results
    assert res.outcome is Outcome.PASSED, res.tail
    import json

    record = res.attempts[0].record_dir
    assert record is not None
    data = json.loads((record / "env.json").read_text())
    assert data == {"TESTFLEET_STAGE": "stage-x", "TESTFLEET_JOB": "job-1", "TESTFLEET_ATTEMPT": "1",
                    "TESTFLEET_RECORD_DIR": str(record), "CUDA_VISIBLE_DEVICES": "2,3",
                    "STAGE_VAR": "v", "cwd": str(spec.root)}


def test_pytest_command_and_no_tests_collected_is_a_failure(make_spec) -> None:
    spec = make_spec({
        "test_ok.py": "def test_one():\n    assert 1 + 1 == 2\n",
        "test_empty.py": "X = 1\n",
    }, command="pytest", fast_fail=False, floor=60.0)
    job = execute(spec, reporter=NullReporter())
    assert job.results[0].outcome is Outcome.PASSED, job.results[0].tail
    assert job.results[1].outcome is Outcome.FAILED
    assert "collected no tests" in job.results[1].message


def test_missing_file_is_an_error_not_a_pass(make_spec, tmp_path: Path) -> None:
    spec = make_spec({"test_a.py": "print('a')\n"})
    (spec.root / "test_a.py").unlink()
    job = execute(spec, reporter=NullReporter())
    assert job.results[0].outcome is Outcome.ERROR
    assert "does not exist" in job.results[0].message
    assert job.exit_code == 1


def test_crash_signal_is_not_retried(make_spec) -> None:
    body = """
    import os, signal
    print("accuracy 0.1 below 0.5")
    os.kill(os.getpid(), signal.SIGSEGV)
    """
    spec = make_spec({"test_segv.py": body}, max_attempts=3)
    job = execute(spec, reporter=NullReporter())
    [res] = job.results
    assert res.outcome is Outcome.FAILED
    assert res.message == "killed by SIGSEGV"
    assert len(res.attempts) == 1


def test_process_that_survives_sigkill_is_reported_not_waited_for(
        make_spec, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand-in for a process stuck in a driver (uninterruptible): SIGKILL "does nothing"."""
    from testfleet.runner.tree import ProcessTree

    monkeypatch.setattr(ProcessTree, "kill_all", lambda self, settle=2.0: 0)
    monkeypatch.setattr(ProcessTree, "terminate", lambda self, sig=signal.SIGTERM: None)
    spec = make_spec({"test_daemon.py": DAEMON_THEN_PASS}, floor=5.0, grace=0.2)
    reporter = NullReporter()
    job = execute(spec, reporter=reporter)
    [pid] = _pids(spec, "test_daemon.py")
    try:
        [res] = job.results
        assert res.outcome is Outcome.PASSED
        assert f"process(es) {pid} survived SIGKILL" in res.attempts[0].reason
        assert any(str(pid) in w and "could not be killed" in w for w in reporter.warnings)
    finally:
        os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)  # it was re-parented to us (subreaper): collect it


ORPHANED_AFTER_A_WHILE = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(sys.argv[0] + ".pids", "a") as fh:
            fh.write(f"{os.getpid()}\\n")
        time.sleep(3600)
        os._exit(0)
    # Longer than the poller's longest interval (1 s), so it is seen even when the runner
    # gets little CPU; then orphan the grandchild.
    time.sleep(2.5)
    os._exit(0)
time.sleep(3600)
"""


def test_polling_remembers_descendants_that_were_orphaned(make_spec) -> None:
    """Without a subreaper the orphan goes to init; only the poller's memory finds it."""
    # The timeout ends the test file; it must leave the fork chain time to run (and be
    # polled) on a loaded machine.
    spec = make_spec({"test_orphan.py": ORPHANED_AFTER_A_WHILE}, floor=10.0, grace=0.2)
    job = execute(spec, reporter=NullReporter(), use_subreaper=False)
    assert job.results[0].outcome is Outcome.TIMEOUT
    [pid] = _pids(spec, "test_orphan.py")
    assert not _alive(pid)
