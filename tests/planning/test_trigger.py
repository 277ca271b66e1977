"""The shared trigger options: event inference, label splitting, --file path checks."""

from __future__ import annotations

import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from testfleet.cli._trigger import (
    TriggerOptions,
    build_request,
    resolve_file,
    safe_ref,
    trigger_options,
)
from testfleet.errors import UsageError

from .conftest import make_config, make_project


@pytest.fixture
def repo(tmp_path: Path):
    root = tmp_path / "repo"
    (root / "tests" / "unit").mkdir(parents=True)
    (root / "tests" / "unit" / "test_a.py").write_text("")
    (root / "src").mkdir()
    (root / "src" / "lib.py").write_text("")
    return make_project(make_config(), root=root)


@pytest.mark.parametrize(("opts", "event"), [
    (TriggerOptions(), "push"),
    (TriggerOptions(labels=("run-ci-fsdp",)), "pull_request"),
    (TriggerOptions(fork=True), "pull_request"),
    (TriggerOptions(schedule="0 15 * * 6"), "schedule"),
    (TriggerOptions(event="workflow_dispatch", match_all_labels=True), "workflow_dispatch"),
])
def test_event_inference(repo, opts: TriggerOptions, event: str) -> None:
    assert build_request(repo, repo.root, opts, env={}).trigger.event == event


def test_labels_split_on_commas(repo) -> None:
    req = build_request(repo, repo.root, TriggerOptions(labels=("a, b", "c", " ,")), env={})
    assert req.trigger.labels == ("a", "b", "c")


def test_cadence_passes_through_github(repo, tmp_path: Path) -> None:
    event = tmp_path / "e.json"
    event.write_text('{"schedule": "0 15 * * 6"}')
    req = build_request(repo, repo.root, TriggerOptions(github=True, cadence="release"),
                        env={"GITHUB_EVENT_NAME": "schedule", "GITHUB_EVENT_PATH": str(event)})
    assert (req.trigger.event, req.trigger.schedule, req.trigger.cadence) == \
        ("schedule", "0 15 * * 6", "release")


def test_resolve_file(repo) -> None:
    root = repo.root
    assert resolve_file(repo, root, "tests/unit/test_a.py") == "tests/unit/test_a.py"
    assert resolve_file(repo, root / "tests", "unit/test_a.py") == "tests/unit/test_a.py"
    assert resolve_file(repo, root / "tests", "./unit/../unit/test_a.py") == "tests/unit/test_a.py"
    assert resolve_file(repo, Path("/"), str(root / "tests/unit/test_a.py")) == \
        "tests/unit/test_a.py"
    with pytest.raises(UsageError, match="escapes the repository"):
        resolve_file(repo, root, "../../etc/passwd")
    with pytest.raises(UsageError, match="escapes the repository"):
        resolve_file(repo, root / "tests", "../../outside.py")
    with pytest.raises(UsageError, match="outside the test roots"):
        resolve_file(repo, root, "src/lib.py")
    with pytest.raises(UsageError, match="repository root"):
        resolve_file(repo, root, ".")
    with pytest.raises(UsageError, match="not a usable path"):
        resolve_file(repo, root, "tests/unit/test_a.py\x00")
    with pytest.raises(UsageError, match="no such file"):
        resolve_file(repo, root, "tests/unit")


def test_symlinks_anywhere_are_refused(repo, tmp_path: Path) -> None:
    root = repo.root
    os.symlink(root / "tests" / "unit", root / "tests" / "linked")
    with pytest.raises(UsageError, match="tests/linked is a symlink"):
        resolve_file(repo, root, "tests/linked/test_a.py")
    outside = tmp_path / "outside.py"
    outside.write_text("")
    os.symlink(outside, root / "tests" / "unit" / "test_out.py")
    with pytest.raises(UsageError, match="is a symlink"):
        resolve_file(repo, root, "tests/unit/test_out.py")


def test_repo_reached_through_a_symlinked_prefix(repo, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    os.symlink(repo.root, alias)
    assert resolve_file(repo, alias, "tests/unit/test_a.py") == "tests/unit/test_a.py"
    assert resolve_file(repo, Path("/"), str(alias / "tests/unit/test_a.py")) == \
        "tests/unit/test_a.py"


@pytest.mark.parametrize("ref", ["", "-x", "--output=/tmp/x", "a b", "a\nb", "x" * 300])
def test_unsafe_refs(ref: str) -> None:
    with pytest.raises(UsageError, match="not a usable git revision"):
        safe_ref(ref)


def test_safe_refs() -> None:
    for ref in ("main", "origin/main", "HEAD~3", "a1b2c3d", "refs/pull/7/merge"):
        assert safe_ref(ref) == ref


def test_decorator_hands_over_one_value() -> None:
    seen: list[TriggerOptions] = []

    @click.command()
    @trigger_options
    def cmd(trigger_options: TriggerOptions) -> None:
        seen.append(trigger_options)

    result = CliRunner().invoke(cmd, ["--labels", "run-ci-a", "--stage", "s1", "--stage", "s2",
                                      "--fork", "--include-disabled", "--file", "x.py"])
    assert result.exit_code == 0, result.output
    assert seen == [TriggerOptions(labels=("run-ci-a",), stages=("s1", "s2"), fork=True,
                                   include_disabled=True, files=("x.py",))]
