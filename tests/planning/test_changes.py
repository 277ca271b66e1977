"""Changed-file parsing and impact: the documented fallbacks for bad diffs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from testfleet.planning.changes import (
    ChangeSet,
    git_changed_files,
    impact,
    parse_name_status,
    read_changed_files,
)

NO_IMPACT = ["docs/**", "*.md"]
STAGES = {"tests/e2e/test_a.py": {"gpu-a"}, "tests/e2e/test_b.py": {"gpu-b", "gpu-c"}}


def test_parse_z_form_with_renames() -> None:
    data = b"M\0src/x.py\0R100\0old/a.py\0new/a.py\0A\0docs/i.md\0D\0gone.py\0"
    paths, error = parse_name_status(data)
    assert error is None
    assert paths == ("src/x.py", "old/a.py", "new/a.py", "docs/i.md", "gone.py")


def test_parse_tab_form() -> None:
    paths, error = parse_name_status(b"M\tsrc/x.py\nC75\ta.py\tb.py\n")
    assert (paths, error) == (("src/x.py", "a.py", "b.py"), None)


def test_parse_paths_with_newlines_in_z_form() -> None:
    paths, error = parse_name_status(b"M\0weird\nname.py\0")
    assert (paths, error) == (("weird\nname.py",), None)


@pytest.mark.parametrize("data", [
    b"Q\0x.py\0", b"M\0", b"R100\0only-one.py\0", b"garbage without tabs\n", b"\xff\xfe\0",
    b"M5x\0a.py\0",
])
def test_parse_malformed(data: bytes) -> None:
    paths, error = parse_name_status(data)
    assert paths == () and error


def test_empty_diff_is_no_changes() -> None:
    assert parse_name_status(b"") == ((), None)


def test_impact_rules() -> None:
    got = impact(ChangeSet(("tests/e2e/test_b.py", "docs/a/b.py", "x/README.md")), STAGES, NO_IMPACT)
    assert (got.everything, got.stages) == (False, frozenset({"gpu-b", "gpu-c"}))
    got = impact(ChangeSet(("tests/e2e/test_b.py", "src/lib.py")), STAGES, NO_IMPACT)
    assert got.everything and "src/lib.py" in got.why
    got = impact(ChangeSet(error="boom", source="--changed-files f"), STAGES, NO_IMPACT)
    assert got.everything and "boom" in got.why
    got = impact(ChangeSet(("./tests/e2e/test_a.py",)), STAGES, NO_IMPACT)
    assert got.stages == frozenset({"gpu-a"})


def test_read_changed_files_fallbacks(tmp_path: Path) -> None:
    missing = read_changed_files(tmp_path / "nope")
    assert missing.error and "cannot read" in missing.error
    (tmp_path / "dir").mkdir()
    assert read_changed_files(tmp_path / "dir").error
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x00\x01\x02")
    assert read_changed_files(bad).error
    good = tmp_path / "good"
    good.write_bytes(b"M\0a.py\0")
    assert read_changed_files(good) == ChangeSet(("a.py",), f"--changed-files {good}", None)


def test_git_changed_files(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    (tmp_path / "a.py").write_text("1\n")
    git("add", "a.py")
    git("commit", "-q", "-m", "one")
    git("checkout", "-q", "-b", "feature")
    (tmp_path / "b.md").write_text("x\n")
    git("add", "b.md")
    git("commit", "-q", "-m", "two")
    got = git_changed_files(tmp_path, "main")
    assert (got.paths, got.error) == (("b.md",), None)
    bad = git_changed_files(tmp_path, "no-such-ref")
    assert bad.error and "git diff failed" in bad.error


def test_within_project_rebases_paths() -> None:
    from testfleet.planning.changes import within_project

    got = within_project(ChangeSet(("svc/tests/e2e/test_a.py", "README.md", "lib/x.py")), "svc/")
    assert got.paths == ("tests/e2e/test_a.py",)
    assert got.outside == ("README.md", "lib/x.py")
    assert within_project(ChangeSet(("a.py",)), "") == ChangeSet(("a.py",))
    assert impact(ChangeSet(("tests/e2e/test_a.py",), outside=("README.md",)), STAGES,
                  NO_IMPACT).stages == frozenset({"gpu-a"})
    outside = impact(ChangeSet(("tests/e2e/test_a.py",), outside=("lib/x.py",)), STAGES, NO_IMPACT)
    assert outside.everything and "outside the project" in outside.why
    # a top-level file that happens to share a registered path is not the project's test
    same_name = within_project(ChangeSet(("tests/e2e/test_a.py",)), "svc")
    assert impact(same_name, STAGES, NO_IMPACT).everything


def test_git_prefix(tmp_path: Path) -> None:
    from testfleet.planning.changes import git_prefix

    assert git_prefix(tmp_path) == ""  # not a repository
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "svc" / "a").mkdir(parents=True)
    assert git_prefix(tmp_path / "svc" / "a") == "svc/a/"
    assert git_prefix(tmp_path) == ""
