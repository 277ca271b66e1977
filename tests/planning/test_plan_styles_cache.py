"""``command = "auto"`` stages: a plan parses each file's style once per content (#15).

Parsing a large end-to-end script takes milliseconds and a plan runs on every CI event,
so styles are kept by content digest (the cache ``check`` keeps the same facts in) and
found through collection's digests: a warm plan reads no test file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testfleet.config import load_project
from testfleet.planning import make_plan
from testfleet.planning.request import PlanRequest
from testfleet.registry import cache, collect, collectable

TOML = """\
roots = ["tests"]

[stages.mixed]
backend = "cpu"
command = "auto"
"""
MARK = 'from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=5, suite="mixed")\n'
SCRIPT = MARK + 'if __name__ == "__main__":\n    print("ran")\n'
UNIT = MARK + "def test_a():\n    assert 1\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    (root / "tests").mkdir(parents=True)
    (root / "testfleet.toml").write_text(TOML)
    (root / "tests" / "test_script.py").write_text(SCRIPT)
    (root / "tests" / "test_unit.py").write_text(UNIT)
    return root


def _commands(root: Path) -> dict[str, str | None]:
    project = load_project(root)
    plan = make_plan(project, collect(project, gates=False), PlanRequest())
    return {t.file: t.command for job in plan.jobs for t in job.tests}


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which files had their style parsed ("script" or "unit"), in order."""
    seen: list[str] = []
    real_style = collectable.file_style

    def style(source: bytes):  # type: ignore[no-untyped-def]
        seen.append("script" if b"__main__" in source else "unit")
        return real_style(source)

    monkeypatch.setattr(collectable, "file_style", style)
    return seen


def test_a_warm_plan_neither_reads_nor_parses_a_file(root: Path, parsed: list[str], files_read: list[str]) -> None:
    want = {"tests/test_script.py": "python", "tests/test_unit.py": "pytest"}
    assert _commands(root) == want
    assert sorted(parsed) == ["script", "unit"]
    parsed.clear()
    files_read.clear()
    assert _commands(root) == want
    assert parsed == [] and files_read == []


def test_a_ci_workspace_elsewhere_with_the_caches_restored_parses_nothing(
        root: Path, tmp_path: Path, parsed: list[str]) -> None:
    """What the generated workflow's plan job keeps for an ``auto`` stage (the registry cache
    and the style cache), restored into a fresh checkout at another path: no file is parsed."""
    import shutil

    from testfleet.integrations.github_workflow import WorkflowOptions, collection_cache_paths

    want = _commands(root)
    checkout = tmp_path / "runner-2" / "_work" / "p"
    shutil.copytree(root, checkout, ignore=shutil.ignore_patterns(".testfleet"))
    for rel in collection_cache_paths(load_project(root).config, WorkflowOptions()):
        (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, checkout / rel)
    parsed.clear()
    assert _commands(checkout) == want
    assert parsed == []


def test_an_edited_file_is_parsed_again_and_its_old_entry_dropped(root: Path, parsed: list[str]) -> None:
    _commands(root)
    script = root / "tests" / "test_script.py"
    old = cache.content_digest(script.read_bytes())
    script.write_text(MARK + "def test_now():\n    pass\n")
    parsed.clear()
    assert _commands(root)["tests/test_script.py"] == "pytest"
    assert parsed == ["unit"]  # the edited file (its new content has no __main__ block), only
    key = cache.digest_cache_key(collectable.KIND)
    kept = cache.load(root / ".testfleet" / collectable.NAME, key, collectable.KIND)
    assert old not in kept, "a plan keeps entries for the tree's current contents only"
    assert set(kept) == {cache.content_digest(p.read_bytes()) for p in (root / "tests").iterdir()}


def test_a_plan_given_registrations_only_still_parses(root: Path) -> None:
    """Without collection's digests (a caller passing bare registrations) styles are read
    from the files, as before: never guessed."""
    from testfleet.registry.model import Registration

    project = load_project(root)
    regs = [Registration("tests/test_script.py", "cpu", "mixed", 5),
            Registration("tests/test_unit.py", "cpu", "mixed", 5)]
    plan = make_plan(project, regs, PlanRequest())
    assert {t.file: t.command for job in plan.jobs for t in job.tests} == {
        "tests/test_script.py": "python", "tests/test_unit.py": "pytest"}


def test_a_plan_leaves_something_else_in_the_cache_place_alone(root: Path) -> None:
    """A FIFO (or a directory) where the style cache belongs is not read, not replaced by a
    plan, which has no findings to say so in; ``check`` reports it and replaces it."""
    import os
    import stat

    from testfleet.cli.check import run_check

    place = root / ".testfleet" / collectable.NAME
    place.parent.mkdir()
    os.mkfifo(place)
    assert _commands(root)["tests/test_script.py"] == "python"
    assert stat.S_ISFIFO(os.lstat(place).st_mode)
    _, findings = run_check(load_project(root))
    assert [f.code for f in findings if f.file.endswith(collectable.NAME)] == ["cache-not-a-file"]
    assert place.is_file() and not stat.S_ISFIFO(os.lstat(place).st_mode)
