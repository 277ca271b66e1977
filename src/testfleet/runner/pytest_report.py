"""A pytest plugin the runner loads into every pytest child (``-p testfleet.runner.pytest_report``).

It appends one JSON line per event to the file named by ``TESTFLEET_TESTCASES``:
the session start, the number of tests collected, one line per finished test (its
outcome over setup, call and teardown), collection errors, and the session end. Each
line is flushed as it is written, so a child that ends abruptly (``os._exit(0)``, a
segfault, a timeout kill) leaves what it had reported so far: the runner compares
"collected N" with the tests actually reported and never takes an exit status 0 for
a pass when tests went unreported.

In a batch session (several files in one pytest process, see :mod:`.session`) it also
says where each file's tests start (``file`` events with a wall-clock time, so the
runner can time files and name the one a crash or timeout interrupted), how many tests
each file collected, and points ``$TESTFLEET_RECORD_DIR`` at the running file's own
record directory (``$TESTFLEET_SESSION_FILES`` names a JSON map from absolute file path
to directory), so metric records stay per file as in one process per file.

Under pytest-xdist the workers collect and run the tests and the controller receives
every report again, so only the controller writes (a worker still switches
``$TESTFLEET_RECORD_DIR``: its tests write the metric records), and the collected count
comes from xdist's own hook: each test once, as without xdist.

It imports nothing from testfleet (it runs inside the test process) and does nothing
when the variable is unset.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

ENV = "TESTFLEET_TESTCASES"
SESSION_FILES_ENV = "TESTFLEET_SESSION_FILES"
RECORD_DIR_ENV = "TESTFLEET_RECORD_DIR"  # testfleet.metrics reads it at each call
MESSAGE_MAX = 2000

_state: dict[str, dict[str, Any]] = {}
_session: dict[str, Any] = {"file": None, "rootdir": "", "dirs": {}, "resolved": {},
                            "worker": False}


def _write(event: dict[str, Any]) -> None:
    path = os.environ.get(ENV)
    if not path or _session["worker"]:  # the controller reports it
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


def _file_part(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _load_session_dirs() -> dict[str, str]:
    path = os.environ.get(SESSION_FILES_ENV)
    if not path or not os.environ.get(ENV):
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


class _XdistCollected:
    """Registered only where pytest-xdist is active (its hook exists only then)."""

    def __init__(self) -> None:
        self.done = False

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self.done:  # every worker collects the same tests
            return
        self.done = True
        _collected(ids)


def pytest_configure(config: Any) -> None:
    # xdist gives its workers ``workerinput``; its PYTEST_XDIST_WORKER variable would also
    # mark every pytest a test starts in a worker (it is inherited), silencing its report.
    _session["worker"] = hasattr(config, "workerinput")
    if hasattr(config.hook, "pytest_xdist_node_collection_finished") and not _session["worker"]:
        config.pluginmanager.register(_XdistCollected(), "testfleet-xdist-collected")


def _collected(nodeids: list[str]) -> None:
    files: dict[str, int] = {}
    for nodeid in nodeids:
        part = _file_part(nodeid)
        files[part] = files.get(part, 0) + 1
    _write({"event": "collected", "count": len(nodeids), "files": files})


def pytest_sessionstart(session: Any) -> None:
    _state.clear()
    rootdir = str(getattr(session.config, "rootpath", "") or "")
    _session.update(file=None, rootdir=rootdir, dirs=_load_session_dirs(), resolved={})
    _write({"event": "start", "rootdir": rootdir})


def pytest_collection_finish(session: Any) -> None:
    _collected([item.nodeid for item in session.items])


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    part = _file_part(nodeid)
    if part == _session["file"]:
        return
    _session["file"] = part
    _write({"event": "file", "file": part, "t": time.time()})
    dirs = _session["dirs"]
    if dirs:
        resolved = _session["resolved"]
        if part not in resolved:
            resolved[part] = os.path.realpath(os.path.join(_session["rootdir"], part))
        target = dirs.get(resolved[part])
        if target:
            os.environ[RECORD_DIR_ENV] = target


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
