"""Read a GitHub Actions trigger from ``GITHUB_EVENT_NAME`` and the ``GITHUB_EVENT_PATH`` payload.

Only the fields planning needs are read: PR labels, whether the head repository
differs from the base (a fork), whether the PR is a draft, the schedule's cron string, and the
``workflow_dispatch`` inputs ``cadence`` and ``match_all_labels``. Every other
field is ignored. A payload that is missing, not JSON, or has the wrong shape
where we read it is a :class:`UsageError` naming the file and the key path,
never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testfleet.errors import UsageError
from testfleet.fileio import read_regular
from testfleet.planning.policy import EVENTS, PR_EVENTS, Trigger, show
from testfleet.textsafe import printable

MAX_PAYLOAD_BYTES = 32 * 1024 * 1024
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off", ""}


def _at(data: Any, path: list[str], where: str, kind: type | tuple[type, ...],
        *, optional: bool = False) -> Any:
    cur = data
    for i, key in enumerate(path):
        if not isinstance(cur, dict):
            raise UsageError(f"{where}: {'.'.join(path[:i]) or 'payload'} is not an object")
        if key not in cur:
            if optional:
                return None
            raise UsageError(f"{where}: missing {'.'.join(path[: i + 1])}")
        cur = cur[key]
    if cur is None and optional:
        return None
    if not isinstance(cur, kind):
        raise UsageError(
            f"{where}: {'.'.join(path)} should be {getattr(kind, '__name__', kind)}, "
            f"got {type(cur).__name__}"
        )
    return cur


def _bool_input(value: Any, where: str, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise UsageError(f"{where}: inputs.{name} should be true or false, got {show(str(value))}")


def _labels(payload: dict[str, Any], where: str) -> tuple[str, ...]:
    raw = _at(payload, ["pull_request", "labels"], where, list, optional=True) or []
    names: list[str] = []
    for i, label in enumerate(raw):
        if isinstance(label, str):
            names.append(label)
            continue
        if not isinstance(label, dict) or not isinstance(label.get("name"), str):
            raise UsageError(f"{where}: pull_request.labels[{i}] has no string 'name'")
        names.append(label["name"])
    return tuple(names)


def _is_fork(payload: dict[str, Any], where: str) -> bool:
    """Head repository differs from the base one. A deleted head repository (null)
    counts as a fork: we cannot show it is trusted."""
    base: str | None = _at(payload, ["pull_request", "base", "repo", "full_name"], where, str,
                           optional=True)
    if base is None:
        base = str(_at(payload, ["repository", "full_name"], where, str))
    head_repo = _at(payload, ["pull_request", "head", "repo"], where, dict, optional=True)
    if head_repo is None:
        return True
    head = head_repo.get("full_name")
    if not isinstance(head, str):
        raise UsageError(f"{where}: pull_request.head.repo.full_name should be str")
    return head.lower() != base.lower()


def _added_label(payload: dict[str, Any], where: str) -> tuple[str, ...]:
    """The label a ``labeled`` event added (the only one that may authorize a fork's
    ``pull_request_target`` run, see :attr:`Trigger.authorizing`); none for other actions."""
    if payload.get("action") != "labeled":
        return ()
    name = _at(payload, ["label", "name"], where, str, optional=True)
    return (name,) if name is not None else ()


def trigger_from_payload(event: str, payload: Any, where: str, *,
                         cadence: str | None = None) -> Trigger:
    """Turn an event name and its parsed payload into a :class:`Trigger` (pure)."""
    if event not in EVENTS:
        raise UsageError(
            f"GITHUB_EVENT_NAME {show(event)} is not an event testfleet plans for; "
            f"supported: {', '.join(EVENTS)} (or pass --event/--cadence without --github)"
        )
    if not isinstance(payload, dict):
        raise UsageError(f"{where}: the event payload must be a JSON object")
    if event in PR_EVENTS:
        if not isinstance(payload.get("pull_request"), dict):
            raise UsageError(f"{where}: a {event} payload needs a 'pull_request' object")
        draft = _at(payload, ["pull_request", "draft"], where, bool, optional=True)
        base_sha = _at(payload, ["pull_request", "base", "sha"], where, str, optional=True)
        labels = _labels(payload, where)
        fork = _is_fork(payload, where)
        return Trigger(event=event, labels=labels,
                       fork=fork, cadence=cadence, draft=bool(draft),
                       base_sha=base_sha,
                       authorizing=_added_label(payload, where)
                       if fork and event == "pull_request_target" else None)
    if event == "schedule":
        cron = _at(payload, ["schedule"], where, str)
        return Trigger(event=event, schedule=cron, cadence=cadence)
    if event == "workflow_dispatch":
        inputs = _at(payload, ["inputs"], where, dict, optional=True) or {}
        if cadence is None and inputs.get("cadence") not in (None, ""):
            value = inputs["cadence"]
            if not isinstance(value, str):
                raise UsageError(f"{where}: inputs.cadence should be a string")
            cadence = value.strip()
        match_all = False
        if "match_all_labels" in inputs:
            match_all = _bool_input(inputs["match_all_labels"], where, "match_all_labels")
        return Trigger(event=event, cadence=cadence, match_all_labels=match_all)
    return Trigger(event=event, cadence=cadence)


def trigger_from_github(env: Mapping[str, str], *, cadence: str | None = None) -> Trigger:
    """Read the trigger of the running GitHub Actions job from its environment."""
    event = env.get("GITHUB_EVENT_NAME")
    if not event:
        raise UsageError("--github: GITHUB_EVENT_NAME is not set (is this a GitHub Actions job?)")
    path_text = env.get("GITHUB_EVENT_PATH")
    if not path_text:
        raise UsageError("--github: GITHUB_EVENT_PATH is not set (is this a GitHub Actions job?)")
    path = Path(path_text)
    where = f"GITHUB_EVENT_PATH {printable(str(path))}"
    try:
        # A regular file only: a FIFO blocks the open forever, /dev/zero reads without end.
        text = read_regular(path, MAX_PAYLOAD_BYTES, follow=True).decode("utf-8")
    except FileNotFoundError:
        raise UsageError(f"{where}: no such file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where}: not UTF-8 ({exc.reason})") from None
    except OSError as exc:
        raise UsageError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: not valid JSON: {exc}") from None
    except RecursionError:
        raise UsageError(f"{where}: JSON nested too deeply") from None
    return trigger_from_payload(event, payload, where, cadence=cadence)
