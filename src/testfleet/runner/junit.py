"""JUnit XML for a job: one ``testsuite`` per job, one ``testcase`` per file, or, for a
pytest file, one ``testcase`` per test pytest reported (the file as a property).

FAILED -> ``<failure>``; TIMEOUT, ERROR and INTERRUPTED -> ``<error>``; NOT RUN ->
``<skipped>`` (with why), each carrying the tail of the output. A pytest file keeps a
file-level testcase as well when its verdict is not explained by a failing test: it
crashed before collection, tests went unreported, it timed out, or its gate failed. Written to a temporary
file in the same directory and renamed, so a reader (or a runner killed mid-write)
never sees half a document; the job loop also writes a checkpoint after every file.
"""

from __future__ import annotations

import io
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from testfleet.fileio import output_mode, replace_atomically
from testfleet.runner.model import FileResult, JobResult, Outcome
from testfleet.runner.textclean import clean

PASSING_TAIL = 4096  # characters of output kept for a passing file (failures keep the tail)


def build_xml(job: JobResult) -> bytes:
    """The document as bytes (pure; junitparser imported here to keep start-up lean)."""
    from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

    spec = job.spec
    suite = TestSuite(spec.job_id)
    suite.add_property("stage", spec.settings.stage)
    suite.add_property("backend", spec.settings.backend)
    suite.add_property("command", spec.settings.command)
    suite.add_property("run_id", spec.run_id)
    suite.add_property("complete", "false" if _incomplete(job) else "true")
    if job.interrupted_by is not None:
        suite.add_property("interrupted_by_signal", str(job.interrupted_by))
    for res in job.results:
        cases = res.cases or []
        for test_case in _test_cases(res, cases, spec.settings.stage):
            suite.append(test_case)
        if cases and (res.outcome.ok or (res.outcome is Outcome.FAILED and not res.gate_failed
                                         and any(c.failing for c in cases))):
            continue  # the tests tell the whole story
        case = TestCase(res.item.file, classname=spec.settings.stage, time=round(res.duration, 3))
        text = clean(res.tail)
        message = clean(_message(res))
        if res.outcome is Outcome.FAILED:
            failure = Failure(message, "gate" if res.gate_failed else "failure")
            failure.text = text
            case.result = [failure]
        elif res.outcome in (Outcome.TIMEOUT, Outcome.ERROR, Outcome.INTERRUPTED):
            error = Error(message, res.outcome.value)
            error.text = text
            case.result = [error]
        elif res.outcome is Outcome.NOT_RUN:
            case.result = [Skipped(message)]
        if res.outcome.ok:
            notes = [message] if res.outcome is Outcome.FLAKY else []
            notes += [clean(line) for line in res.gate_lines]
            body = "\n".join(notes)
            if text:  # a passing file's output matters less: keep the report small
                short = text if len(text) <= PASSING_TAIL else "[...]\n" + text[-PASSING_TAIL:]
                body = (body + "\n\n" if body else "") + short
            if body:
                case.system_out = body
        suite.append(case)  # add_testcase recounts the suite each time: O(n^2)
    suite.update_statistics()
    suite.time = round(job.duration, 3)
    suite.timestamp = datetime.fromtimestamp(job.started_at, timezone.utc).isoformat(
        timespec="seconds")
    xml = JUnitXml(f"testfleet {spec.run_id}")
    xml.add_testsuite(suite)
    xml.update_statistics()
    return _to_bytes(xml)


def _test_cases(res: FileResult, cases: list[Any], stage: str) -> list[Any]:
    """One ``testcase`` per reported test, with its file and stage as properties."""
    from junitparser import Error, Failure, Properties, Property, Skipped, TestCase

    classname = res.item.file.removesuffix(".py").replace("/", ".")
    out = []
    for c in cases:
        case = TestCase(c.name, classname=classname, time=round(c.duration, 3))
        props = Properties()
        props.add_property(Property("file", res.item.file))
        props.add_property(Property("stage", stage))
        case.append(props)
        message = clean(c.message)
        first = message.strip().splitlines()[-1][:300] if message.strip() else c.outcome
        if c.outcome == "failed":
            failure = Failure(first, "failure")
            failure.text = message
            case.result = [failure]
        elif c.outcome == "error":
            error = Error(first, f"error in {c.phase}" if c.phase else "error")
            error.text = message
            case.result = [error]
        elif c.outcome in ("skipped", "xfailed"):
            case.result = [Skipped(first if c.outcome == "skipped" else f"xfail: {first}")]
        out.append(case)
    return out


def _incomplete(job: JobResult) -> bool:
    return job.interrupted_by is not None or any(
        r.outcome is Outcome.ERROR and not r.attempts for r in job.results
    )


def _message(res: FileResult) -> str:
    base = f"{res.outcome.label}: {res.message}" if res.message else res.outcome.label
    if len(res.attempts) > 1:
        base += f" ({len(res.attempts)} attempts)"
    return base


def _to_bytes(xml: Any) -> bytes:
    buf = io.BytesIO()
    xml.write(buf)  # junitparser adds the XML declaration and encodes UTF-8
    return buf.getvalue()


def write_junit(job: JobResult, path: Path) -> None:
    """Write atomically: temp file in the target directory, fsync, rename."""
    data = build_xml(job)
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(path, data, mode=output_mode(path), fsync=True)
