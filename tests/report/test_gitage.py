"""Age of ``disabled=`` lines from git history, built on dated commits."""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

from testfleet.app.gitage import disabled_ages, disabled_span, parse_porcelain, repo_info
from testfleet.registry.model import Registration

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc)

ONE_LINE = (
    "from testfleet import register_cuda_ci\n\n"
    'register_cuda_ci(est_time=10, suite="s", labels=["a"], disabled="broken, see #1")\n'
)
MULTI = (
    "from testfleet import register_rocm_ci\n\n"
    "register_rocm_ci(\n"
    "    est_time=10,\n"
    '    suite="r",\n'
    '    labels=["a"],\n'
    '    disabled="OOM, see #2",\n'
    ")\n"
)


def _reg(file: str, line: int, backend: str = "cuda", reason: str = "x") -> Registration:
    return Registration(file, backend, "s", 10.0, line=line, col=1, labels=("a",), disabled=reason)


def test_disabled_span_finds_the_keyword_line_in_a_multiline_call() -> None:
    assert disabled_span(MULTI, _reg("f.py", 3)) == (7, 7)
    assert disabled_span(ONE_LINE, _reg("f.py", 3)) == (3, 3)
    # unparsable source or unknown line: the call line
    assert disabled_span("def (:\n", _reg("f.py", 3)) == (3, 3)
    assert disabled_span(MULTI, _reg("f.py", 99)) == (99, 99)


def test_age_is_the_last_change_of_the_disabled_line(git_repo) -> None:
    root: Path = git_repo({"tests/test_a.py": MULTI.replace('disabled="OOM, see #2",\n', ""),
                           "tests/test_b.py": ONE_LINE}, "2026-01-01T12:00:00+00:00", "initial")
    # The disabled= line of test_a is added in March; an unrelated later edit elsewhere
    # in the file (May) must not reset it.
    git_repo({"tests/test_a.py": MULTI}, "2026-03-01T12:00:00+00:00", "disable a")
    git_repo({"tests/test_a.py": "# header\n" + MULTI}, "2026-05-01T12:00:00+00:00", "comment")
    reg_a = _reg("tests/test_a.py", 4, "rocm")  # the call moved down one line
    reg_b = _reg("tests/test_b.py", 3)
    ages, info = disabled_ages(root, [reg_a, reg_b])
    assert info.is_repo and not info.shallow
    assert ages[reg_a].status == "committed"
    assert ages[reg_a].line == 8
    assert ages[reg_a].changed is not None and ages[reg_a].changed.date() == dt.date(2026, 3, 1)
    assert ages[reg_a].days(NOW) == (dt.date(2026, 6, 1) - dt.date(2026, 3, 1)).days
    # a root-commit line in a full clone is exact, not a lower bound
    assert ages[reg_b].changed.date() == dt.date(2026, 1, 1) and not ages[reg_b].boundary


def test_rewording_the_reason_restarts_the_clock(git_repo) -> None:
    root = git_repo({"tests/test_b.py": ONE_LINE}, "2025-01-01T00:00:00+00:00")
    git_repo({"tests/test_b.py": ONE_LINE.replace("broken, see #1", "still broken, see #1")},
             "2026-05-20T00:00:00+00:00")
    reg = _reg("tests/test_b.py", 3)
    ages, _ = disabled_ages(root, [reg])
    assert ages[reg].days(NOW) == 12


def test_uncommitted_and_untracked(git_repo) -> None:
    root = git_repo({"tests/test_b.py": ONE_LINE}, "2025-01-01T00:00:00+00:00")
    (root / "tests/test_b.py").write_text(ONE_LINE.replace("#1", "#9"), encoding="utf-8")
    (root / "tests/test_new.py").write_text(ONE_LINE, encoding="utf-8")
    reg_b, reg_new = _reg("tests/test_b.py", 3), _reg("tests/test_new.py", 3)
    ages, _ = disabled_ages(root, [reg_b, reg_new])
    assert ages[reg_b].status == "uncommitted" and ages[reg_b].days(NOW) == 0
    assert ages[reg_new].status == "unknown" and ages[reg_new].days(NOW) is None
    assert ages[reg_new].note


def test_not_a_repository_gives_unknown_with_reason(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_b.py").write_text(ONE_LINE, encoding="utf-8")
    reg = _reg("tests/test_b.py", 3)
    ages, info = disabled_ages(tmp_path, [reg])
    assert not info.is_repo and info.note
    assert ages[reg].status == "unknown" and ages[reg].days(NOW) is None and ages[reg].line == 3


def test_missing_file_is_unknown_not_a_crash(tmp_path: Path) -> None:
    reg = _reg("tests/gone.py", 3)
    ages, _ = disabled_ages(tmp_path, [reg])
    assert ages[reg].status == "unknown" and "cannot read" in ages[reg].note


def test_shallow_clone_marks_lower_bound(git_repo, tmp_path: Path) -> None:
    root = git_repo({"tests/test_b.py": ONE_LINE}, "2024-01-01T00:00:00+00:00")
    git_repo({"other.txt": "x"}, "2026-05-01T00:00:00+00:00")
    clone = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{root}", str(clone)], check=True,
                   capture_output=True)
    assert repo_info(clone).shallow
    reg = _reg("tests/test_b.py", 3)
    ages, info = disabled_ages(clone, [reg])
    assert info.shallow
    age = ages[reg]
    assert age.boundary and "shallow" in age.note
    # the shallow boundary commit is newer than the real change: a lower bound
    assert age.changed is not None and age.changed.date() == dt.date(2026, 5, 1)


def test_parse_porcelain_tolerates_missing_dates() -> None:
    sha = "a" * 40
    text = f"{sha} 1 1 1\nauthor x\nfilename f.py\n\tline\n"
    ages = parse_porcelain(text)
    assert ages[1].status == "unknown" and ages[1].commit == sha


def test_disabled_span_multiline_value_comments_and_fallbacks() -> None:
    src = (
        "x = 1\n"
        "register_rocm_ci(\n"
        "    est_time=10,  # disabled=no\n"
        '    suite="r",\n'
        '    labels=["a"],\n'
        "    disabled=(\n"
        '        "OOM, see #2"\n'
        '        " and more"\n'
        "    ),\n"
        "    nightly=True,\n"
        ")\n"
        'register_cuda_ci(1, "s", disabled="x")\n'
        'register_cuda_ci(1, "s")\n'
    )
    assert disabled_span(src, _reg("f", 2)) == (6, 9)
    assert disabled_span(src, _reg("f", 12)) == (12, 12)
    assert disabled_span(src, _reg("f", 13)) == (13, 13)  # no keyword: the call line
    assert disabled_span("(((\n", _reg("f", 1)) == (1, 1)
