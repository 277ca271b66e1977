"""Reading GITHUB_EVENT_NAME / GITHUB_EVENT_PATH: the fields we need, clear errors otherwise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testfleet.errors import UsageError
from testfleet.integrations.github_event import trigger_from_github, trigger_from_payload
from testfleet.planning.policy import Trigger


def pr_payload(labels: list[Any], head: str | None = "me/repo", base: str = "me/repo") -> dict:
    return {
        "pull_request": {
            "labels": labels,
            "head": {"repo": None if head is None else {"full_name": head}},
            "base": {"repo": {"full_name": base}},
        },
        "repository": {"full_name": base},
    }


def env_for(tmp_path: Path, event: str, payload: Any) -> dict[str, str]:
    path = tmp_path / "event.json"
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return {"GITHUB_EVENT_NAME": event, "GITHUB_EVENT_PATH": str(path)}


def test_pull_request_labels_and_fork(tmp_path: Path) -> None:
    payload = pr_payload([{"name": "run-ci-megatron"}, {"name": "nightly"}], head="fork/repo")
    trig = trigger_from_github(env_for(tmp_path, "pull_request", payload))
    assert trig == Trigger(event="pull_request", labels=("run-ci-megatron", "nightly"), fork=True)


def test_same_repo_is_not_a_fork() -> None:
    trig = trigger_from_payload("pull_request_target", pr_payload([], head="Me/Repo"), "x")
    assert not trig.fork


def test_deleted_head_repo_counts_as_fork() -> None:
    assert trigger_from_payload("pull_request", pr_payload([], head=None), "x").fork


def test_schedule_and_dispatch() -> None:
    assert trigger_from_payload("schedule", {"schedule": "0 15 * * 6"}, "x") == \
        Trigger(event="schedule", schedule="0 15 * * 6")
    trig = trigger_from_payload("workflow_dispatch",
                                {"inputs": {"cadence": "weekly", "match_all_labels": "true"}}, "x")
    assert trig == Trigger(event="workflow_dispatch", cadence="weekly", match_all_labels=True)
    assert trigger_from_payload("workflow_dispatch", {"inputs": None}, "x") == \
        Trigger(event="workflow_dispatch")
    assert trigger_from_payload("push", {}, "x", cadence="release").cadence == "release"


def test_explicit_cadence_wins_over_dispatch_input() -> None:
    trig = trigger_from_payload("workflow_dispatch", {"inputs": {"cadence": "weekly"}}, "x",
                                cadence="nightly")
    assert trig.cadence == "nightly"


@pytest.mark.parametrize(("event", "payload", "message"), [
    ("pull_request", "{not json", "not valid JSON"),
    ("pull_request", "[]", "must be a JSON object"),
    ("pull_request", {}, "needs a 'pull_request' object"),
    ("pull_request", {"pull_request": {"labels": "run-ci-all"}}, "labels should be list"),
    ("pull_request", {"pull_request": {"labels": [{"nom": 1}]}}, r"labels\[0\] has no string"),
    ("pull_request", {"pull_request": {"labels": [], "head": {"repo": {}},
                                       "base": {"repo": {"full_name": "a/b"}}}},
     "head.repo.full_name"),
    ("pull_request", {"pull_request": {"labels": []}}, "missing repository"),
    ("schedule", {}, "missing schedule"),
    ("schedule", {"schedule": 5}, "schedule should be str"),
    ("workflow_dispatch", {"inputs": {"match_all_labels": "maybe"}}, "true or false"),
    ("workflow_dispatch", {"inputs": []}, "inputs should be dict"),
    ("issue_comment", {}, "not an event testfleet plans for"),
])
def test_malformed_payloads(tmp_path: Path, event: str, payload: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        trigger_from_github(env_for(tmp_path, event, payload))


def test_missing_environment(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="GITHUB_EVENT_NAME is not set"):
        trigger_from_github({})
    with pytest.raises(UsageError, match="GITHUB_EVENT_PATH is not set"):
        trigger_from_github({"GITHUB_EVENT_NAME": "push"})
    with pytest.raises(UsageError, match="no such file"):
        trigger_from_github({"GITHUB_EVENT_NAME": "push",
                             "GITHUB_EVENT_PATH": str(tmp_path / "nope.json")})
    with pytest.raises(UsageError, match="cannot read"):
        trigger_from_github({"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": str(tmp_path)})
    bad = tmp_path / "bin.json"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(UsageError, match="not UTF-8"):
        trigger_from_github({"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": str(bad)})


def test_deeply_nested_payload(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"nested too deeply|not valid JSON"):
        trigger_from_github(env_for(tmp_path, "push", "[" * 100_000 + "]" * 100_000))
