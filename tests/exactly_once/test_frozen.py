"""The frozen plan of a run: keyed by everything but history, first writer wins, refused
when damaged, never read or written through a symlink, and --plan-digest refuses another
plan on every path."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from testfleet.planning.frozen import freeze, frozen_key, load_frozen

from .helpers import clean_env, ran, run_pytest, run_testfleet


def _frozen(root: Path) -> list[Path]:
    return sorted((root / ".testfleet" / "plans").glob("*.json"))


def test_key_is_everything_but_history() -> None:
    base = frozen_key("sha256:a", "c1", "7")
    assert base == frozen_key("sha256:a", "c1", "7")
    assert len({base, frozen_key("sha256:b", "c1", "7"), frozen_key("sha256:a", "c2", "7"),
                frozen_key("sha256:a", "c1", "8"), frozen_key("sha256:a", "c1", None)}) == 5


def test_first_writer_wins(log_project: Callable[..., Path]) -> None:
    from testfleet.config import load_project
    from testfleet.planning import make_plan
    from testfleet.planning.request import PlanRequest
    from testfleet.registry import collect

    root = log_project(files=3, shards=2)
    project = load_project(root, root / "testfleet.toml")
    registry = collect(project)
    first = make_plan(project, registry, PlanRequest())
    second = make_plan(project, registry, PlanRequest(),
                       {(r.file, "s"): (1.0, "history") for r in registry.registrations})
    assert first.digest != second.digest
    path = root / ".testfleet" / "plans" / "k.json"
    assert freeze(path, first).digest == first.digest
    assert freeze(path, second).digest == first.digest  # the second shard gets the first's
    loaded = load_frozen(path)
    assert loaded is not None and loaded.digest == first.digest


def test_each_ci_run_plans_afresh_and_keeps_its_plan(log_project: Callable[..., Path]) -> None:
    root = log_project(files=4, shards=2)
    for run in ("1", "1", "2"):
        res = run_testfleet(root, "run", "--stage", "s", "--shard", "1/2", "--display", "plain",
                            env=clean_env(GITHUB_RUN_ID=run))
        assert res.returncode == 0, res.stderr
    assert len(_frozen(root)) == 2  # run 1 (twice) and run 2
    reused = run_testfleet(root, "run", "--stage", "s", "--shard", "2/2", "--display", "plain",
                           env=clean_env(GITHUB_RUN_ID="2"))
    assert "executing this run's frozen plan" in reused.stderr


def test_plan_digest_refuses_another_plan_on_every_path(log_project: Callable[..., Path]) -> None:
    root = log_project(files=3, shards=2)
    wrong = "sha256:" + "0" * 64
    res = run_testfleet(root, "run", "--stage", "s", "--shard", "1/2", "--plan-digest", wrong)
    assert res.returncode == 2 and "not the plan of this run" in res.stderr
    assert "nothing was run" in res.stderr
    res = run_pytest(root, "--testfleet-stage", "s", "--testfleet-shard", "2/2",
                     env=clean_env(TESTFLEET_PLAN_DIGEST=wrong))
    assert res.returncode == 4 and "not the plan of this run" in res.stdout + res.stderr
    assert ran(root) == {}
    [frozen] = _frozen(root)
    right = json.loads(frozen.read_text())["digest"]
    res = run_pytest(root, "--testfleet-stage", "s", "--testfleet-shard", "2/2",
                     "--testfleet-plan-digest", right)
    assert res.returncode == 0, res.stdout
    res = run_testfleet(root, "run", "--stage", "s", "--shard", "1/2", "--display", "plain",
                        env=clean_env(TESTFLEET_PLAN_DIGEST=right))
    assert res.returncode == 0, res.stderr
    assert sum(ran(root).values()) == 3


def test_a_damaged_frozen_plan_is_refused(log_project: Callable[..., Path]) -> None:
    root = log_project(files=2, shards=2)
    assert run_testfleet(root, "run", "--stage", "s", "--shard", "1/2",
                         "--display", "plain").returncode == 0
    [frozen] = _frozen(root)
    frozen.write_text(frozen.read_text().replace('"shards":2', '"shards":3'))
    res = run_testfleet(root, "run", "--stage", "s", "--shard", "2/2")
    assert res.returncode == 2 and "frozen plan of this run is unusable" in res.stderr
    assert str(frozen.name) in res.stderr and "Traceback" not in res.stderr


def test_a_symlinked_plans_directory_is_not_written_through(
        log_project: Callable[..., Path], tmp_path: Path) -> None:
    root = log_project(files=2, shards=2)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / ".testfleet").mkdir()
    (root / ".testfleet" / "plans").symlink_to(elsewhere)
    res = run_testfleet(root, "run", "--stage", "s", "--shard", "1/2", "--display", "plain")
    assert res.returncode == 0, res.stderr
    assert "cannot freeze this run's plan" in res.stderr
    assert list(elsewhere.iterdir()) == []


def _with_foreign_file(path: Path, job_index: int) -> None:
    """Add a file outside roots to a job of the plan at ``path`` and recompute its digest,
    as anything that can write the file can."""
    from testfleet.planning.model import content_digest

    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["jobs"][job_index]["tests"].append({"file": "evil/test_f9.py", "estimate": 1.0,
                                            "source": "est_time"})
    doc["digest"] = content_digest(doc)
    path.write_text(json.dumps(doc), encoding="utf-8")


def test_an_edited_frozen_plan_with_its_digest_recomputed_is_refused_on_every_path(
        log_project: Callable[..., Path]) -> None:
    root = log_project(files=2, shards=2)
    (root / "evil").mkdir()
    (root / "evil" / "test_f9.py").write_text((root / "tests/test_f0.py").read_text())
    assert run_testfleet(root, "run", "--stage", "s", "--shard", "1/2",
                         "--display", "plain").returncode == 0
    [frozen] = _frozen(root)
    _with_foreign_file(frozen, 1)
    res = run_testfleet(root, "run", "--stage", "s", "--shard", "2/2")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "evil/test_f9.py not planned for s" in res.stderr and "nothing was run" in res.stderr
    res = run_pytest(root, "--testfleet-stage", "s", "--testfleet-shard", "2/2")
    assert res.returncode == 4 and "evil/test_f9.py not planned for s" in res.stdout + res.stderr
    assert "evil/test_f9.py" not in ran(root) and sum(ran(root).values()) == 1


def test_an_unpinned_edited_plan_file_is_refused_on_every_path(
        log_project: Callable[..., Path]) -> None:
    root = log_project(files=2, shards=1)
    (root / "evil").mkdir()
    (root / "evil" / "test_f9.py").write_text((root / "tests/test_f0.py").read_text())
    assert run_testfleet(root, "plan", "--stage", "s", "--format", "json",
                         "--output", "plan.json").returncode == 0
    _with_foreign_file(root / "plan.json", 0)
    job = json.loads((root / "plan.json").read_text())["jobs"][0]["id"]
    res = run_testfleet(root, "run", "--plan", "plan.json", "--job", job)
    assert res.returncode == 2 and "evil/test_f9.py not registered for stage s" in res.stderr
    res = run_pytest(root, "--testfleet-plan", "plan.json", "--testfleet-job", job)
    assert res.returncode == 4 and "not registered for stage s" in res.stdout + res.stderr
    assert ran(root) == {}
