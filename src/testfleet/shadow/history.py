"""The shadow history: the comparisons of past runs, so that "N runs without a difference"
is counted, not remembered. A JSON file (default ``.testfleet/shadow-history.json``, in
the directory the CI cache already carries for testfleet's history) holding the newest
:data:`KEEP` comparisons. Only runs that are not pull requests add to it: a pull request
reads it and never writes shared history (its branch may run anything).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from testfleet.errors import UsageError
from testfleet.shadow.compare import verdict_for

if TYPE_CHECKING:
    from testfleet.documents.shadow import ShadowDoc, ShadowHistoryDoc, ShadowRunDoc, VerdictDoc

DEFAULT_PATH = ".testfleet/shadow-history.json"
SCHEMA = "testfleet.shadow-history/1"
KEEP = 200
MAX_BYTES = 4 * 1024 * 1024
PR_EVENTS = ("pull_request", "pull_request_target")


def load_history(path: Path) -> ShadowHistoryDoc:
    """The history at ``path`` (empty when there is none yet), read back strictly through
    its type: a file that is not one is an error naming it, never silently reset."""
    import json

    from pydantic import TypeAdapter, ValidationError

    from testfleet.documents.shadow import ShadowHistoryDoc
    from testfleet.fileio import read_regular

    if not path.exists():
        return {"schema": "testfleet.shadow-history/1", "runs": []}
    try:
        raw = read_regular(path, MAX_BYTES, follow=True)
        data = json.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise UsageError(f"--history {path}: cannot read it ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--history {path}: not a JSON document ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise UsageError(f"--history {path}: not a shadow history (schema {SCHEMA} expected)")
    try:
        return TypeAdapter(ShadowHistoryDoc).validate_python(data, strict=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"--history {path}: {where}: {first['msg']}") from None


def add_run(history: ShadowHistoryDoc, doc: ShadowDoc, now: datetime | None = None) -> ShadowHistoryDoc:
    """The history with ``doc``'s run appended (a run id already there is replaced: a
    re-run of the same CI run counts once), the newest :data:`KEEP` kept."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry: ShadowRunDoc = {"run_id": doc["run_id"], "commit": doc["commit"], "event": doc["event"],
                           "same": doc["same"],
                           "differences": sum(1 for lane in doc["lanes"] if lane["differences"]),
                           "recorded_at": stamp}
    runs = [r for r in history["runs"] if not (doc["run_id"] and r["run_id"] == doc["run_id"])]
    return {"schema": "testfleet.shadow-history/1", "runs": [*runs, entry][-KEEP:]}


def verdict(history: ShadowHistoryDoc, needed: int) -> VerdictDoc:
    """Safe once the newest ``needed`` recorded runs had no difference."""
    streak: list[ShadowRunDoc] = []
    for run in reversed(history["runs"]):
        if not run["same"]:
            break
        streak.append(run)
    events = sorted({r["event"] for r in streak})
    return verdict_for(len(streak), needed, len(history["runs"]), events)


def save_history(path: Path, history: ShadowHistoryDoc) -> None:
    """Written atomically: a cache saved while this runs never holds half of it."""
    import json

    from testfleet.fileio import replace_atomically

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(path, (json.dumps(history, indent=1) + "\n").encode("utf-8"), mode=0o644)
    except OSError as exc:
        raise UsageError(f"--history {path}: cannot write it ({exc.strerror or exc})") from None
