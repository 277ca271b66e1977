"""The config snapshot: a faithful copy of a validated config, or not used at all."""

from __future__ import annotations

import json
from pathlib import Path

from testfleet.config import load_project
from testfleet.registry import collect
from testfleet.registry.collector import collect_settings
from testfleet.registry.settings import NAME, fast, from_project

from .conftest import BASE_CONFIG


def snapshot_path(project) -> Path:
    return project.root / ".testfleet" / NAME


def test_snapshot_round_trips_the_settings(tree) -> None:
    project = tree(config=BASE_CONFIG + '[backends.npu]\nmarkers = ["register_npu_ci"]\n')
    collect(project)
    fast_settings = fast(project.root, None)
    assert fast_settings is not None
    full = from_project(project)
    assert fast_settings.rules.marker_backend == full.rules.marker_backend
    assert fast_settings.rules.stages == full.rules.stages
    assert [(i.path, i.suite, i.est_time, i.pattern_text) for i in fast_settings.rules.implicit] == [
        (i.path, i.suite, i.est_time, i.pattern_text) for i in full.rules.implicit]
    assert (fast_settings.roots, fast_settings.exclude, fast_settings.exclude_regex) == (
        full.roots, full.exclude, full.exclude_regex)
    a, b = collect_settings(fast_settings), collect(project)
    assert (a.registrations, a.findings, a.files) == (b.registrations, b.findings, b.files)


def test_found_from_a_subdirectory_and_with_config_flag(tree) -> None:
    project = tree()
    collect(project)
    assert fast(project.root / "tests" / "unit", None) is not None
    assert fast(Path("/"), project.root / "testfleet.toml") is not None


def test_config_edit_makes_the_snapshot_stale(tree) -> None:
    project = tree()
    collect(project)
    (project.root / "testfleet.toml").write_text(BASE_CONFIG.replace("est_time = 5", "est_time = 7"))
    assert fast(project.root, None) is None
    registry = collect(load_project(project.root))
    assert next(r for r in registry.registrations if r.implicit).est_time == 7.0
    assert fast(project.root, None).rules.implicit[0].est_time == 7.0


def test_damaged_or_forged_snapshot_is_ignored(tree) -> None:
    project = tree()
    collect(project)
    path = snapshot_path(project)
    raw = path.read_bytes()
    path.write_bytes(raw[:-10])
    assert fast(project.root, None) is None
    head, _, body = raw.partition(b"\n")
    doc = json.loads(body)
    doc["stages"] = [["x", 1, "pytest", False]]
    forged = json.dumps(doc).encode()
    header = json.loads(head)
    import zlib

    header.update(crc=zlib.crc32(forged), size=len(forged))
    path.write_bytes(json.dumps(header).encode() + b"\n" + forged)
    assert fast(project.root, None) is None


def test_invalid_config_never_takes_the_fast_path(tree, run_cli) -> None:
    project = tree()
    code, _, _ = run_cli("-C", str(project.root), "list", "--format", "json")
    assert code == 0
    (project.root / "testfleet.toml").write_text(BASE_CONFIG + "bogus = 1\n")
    code, out, err = run_cli("-C", str(project.root), "list", "--format", "json")
    assert code == 2 and "unknown key" in err and out == ""


def test_no_cache_bypasses_the_snapshot(tree, run_cli) -> None:
    project = tree()
    code, _, _ = run_cli("-C", str(project.root), "list", "--no-cache")
    assert code == 0 and not (project.root / ".testfleet").exists()


def test_config_search_matches_the_config_module(tmp_path: Path) -> None:
    import testfleet.registry.settings as settings
    from testfleet.config import find_config

    # The fast path and the validated load share one search (no second copy to drift).
    assert settings.find_config is find_config
    tmp_path = tmp_path.resolve()

    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text("[tool.testfleet]\n")
    (tmp_path / "a" / "pyproject.toml").write_text("[project]\nname = 'x'\n")  # no [tool.testfleet]: skipped
    (tmp_path / "a" / "b" / "testfleet.toml").write_text("")
    (tmp_path / "a" / "broken" ).mkdir()
    (tmp_path / "a" / "broken" / "pyproject.toml").write_text("[[[")
    top, nearest = tmp_path / "pyproject.toml", tmp_path / "a" / "b" / "testfleet.toml"
    expected = {tmp_path: top, tmp_path / "a": top, tmp_path / "a" / "b": nearest,
                tmp_path / "a" / "b" / "c": nearest, tmp_path / "a" / "broken": top}
    for start, found in expected.items():
        assert find_config(start) == found, start
