"""Queue mode end to end (#40): real ``testfleet run`` processes against the test
PostgreSQL server. One runner is SIGKILLed mid-file (its whole process group: a lost
machine), one joins late, one arrives after the end; every planned file gets exactly one
report and reconcile passes. Then the runners' database connections are cut mid-run
(``pg_terminate_backend`` on their backends only: the test server is shared and is not
restarted): they wait, resume, and nothing is recorded twice or lost."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from .conftest import QueueProject

pytestmark = pytest.mark.timeout(300) if hasattr(pytest.mark, "timeout") else []

FILES = {"test_slow.py": (60.0, 8.0), **{f"test_f{i}.py": (10.0 - i, 1.0) for i in range(8)}}


def _wait_for(what: str, cond, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _finish(proc, timeout: float = 120.0) -> int:  # type: ignore[no-untyped-def]
    return int(proc.wait(timeout=timeout))


def _exactly_once(project: QueueProject) -> None:
    rows = project.sql("SELECT file, state, outcome FROM queue_items ORDER BY file")
    assert sorted(r[0] for r in rows) == sorted(f"tests/{f}" for f in FILES)
    assert {(r[1], r[2]) for r in rows} == {("done", "PASSED")}, rows
    finals = Counter(r[0] for r in project.sql(
        "SELECT file FROM queue_attempts WHERE status = 'final'"))
    assert finals == Counter({f"tests/{f}": 1 for f in FILES}), finals


def _reconcile(project: QueueProject) -> dict:  # type: ignore[type-arg]
    res = project.testfleet("reconcile", "--plan", str(project.plan), "--format", "json",
                            str(project.root / "statuses"))
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def test_killed_runner_late_runner_and_an_empty_arrival(queue_project) -> None:  # type: ignore[no-untyped-def]
    project = queue_project(FILES)
    plan = json.loads(project.plan.read_text())
    jobs = [j["id"] for j in plan["jobs"]]
    assert len(jobs) == 3 and all(j["queue"]["execution"] == "queue" for j in plan["jobs"])
    a = project.start(jobs[0], "a")
    b = project.start(jobs[1], "b")
    marker = project.root / "started" / "test_slow.py"
    _wait_for("the long file to start", marker.exists)
    holder = project.sql("SELECT runner FROM queue_items WHERE file = 'tests/test_slow.py'")
    pid = int(str(holder[0][0]).split(":")[1])
    victim, survivor = (a, b) if pid == a.pid else (b, a)
    assert pid in (a.pid, b.pid)
    os.killpg(victim.pid, signal.SIGKILL)  # the machine is gone, mid-file
    victim.wait(timeout=10)
    c = project.start(jobs[2], "c")  # joins late
    assert _finish(survivor) == 0, project.log("a") + project.log("b")
    assert _finish(c) == 0, project.log("c")
    _exactly_once(project)
    expired = project.sql("SELECT file FROM queue_attempts WHERE status = 'expired'")
    assert expired == [("tests/test_slow.py",)]
    # the killed runner's execution counts nowhere: the file ran again and was reported once
    assert Counter(project.ran())["test_slow.py"] == 2
    doc = _reconcile(project)
    assert doc["ok"] is True and doc["outcomes"] == {"PASSED": len(FILES)}, doc
    # a runner that arrives now finds nothing to do, says so, exits 0
    late = project.start(jobs[0], "late")
    assert _finish(late) == 0
    assert "was empty when this runner arrived" in project.log("late")
    status = project.testfleet("queue", "status", "--plan", str(project.plan), "--format",
                               "json")
    assert status.returncode == 0, status.stderr
    lane = json.loads(status.stdout)["lanes"][0]
    assert (lane["done"], lane["pending"], lane["claimed"], lane["expired"]) == (len(FILES), 0,
                                                                               0, 1)


def test_connections_cut_mid_run(queue_project) -> None:  # type: ignore[no-untyped-def]
    project = queue_project(FILES, shards=2, owner_role=True)
    jobs = [j["id"] for j in json.loads(project.plan.read_text())["jobs"]]
    runners = [project.start(jobs[0], "a"), project.start(jobs[1], "b")]
    _wait_for("the long file to start", (project.root / "started" / "test_slow.py").exists)
    # both runners in a file, past start-up: a runner that cannot reach the database as it
    # starts fails loudly (exit 2) and leaves its share to the others, which is another test
    _wait_for("both runners to hold a file",
              lambda: all("==> [" in project.log(name) for name in ("a", "b")))
    cut = 0
    for _ in range(6):  # cut every connection the runners hold, again and again
        cut += len(project.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE application_name = %s", project.app))
        time.sleep(0.7)
    assert cut >= 1
    assert [_finish(r) for r in runners] == [0, 0], project.log("a") + project.log("b")
    _exactly_once(project)
    assert _reconcile(project)["ok"] is True
    assert sorted(Counter(project.ran()).values()) == [1] * len(FILES)  # nothing ran twice


def test_sqlite_is_refused_with_what_to_do(queue_project, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    project = queue_project({"test_a.py": (1.0, 0.0)}, shards=1)
    job = json.loads(project.plan.read_text())["jobs"][0]["id"]
    res = project.testfleet("run", "--plan", str(project.plan), "--job", job, "--database",
                            str(tmp_path / "h.db"))
    assert res.returncode == 2
    assert "queue mode" in res.stderr and "PostgreSQL" in res.stderr
    assert "Traceback" not in res.stderr


def test_database_down_and_back_mid_run(queue_project, outage) -> None:  # type: ignore[no-untyped-def]
    """The database goes away for longer than a lease (every connection reset, new ones
    refused) while a file runs, and comes back on the same address: the runners wait and
    resume; the file whose lease expired meanwhile is reported once."""
    project = queue_project(FILES, shards=2)
    project.url = outage.url(project.url)
    jobs = [j["id"] for j in json.loads(project.plan.read_text())["jobs"]]
    runners = [project.start(jobs[0], "a"), project.start(jobs[1], "b")]
    _wait_for("the long file to start", (project.root / "started" / "test_slow.py").exists)
    # both runners in a file, past start-up: a runner that cannot reach the database as it
    # starts fails loudly (exit 2) and leaves its share to the others, which is another test
    _wait_for("both runners to hold a file",
              lambda: all("==> [" in project.log(name) for name in ("a", "b")))
    outage.down()
    time.sleep(7)  # longer than the 5 s lease
    outage.up()
    assert [_finish(r) for r in runners] == [0, 0], project.log("a") + project.log("b")
    logs = project.log("a") + project.log("b")
    assert "queue database unreachable" in logs and "queue database back" in logs
    _exactly_once(project)
    assert _reconcile(project)["ok"] is True


def test_database_gone_for_good_fails_loudly(queue_project, outage) -> None:  # type: ignore[no-untyped-def]
    project = queue_project(FILES, shards=1)
    project.url = outage.url(project.url)
    job = json.loads(project.plan.read_text())["jobs"][0]["id"]
    runner = project.start(job, "a", TESTFLEET_QUEUE_DB_WAIT="3")
    _wait_for("the long file to start", (project.root / "started" / "test_slow.py").exists)
    outage.down()
    assert _finish(runner) == 1
    log = project.log("a")
    assert "the queue database did not come back" in log and "Traceback" not in log
    status = json.loads((project.root / "statuses" / "a.json").read_text())
    assert status["complete"] is False and "queue database lost" in status["reason"]
    # nothing this runner did not report was recorded: the file is still claimed, and
    # comes back to another runner when its lease expires
    rows = project.sql("SELECT state FROM queue_items WHERE file = 'tests/test_slow.py'")
    assert rows == [("claimed",)]
    assert project.sql("SELECT count(*) FROM queue_attempts WHERE status = 'final'") == [(0,)]


def test_sigterm_puts_the_file_back_for_another_runner(queue_project) -> None:  # type: ignore[no-untyped-def]
    project = queue_project({"test_slow.py": (60.0, 8.0), "test_f0.py": (1.0, 0.0)}, shards=2)
    jobs = [j["id"] for j in json.loads(project.plan.read_text())["jobs"]]
    first = project.start(jobs[0], "a")
    _wait_for("the long file to start", (project.root / "started" / "test_slow.py").exists)
    os.kill(first.pid, signal.SIGTERM)
    assert _finish(first) == 128 + signal.SIGTERM
    released = project.sql("SELECT file FROM queue_attempts WHERE status = 'released'")
    assert released == [("tests/test_slow.py",)]
    assert project.sql("SELECT state FROM queue_items WHERE file = 'tests/test_slow.py'") == [
        ("pending",)]
    second = project.start(jobs[1], "b")
    assert _finish(second) == 0, project.log("b")
    rows = project.sql("SELECT file, state, outcome FROM queue_items ORDER BY file")
    assert [(r[1], r[2]) for r in rows] == [("done", "PASSED")] * 2
    assert _reconcile(project)["ok"] is True
    table = project.testfleet("queue", "status", "--plan", str(project.plan))
    assert table.returncode == 0 and "2 done of 2" in table.stdout, table.stdout


def test_a_failure_fails_the_lane_fast_and_reconcile_says_not_run(queue_project) -> None:  # type: ignore[no-untyped-def]
    files = {"test_bad.py": (50.0, 0.0), **{f"test_f{i}.py": (5.0 - i, 0.0) for i in range(4)}}
    project = queue_project(files, shards=1, tail={"test_bad.py": "raise SystemExit(1)"})
    job = json.loads(project.plan.read_text())["jobs"][0]["id"]
    runner = project.start(job, "a")
    assert _finish(runner) == 1
    assert "fast-fail: tests/test_bad.py FAILED (4 queued file(s) reported NOT RUN)" in \
        project.log("a")
    res = project.testfleet("reconcile", "--plan", str(project.plan), "--format", "json",
                            str(project.root / "statuses"))
    doc = json.loads(res.stdout)
    assert res.returncode == 1 and len(doc["not_run"]) == 4 and doc["outcomes"] == {"FAILED": 1}


def test_a_pull_requests_outcomes_never_enter_the_history(queue_project) -> None:  # type: ignore[no-untyped-def]
    project = queue_project({"test_a.py": (2.0, 0.0), "test_b.py": (1.0, 0.0)}, shards=1)
    config = project.root / "testfleet.toml"  # a pull request's queue needs its own credential
    config.write_text(config.read_text() + '\n[ci]\nqueue_secret = "TESTFLEET_QUEUE_URL"\n')
    pr_plan = project.root / "pr-plan.json"
    made = project.testfleet("plan", "--event", "pull_request", "--format", "json", "-o",
                             str(pr_plan))
    assert made.returncode == 0, made.stderr
    pr = json.loads(pr_plan.read_text())
    assert pr["digest"] != project.digest and pr["jobs"][0]["queue"]
    res = project.testfleet("run", "--plan", str(pr_plan), "--job", pr["jobs"][0]["id"], "-v")
    assert res.returncode == 0, res.stderr
    assert "records no history" in res.stderr
    assert project.sql("SELECT pull_request FROM queue_lanes") == [(True,)]
    assert project.sql("SELECT count(*) FROM executions") == [(0,)]
    assert project.sql("SELECT count(*) FROM queue_items WHERE state = 'done'") == [(2,)]
    # the default branch's run of the same lane records its history
    job = json.loads(project.plan.read_text())["jobs"][0]["id"]
    res = project.testfleet("run", "--plan", str(project.plan), "--job", job)
    assert res.returncode == 0, res.stderr
    assert project.sql("SELECT count(*) FROM executions") == [(2,)]


def test_a_planned_file_that_cannot_start_is_reported_error_once(queue_project) -> None:  # type: ignore[no-untyped-def]
    project = queue_project({"test_a.py": (2.0, 0.0), "test_b.py": (1.0, 0.0)}, shards=1)
    (project.root / "tests" / "test_a.py").unlink()  # planned, gone from the checkout
    job = json.loads(project.plan.read_text())["jobs"][0]["id"]
    res = project.testfleet("run", "--plan", str(project.plan), "--job", job,
                            "--plan-digest", project.digest, "--continue-on-error")
    assert res.returncode == 1, res.stderr
    rows = project.sql("SELECT file, state, outcome FROM queue_items ORDER BY file")
    assert rows == [("tests/test_a.py", "done", "ERROR"), ("tests/test_b.py", "done", "PASSED")]
