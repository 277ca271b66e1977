"""Collection of a whole tree: discovery, implicit directories, symlinks, tree-level findings."""

from __future__ import annotations

import os
from pathlib import Path

from testfleet.config import load_project
from testfleet.registry import Registration, collect

from .conftest import BASE_CONFIG, GOOD_KEYS

REPO = Path(__file__).resolve().parents[2]


def codes(registry, file: str | None = None) -> list[str]:
    return [f.code for f in registry.findings if file is None or f.file == file]


def test_good_tree_is_clean_and_sorted(tree) -> None:
    registry = collect(tree(), use_cache=False)
    assert [f for f in registry.findings if f.severity == "error"] == []
    assert [(r.file, r.backend) for r in registry.registrations] == sorted(GOOD_KEYS)
    assert registry.files == sorted({k[0] for k in GOOD_KEYS})
    rocm = next(r for r in registry.registrations if r.backend == "rocm")
    assert rocm == Registration(file="tests/gpu/test_good_gpu.py", backend="rocm", suite="stage-c-4-gpu-mi300x",
                                est_time=600.0, line=3, col=1, labels=("amd",), nightly=False,
                                disabled="MI300X pool down, see #1", implicit=False)
    fast = next(r for r in registry.registrations if r.implicit)
    assert (fast.file, fast.suite, fast.est_time, fast.line) == ("tests/fast/test_quick.py", "stage-a-cpu", 5.0, 0)


def test_unused_stage_warning_points_at_config(tree) -> None:
    registry = collect(tree(), use_cache=False)
    (f,) = [f for f in registry.findings if f.code == "unused-stage"]
    assert (f.file, f.severity, f.key) == ("testfleet.toml", "warning", "stages.stage-b-cpu")
    assert f.line == BASE_CONFIG.splitlines().index("[stages.stage-b-cpu]") + 1


def test_explicit_cpu_marker_overrides_implicit_directory(tree) -> None:
    src = 'from testfleet import register_cpu_ci\nregister_cpu_ci(60, "stage-b-cpu")\nif __name__ == "__main__":\n    main()\n'
    registry = collect(tree({"tests/fast/test_slow.py": src}), use_cache=False)
    regs = [r for r in registry.registrations if r.file == "tests/fast/test_slow.py"]
    assert [(r.suite, r.est_time, r.implicit) for r in regs] == [("stage-b-cpu", 60.0, False)]
    assert codes(registry, "tests/fast/test_slow.py") == []


def test_excluded_and_hidden_and_non_matching_files_are_ignored(tree) -> None:
    registry = collect(tree({
        "tests/manual/test_by_hand.py": "broken(",
        "tests/.hidden/test_x.py": "x",
        "tests/unit/helpers.py": "x = 1\n",
        "tests/unit/__pycache__/test_good.cpython-311.pyc": b"\0",
    }), use_cache=False)
    assert not any(f.severity == "error" for f in registry.findings)
    assert "tests/manual/test_by_hand.py" not in registry.files


def test_symlinked_file_and_directory_are_errors_never_followed(tree, tmp_path: Path) -> None:
    project = tree()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "test_secret.py").write_text("register_cpu_ci(5, 'stage-a-cpu')\n")
    os.symlink(outside, project.root / "tests" / "linked")
    os.symlink(outside / "test_secret.py", project.root / "tests" / "unit" / "test_link.py")
    os.symlink(outside / "test_secret.py", project.root / "tests" / "unit" / "data.txt")  # not a test: fine
    registry = collect(project, use_cache=False)
    symlinks = sorted((f.file, f.message.split(" (")[0]) for f in registry.findings if f.code == "symlink")
    assert symlinks == [("tests/linked", "symlinked directory"), ("tests/unit/test_link.py", "symlinked test file")]
    assert not any("secret" in r.file for r in registry.registrations)
    assert {(r.file, r.backend) for r in registry.registrations} >= GOOD_KEYS


def test_symlinked_root_is_an_error(tree, tmp_path: Path) -> None:
    project = tree(good=False)
    real = tmp_path / "real_tests"
    real.mkdir()
    os.symlink(real, project.root / "tests")
    registry = collect(project, use_cache=False)
    assert [(f.file, f.code) for f in registry.findings if f.severity == "error"] == [("tests", "symlink")]


def test_missing_root_is_a_warning(tree) -> None:
    project = tree(config=BASE_CONFIG.replace('roots = ["tests"]', 'roots = ["tests", "more"]'))
    registry = collect(project, use_cache=False)
    assert [(f.file, f.severity) for f in registry.findings if f.code == "missing-root"] == [("more", "warning")]


def test_stray_test_file_outside_roots_is_a_warning_in_check_only(tree) -> None:
    project = tree({"scripts/test_stray.py": "x = 1\n", "node_modules/pkg/test_vendored.py": "",
                    "venv/lib/test_site.py": "", ".git/test_git.py": ""})
    assert "outside-roots" not in codes(collect(project, use_cache=False))
    strays = [f for f in collect(project, use_cache=False, thorough=True).findings if f.code == "outside-roots"]
    assert [(f.file, f.severity) for f in strays] == [("scripts/test_stray.py", "warning")]


def test_gate_calls_are_collected_with_literal_kwargs(tree) -> None:
    src = ('from testfleet import register_cpu_ci, register_ci_gate\nregister_cpu_ci(5, "stage-a-cpu")\n'
           'register_ci_gate(metric_key="train/loss", steps=[10, 20], constraint={"rel": 0.1})\n'
           "register_ci_gate(KEY, metric_key=name(), **extra)\n")
    project = tree({"tests/unit/test_gated.py": src})
    registry = collect(project, use_cache=True)
    first, second = registry.gates
    assert (first.file, first.line, first.col) == ("tests/unit/test_gated.py", 3, 1)
    assert first.kwargs == {"metric_key": "train/loss", "steps": [10, 20], "constraint": {"rel": 0.1}}
    assert (second.positional, second.non_literal, second.kwargs) == (1, ("metric_key", "**"), {})
    again = collect(project, use_cache=True)  # from the cache this time
    assert again.gates == registry.gates


def test_gate_in_function_is_reported(tree) -> None:
    src = ('from testfleet import register_cpu_ci, register_ci_gate\nregister_cpu_ci(5, "stage-a-cpu")\n'
           'def test_x():\n    register_ci_gate(metric_key="x")\n')
    registry = collect(tree({"tests/unit/test_g.py": src}), use_cache=False)
    assert [(f.line, f.code) for f in registry.findings if f.file == "tests/unit/test_g.py"] == [
        (4, "marker-in-function")]


def test_extra_backend_from_config(tree) -> None:
    config = BASE_CONFIG + '[backends.npu]\nmarkers = ["register_npu_ci"]\nlabels_required = false\n' \
        '[stages.stage-npu]\nbackend = "npu"\n'
    src = 'from x import register_npu_ci\nregister_npu_ci(30, "stage-npu")\n'
    registry = collect(tree({"tests/unit/test_npu.py": src}, config=config), use_cache=False)
    assert ("tests/unit/test_npu.py", "npu") in {(r.file, r.backend) for r in registry.registrations}


def test_example_project_is_clean(example_project: Path) -> None:
    project = load_project(example_project)
    registry = collect(project, use_cache=False, thorough=True)
    assert registry.findings == []
    assert len(registry.files) >= 30
    on_disk = {p.relative_to(example_project).as_posix() for p in (example_project / "tests").rglob("test_*.py")
               if "manual" not in p.parts}
    assert set(registry.files) == on_disk
    assert {r.file for r in registry.registrations} == on_disk



def test_project_root_as_discovery_root(tree) -> None:
    config = BASE_CONFIG.replace('roots = ["tests"]', 'roots = [".", "tests"]')
    registry = collect(tree({"test_top.py": "from testfleet import register_cpu_ci\nregister_cpu_ci(1, 'stage-a-cpu')\n"},
                            config=config), use_cache=False, thorough=True)
    assert "test_top.py" in registry.files and "tests/fast/test_quick.py" in registry.files
    assert len(registry.files) == len(set(registry.files)) == 4
    assert not [f for f in registry.findings if f.severity == "error" or f.code == "outside-roots"]


def _variety() -> dict[str, str]:
    files = {f"tests/fast/test_f{i}.py": "def test():\n    pass\n" for i in range(12)}
    files.update({
        "tests/unit/test_bad.py": "from testfleet import register_cpu_ci\nregister_cpu_ci(0, 'nope')\n",
        "tests/unit/test_gate.py": "from testfleet import register_cpu_ci, register_ci_gate\n"
                                   "register_cpu_ci(5, 'stage-a-cpu')\nregister_ci_gate(metric_key='a/b', steps=(1, 2))\n",
        "tests/unit/test_latin.py": b"# \xe9\n",  # type: ignore[dict-item]
    })
    return files


def test_parallel_cold_scan_matches_sequential(tree, monkeypatch) -> None:
    from testfleet.registry import collector

    project = tree(_variety())
    monkeypatch.setattr(collector, "PARALLEL_MIN", 10**9)
    sequential = collect(project, use_cache=False)
    monkeypatch.setattr(collector, "PARALLEL_MIN", 1)
    parallel = collect(project, use_cache=False)
    assert (parallel.registrations, parallel.gates, parallel.findings, parallel.files) == (
        sequential.registrations, sequential.gates, sequential.findings, sequential.files)


def test_a_parallel_run_without_gates_keeps_them_for_the_next(tree, monkeypatch) -> None:
    """A cold ``list``/``plan`` (no gates wanted) does not rebuild the child's gate
    arguments, but caches their text as it came: a later ``check`` takes them from the
    cache, equal to a scan's, without scanning a file again."""
    from testfleet.registry import collector
    from testfleet.registry import scan as sc

    project = tree(_variety())
    expected = collect(project, use_cache=False)
    assert expected.gates
    monkeypatch.setattr(collector, "PARALLEL_MIN", 1)
    without = collect(project, gates=False)
    assert without.gates == [] and without.registrations == expected.registrations
    scanned: list[bytes] = []
    real = sc.scan_source
    monkeypatch.setattr(sc, "scan_source", lambda data, *a: scanned.append(data) or real(data, *a))
    warm = collect(project)
    assert scanned == [] and warm.gates == expected.gates


def test_parallel_child_failure_falls_back(tree, monkeypatch) -> None:
    from testfleet.registry import collector

    project = tree(_variety())
    expected = collect(project, use_cache=False)
    parent = os.getpid()
    real_call = collector._Scanner.__call__

    def flaky(self, rel, st):  # type: ignore[no-untyped-def]
        if os.getpid() != parent:
            raise RuntimeError("child dies")
        return real_call(self, rel, st)

    monkeypatch.setattr(collector._Scanner, "__call__", flaky)
    monkeypatch.setattr(collector, "PARALLEL_MIN", 1)
    got = collect(project, use_cache=False)
    assert (got.registrations, got.gates, got.findings) == (expected.registrations, expected.gates, expected.findings)


def test_odd_files_are_errors_not_crashes(tree, monkeypatch) -> None:
    project = tree()
    os.mkfifo(project.root / "tests" / "unit" / "test_fifo.py")
    bad_name = os.fsencode(str(project.root / "tests" / "unit")) + b"/test_\xff.py"
    with open(bad_name, "wb") as fh:
        fh.write(b"x = 1\n")
    registry = collect(project, use_cache=False)
    found = {(f.file, f.code) for f in registry.findings if f.severity == "error"}
    assert ("tests/unit/test_fifo.py", "not-a-file") in found
    assert ("tests/unit/test_\ufffd.py", "encoding") in found
    assert {(r.file, r.backend) for r in registry.registrations} >= GOOD_KEYS


def test_unreadable_file_is_an_error(tree, monkeypatch) -> None:
    from testfleet.registry import collector

    project = tree()
    real = collector._read

    def deny(path: str, size: int) -> bytes:
        if path.endswith("test_good.py"):
            raise PermissionError(13, "Permission denied")
        return real(path, size)

    monkeypatch.setattr(collector, "_read", deny)
    registry = collect(project, use_cache=False)
    (f,) = [f for f in registry.findings if f.code == "read-error"]
    assert (f.file, f.message) == ("tests/unit/test_good.py", "cannot read file: Permission denied")
