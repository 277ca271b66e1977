"""The breaker's state in the history (#41), on both engines: forced by a person (who and
why), listed with its episodes, carried by a whole-history bundle and merged by union; a
pull request's bundle changes no breaker; ``check`` fails on one open too long, with the
one dormancy line; a lane that does not opt in cannot be forced."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

CONFIG = """\
[tool.testfleet]
roots = ["tests"]

[tool.testfleet.breaker]
max_open_days = 3

[tool.testfleet.stages.mi300x]
backend = "rocm"
runs_on = ["self-hosted", "mi300x"]
breaker = { close_after = 3 }

[tool.testfleet.stages.cpu]
backend = "cpu"
"""


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("TESTFLEET_DATABASE_URL", raising=False)
    (tmp_path / "tests").mkdir()
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    return tmp_path


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], root: Path) -> Callable[..., tuple[int, str, str]]:
    from testfleet.cli.main import main

    def go(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = 0
        try:
            main(["-C", str(root), *args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        return code, out, err

    return go


def _lanes(run: Callable[..., tuple[int, str, str]], *db: str) -> dict[str, dict]:  # type: ignore[type-arg]
    code, out, err = run("breaker", "list", "--format", "json", *db)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema"] == "testfleet.breakers/1"
    return {lane["lane"]: lane for lane in doc["lanes"]}


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_forced_open_and_close_record_who_and_why(run: Callable[..., tuple[int, str, str]],
                                                  engine: str, request: pytest.FixtureRequest) -> None:
    db: tuple[str, ...] = ()
    if engine == "postgresql":
        url = request.getfixturevalue("pg_url")
        assert run("db", "init", "--database", url)[0] == 0
        db = ("--database", url)
    assert _lanes(run, *db)["mi300x"]["status"] == "closed"
    assert _lanes(run, *db)["mi300x"]["close_after"] == 3
    code, out, err = run("breaker", "open", "mi300x", "--reason", "drained, see #2231",
                         "--by", "alice", *db)
    assert code == 0 and "breaker mi300x: open by alice" in out, err
    code, _, err = run("breaker", "open", "mi300x", "--reason", "again", "--by", "alice", *db)
    assert code == 2 and "open already" in err
    lane = _lanes(run, *db)["mi300x"]
    assert (lane["status"], lane["opened_by"], lane["reason"]) == ("open", "alice", "drained, see #2231")
    code, out, err = run("breaker", "close", "mi300x", "--reason", "driver fixed", "--by", "bob", *db)
    assert code == 0, err
    (episode,) = _lanes(run, *db)["mi300x"]["episodes"]
    assert (episode["opened_by"], episode["closed_by"]) == ("alice", "bob")


@pytest.mark.parametrize(("args", "said"), [
    (["open", "cpu", "--reason", "x"], "lane 'cpu' has no breaker"),
    (["open", "nope", "--reason", "x"], "lanes with one: mi300x"),
    (["open", "mi300x", "--reason", "  "], "--reason: say why"),
    (["open", "mi300x", "--reason", "a\nb"], "--reason"),
    (["open", "mi300x"], "Missing option '--reason'"),
])
def test_hostile_arguments_are_exit_2_naming_them(run: Callable[..., tuple[int, str, str]],
                                                  args: list[str], said: str) -> None:
    code, _, err = run("breaker", *args, "--by", "x")
    assert code == 2 and said in err and "Traceback" not in err


def test_a_whole_history_bundle_carries_the_breaker_and_a_pull_request_changes_none(
        run: Callable[..., tuple[int, str, str]], root: Path, tmp_path: Path) -> None:
    assert run("breaker", "open", "mi300x", "--reason", "drained", "--by", "alice")[0] == 0
    bundle = tmp_path / "all.bundle"
    code, _, err = run("history", "export", "--output", str(bundle), "--event", "push",
                       "--ref", "refs/heads/main")
    assert code == 0, err
    other = tmp_path / "other.db"
    code, _, err = run("history", "merge", str(bundle), "--database", str(other))
    assert code == 0, err
    assert _lanes(run, "--database", str(other))["mi300x"]["status"] == "open"
    code, _, err = run("history", "merge", str(bundle), "--database", str(other))  # idempotent
    assert code == 0 and len(_lanes(run, "--database", str(other))["mi300x"]["episodes"]) == 1
    pr = tmp_path / "pr.bundle"
    code, _, err = run("history", "export", "--output", str(pr), "--event", "pull_request",
                       "--ref", "refs/pull/7/merge")
    fresh = tmp_path / "fresh.db"
    code, _, err = run("history", "merge", str(pr), "--database", str(fresh), "--allow-untrusted")
    assert code == 0 and "breaker event(s) were left out" in err
    assert _lanes(run, "--database", str(fresh))["mi300x"]["status"] == "closed"


def test_an_edited_breaker_event_in_a_bundle_is_refused(root: Path, tmp_path: Path,
                                                        run: Callable[..., tuple[int, str, str]]) -> None:
    from testfleet.history.bundle import BundleError, decode, encode, read_file

    assert run("breaker", "open", "mi300x", "--reason", "drained", "--by", "alice")[0] == 0
    bundle = tmp_path / "all.bundle"
    assert run("history", "export", "--output", str(bundle))[0] == 0
    payload = read_file(bundle).payload
    event = payload.breakers[-1]
    forged = event.model_copy(update={"state": event.state.replace('"alice"', '"mallory"')})
    raw = encode(payload.model_copy(update={"breakers": [forged]}))
    with pytest.raises(BundleError, match="is not its content's"):
        decode(raw, "forged.bundle")


def test_check_fails_on_a_breaker_open_too_long_with_the_dormancy_line(
        run: Callable[..., tuple[int, str, str]], root: Path) -> None:
    import time

    from testfleet.app.breaker import force_lane
    from testfleet.config import load_project

    project = load_project(root)
    force_lane(project, None, "mi300x", open_it=True, by="alice", reason="drained",
               now=time.time() - 4 * 86400)
    code, out, err = run("check")
    assert code == 1, out + err
    assert "breaker-open-too-long" in out and "open 4.0 days (max_open_days = 3)" in out
    assert 'disabled = "breaker opened by alice: drained' in out


def test_observe_folds_runs_written_straight_to_the_database(
        run: Callable[..., tuple[int, str, str]], root: Path) -> None:
    """Jobs that write to the database bring no bundle for 'history merge' to fold in:
    'breaker observe --run-id' reads the run's records from the history itself. Two runs
    in which one device error took the whole lane open it; a lane with no breaker, or
    another run's records, move nothing."""
    from testfleet.config import load_project
    from testfleet.failures.signature import failure_signature
    from testfleet.store import open_store
    from testfleet.store.durations import Execution

    sig = failure_signature("RuntimeError: No HIP GPUs are available\n")
    project = load_project(root)
    with open_store(project) as store:
        for ci_run in ("101", "102"):
            store.record_executions([
                Execution(f"tests/t{i}.py", "mi300x", "rocm", 1.0, "FAILED", ci_run_id=ci_run,
                          timestamp=100.0 + i, signature=sig.digest) for i in range(8)],
                signatures=[sig])
    code, out, err = run("breaker", "observe", "--run-id", "101")
    assert code == 0, err
    assert _lanes(run)["mi300x"]["status"] == "closed" and _lanes(run)["mi300x"]["streak"] == 1
    code, out, err = run("breaker", "observe", "--run-id", "102")
    assert code == 0 and "run 102: 1 breaker change(s)" in out, out + err
    lane = _lanes(run)["mi300x"]
    assert lane["status"] == "open" and [r["run"] for r in lane["runs"]] == ["101", "102"]
    code, out, err = run("breaker", "observe", "--run-id", "999")  # nothing of it recorded
    assert code == 0 and "0 breaker change(s)" in out
    code, out, err = run("breaker", "observe", "--run-id", "1\n2")
    assert code == 2 and "Traceback" not in err
