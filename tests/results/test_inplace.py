"""Editing test files in place (#27 D1): what another writer does meanwhile is kept or
planned again from, a failure changes nothing, the lock makes disable/enable take turns."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from testfleet.errors import UsageError
from testfleet.results.inplace import edit_in_place, edit_lock


def upper(calls: list[dict[str, bytes]], during: object = None):  # type: ignore[no-untyped-def]
    """A plan that upper-cases every file, running ``during()`` the first time."""
    def plan(contents: Mapping[str, bytes]) -> dict[str, bytes]:
        calls.append(dict(contents))
        if len(calls) == 1 and callable(during):
            during()
        return {rel: data.upper() for rel, data in contents.items()}
    return plan


def test_bytes_appended_while_planning_are_carried_over(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_bytes(b"x = 1\n")
    calls: list[dict[str, bytes]] = []

    def append() -> None:
        with open(tmp_path / "a.py", "ab") as fh:
            fh.write(b"# appended\n")

    edit_in_place(tmp_path, ["a.py"], upper(calls, append))
    assert (tmp_path / "a.py").read_bytes() == b"X = 1\n# appended\n"
    assert len(calls) == 1  # an append needs no new plan


@pytest.mark.parametrize("how", ["rewrite", "rename"])
def test_any_other_change_while_planning_is_planned_again(tmp_path: Path, how: str) -> None:
    path = tmp_path / "a.py"
    path.write_bytes(b"x = 1\n")
    calls: list[dict[str, bytes]] = []

    def change() -> None:
        if how == "rewrite":
            path.write_bytes(b"y = 2\n")
        else:  # an editor saving by rename: a new inode under the same name
            (tmp_path / "new").write_bytes(b"y = 2\n")
            os.replace(tmp_path / "new", path)

    edit_in_place(tmp_path, ["a.py"], upper(calls, change))
    assert path.read_bytes() == b"Y = 2\n"
    assert [c["a.py"] for c in calls] == [b"x = 1\n", b"y = 2\n"]


def test_links_owner_and_mode_stay(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_bytes(b"x = 1\n")
    os.chmod(path, 0o604)
    os.link(path, tmp_path / "b.py")
    before = path.stat()
    edit_in_place(tmp_path, ["a.py"], upper([]))
    after = path.stat()
    assert (after.st_ino, after.st_uid, after.st_gid, after.st_mode, after.st_nlink) == (
        before.st_ino, before.st_uid, before.st_gid, before.st_mode, 2)
    assert (tmp_path / "b.py").read_bytes() == b"X = 1\n"


def test_a_failed_write_restores_the_files_already_written(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from testfleet.results import inplace

    for name in ("a.py", "b.py"):
        (tmp_path / name).write_bytes(b"x = 1\n" * 10)
    real = inplace._overwrite
    calls = []

    def overwrite(fd: int, data: bytes, old_size: int | None) -> None:
        calls.append(data)
        if len(calls) == 2:
            os.pwrite(fd, b"HALF", 0)  # the disk fills up halfway through the second file
            raise OSError(28, "No space left on device")
        real(fd, data, old_size)

    monkeypatch.setattr(inplace, "_overwrite", overwrite)
    with pytest.raises(UsageError, match=r"nothing was changed: b\.py: cannot write it: No space"):
        edit_in_place(tmp_path, ["a.py", "b.py"], upper([]))
    assert all((tmp_path / n).read_bytes() == b"x = 1\n" * 10 for n in ("a.py", "b.py"))


def test_a_symlink_or_missing_file_is_refused_and_nothing_written(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_bytes(b"x = 1\n")
    (tmp_path / "real.py").write_bytes(b"y = 1\n")
    (tmp_path / "link.py").symlink_to("real.py")
    with pytest.raises(UsageError) as err:
        edit_in_place(tmp_path, ["a.py", "link.py", "nope.py"], upper([]))
    assert "link.py: is a symlink; edit the file it points to" in str(err.value)
    assert "nope.py: cannot open it for writing" in str(err.value)
    assert (tmp_path / "a.py").read_bytes() == b"x = 1\n"
    assert (tmp_path / "real.py").read_bytes() == b"y = 1\n"


def test_edits_of_one_project_take_turns(tmp_path: Path) -> None:
    with (edit_lock(tmp_path), pytest.raises(UsageError, match="another testfleet disable"),
          edit_lock(tmp_path, wait=0.1)):
        pass
    with edit_lock(tmp_path, wait=0.1):  # released
        pass
