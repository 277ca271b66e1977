"""Carried setup scripts and shellcheck (adopt/shellcheck.py)."""

from __future__ import annotations

import shutil
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
    monkeypatch.setattr(shellcheck.shutil, "which", lambda name: None)
    stages, notes = _stages(), []
    shellcheck.mark_findings(stages, notes)
    assert stages == _stages()
    assert notes == ["shellcheck is not on PATH: the 3 setup script(s) carried from the project's "
                     "workflows were not checked; actionlint may report findings in them"]
