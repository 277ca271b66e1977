"""A pytest plugin the runner loads into every pytest child (``-p testfleet.runner.pytest_report``).

It appends one JSON line per event to the file named by ``TESTFLEET_TESTCASES``:
the session start, the number of tests collected, one line per finished test (its
outcome over setup, call and teardown), collection errors, and the session end. Each
line is flushed as it is written, so a child that ends abruptly (``os._exit(0)``, a
segfault, a timeout kill) leaves what it had reported so far: the runner compares
"collected N" with the tests actually reported and never takes an exit status 0 for
a pass when tests went unreported.

It imports nothing from testfleet (it runs inside the test process) and does nothing
when the variable is unset.
"""

from __future__ import annotations

import json
import os
from typing import Any

ENV = "TESTFLEET_TESTCASES"
MESSAGE_MAX = 2000

_state: dict[str, dict[str, Any]] = {}


def _write(event: dict[str, Any]) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    line = json.dumps(event, ensure_ascii=True, allow_nan=False) + "\n"
    try:
        with open(path, "a", encoding="ascii") as fh:
            fh.write(line)
            fh.flush()
    except (OSError, ValueError):
        pass  # reporting must never change the test's own result


def _message(report: Any) -> str:
    try:
        text = str(report.longreprtext or "")
    except Exception:  # a broken repr of a test's exception
        text = ""
    return text[-MESSAGE_MAX:]


def pytest_sessionstart(session: Any) -> None:
    _state.clear()
    _write({"event": "start"})


def pytest_collection_finish(session: Any) -> None:
    _write({"event": "collected", "count": len(session.items)})


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        _write({"event": "case", "nodeid": report.nodeid or "", "outcome": "error",
                "phase": "collect", "duration": 0.0, "message": _message(report)})


def pytest_runtest_logreport(report: Any) -> None:
    entry = _state.setdefault(report.nodeid, {"outcome": "passed", "duration": 0.0,
                                              "message": "", "phase": ""})
    entry["duration"] += float(getattr(report, "duration", 0.0) or 0.0)
    xfail = hasattr(report, "wasxfail")
    if report.failed:
        if entry["outcome"] in ("passed", "skipped", "xfailed"):
            entry["outcome"] = "failed" if report.when == "call" else "error"
            entry["phase"] = report.when
            entry["message"] = _message(report)
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "xfailed" if xfail else "skipped"
        entry["message"] = _message(report) if not xfail else str(report.wasxfail)[:MESSAGE_MAX]
    if report.when == "teardown":
        _state.pop(report.nodeid, None)
        _write({"event": "case", "nodeid": report.nodeid, **entry,
                "duration": round(entry["duration"], 6)})


def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    _write({"event": "finish", "exitstatus": int(exitstatus)})
