"""Which runner labels are online, from a JSON document of the shape GitHub's self-hosted
runners API returns (``GET /repos/{owner}/{repo}/actions/runners``)::

    {"total_count": 2, "runners": [{"name": "mi300x-01", "status": "online",
      "busy": false, "labels": [{"name": "self-hosted"}, {"name": "mi300x"}]}, ...]}

Pure: text in, a value and its problems out. The document comes from a file or a token's
read; a hostile one must give a clear error naming where, never a traceback, so parsing
returns errors as values (``runners[3].labels[0].name: ...``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

#: the most runners read (GitHub pages at 100; an organisation may have thousands)
MAX_RUNNERS = 10_000
MAX_LABELS = 100
MAX_LABEL = 255
#: runner labels GitHub hosts; a lane asking only for these is never checked
HOSTED_PREFIXES = ("ubuntu-", "windows-", "macos-")


class RunnersError(ValueError):
    """A runners document that cannot be used; the message says where and what."""


@dataclass(frozen=True)
class RunnerInventory:
    """The label sets of the online runners, and where they were read from."""

    source: str
    online: tuple[frozenset[str], ...]
    total: int  # runners listed, online or not

    def serves(self, runs_on: Sequence[str]) -> bool:
        """Whether an online runner carries every one of ``runs_on``'s labels (GitHub
        matches labels case-insensitively)."""
        want = {label.lower() for label in runs_on}
        return any(want <= labels for labels in self.online)


def self_hosted(runs_on: Sequence[str]) -> bool:
    """A lane whose runners the document can speak for: it asks for ``self-hosted``."""
    return any(label.lower() == "self-hosted" for label in runs_on)


def parse_runners(text: str, source: str) -> RunnerInventory:
    """The inventory in ``text``; a :class:`RunnersError` naming ``source`` and the place."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(
            exc, json.JSONDecodeError) else ""
        raise RunnersError(f"{source}: not JSON{where}: {getattr(exc, 'msg', 'too deeply nested')}"
                           ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("runners"), list):
        raise RunnersError(f"{source}: want an object with a 'runners' list (the shape of "
                           "GitHub's GET /repos/{owner}/{repo}/actions/runners)")
    runners = doc["runners"]
    if len(runners) > MAX_RUNNERS:
        raise RunnersError(f"{source}: runners: {len(runners)} runners; at most {MAX_RUNNERS}")
    online: list[frozenset[str]] = []
    for i, runner in enumerate(runners):
        where = f"{source}: runners[{i}]"
        if not isinstance(runner, dict):
            raise RunnersError(f"{where}: want an object")
        status = runner.get("status")
        if not isinstance(status, str):
            raise RunnersError(f"{where}.status: want 'online' or 'offline'")
        labels = runner.get("labels")
        if not isinstance(labels, list) or len(labels) > MAX_LABELS:
            raise RunnersError(f"{where}.labels: want a list of at most {MAX_LABELS} labels")
        names: set[str] = set()
        for j, label in enumerate(labels):
            name = label.get("name") if isinstance(label, dict) else None
            if not isinstance(name, str) or not name or len(name) > MAX_LABEL:
                raise RunnersError(f"{where}.labels[{j}].name: want a label name of 1 to "
                                   f"{MAX_LABEL} characters")
            names.add(name.lower())
        if status == "online":
            online.append(frozenset(names))
    return RunnerInventory(source, tuple(online), len(runners))
