"""Reporters render real runs; an in-process interrupt stops the run cleanly."""

from __future__ import annotations

import io
import re
import signal
import threading
import time

import pytest
from rich.console import Console

from testfleet.runner.interrupt import Interrupt
from testfleet.runner.live import LogReporter, TerminalReporter, make_reporter
from testfleet.runner.loop import execute
from testfleet.runner.model import Outcome
from testfleet.runner.reporting import NullReporter

FLAKY = """
import os, sys
marker = sys.argv[0] + ".ran"
if not os.path.exists(marker):
    open(marker, "w").close()
    print("\\x1b[31mAssertionError: latency 12ms above 10ms\\x1b[0m")
    sys.exit(1)
print("second attempt fine", end="")
"""


def test_terminal_reporter_renders_progress_output_and_summary(make_spec) -> None:
    spec = make_spec({"test_flaky.py": FLAKY, "test_b.py": "raise SystemExit(2)\n",
                      "test_c.py": "print(3)\n"}, max_attempts=2)
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120, color_system=None)
    job = execute(spec, reporter=TerminalReporter(console))
    text = buf.getvalue()
    assert [r.outcome for r in job.results] == [Outcome.FLAKY, Outcome.FAILED, Outcome.NOT_RUN]
    assert "AssertionError: latency 12ms above 10ms" in text
    assert "second attempt fine" in text
    assert "retrying:" in text
    assert "NOT RUN" in text and "FLAKY" in text


def test_log_reporter_plain(make_spec) -> None:
    spec = make_spec({"test_a.py": "print('no newline at end', end='')\n"})
    out, err = io.BytesIO(), io.StringIO()
    execute(spec, reporter=LogReporter(out=out, err=err))
    text = out.getvalue().decode()
    assert "testfleet: job job-1: 1 file of stage stage-x (cpu, python)" in text
    assert "==> [1/1] test_a.py" in text
    assert "no newline at end\n<== test_a.py: PASSED" in text
    assert "testfleet run job-1: PASSED (1 passed)" in text


def test_log_reporter_summary_title_and_caption_are_plain_lines(make_spec) -> None:
    spec = make_spec({"test_a.py": "print(1)\n", "test_b.py": "raise SystemExit(1)\n"},
                     fast_fail=False, job_id="job-[x]")
    out = io.BytesIO()
    execute(spec, reporter=LogReporter(out=out, err=io.StringIO()))
    lines = out.getvalue().decode().splitlines()
    title = lines.index("testfleet run job-[x]: FAILED (1 passed, 1 failed)")
    assert lines[title + 1].startswith("┏")  # the table follows the title directly
    caption = lines[-1]
    assert re.fullmatch(r"total \S+ \(wall \S+\) vs estimate 0\.2s", caption), caption
    assert not any(line != line.rstrip() for line in lines[title:]), lines[title:]


def test_make_reporter_picks_by_environment(monkeypatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    rep = make_reporter()
    assert isinstance(rep, LogReporter) and rep.github
    monkeypatch.delenv("GITHUB_ACTIONS")
    monkeypatch.setenv("BUILDKITE", "true")
    rep = make_reporter()
    assert isinstance(rep, LogReporter) and rep.buildkite and not rep.github
    plain = make_reporter("plain")
    assert isinstance(plain, LogReporter) and not plain.github and not plain.buildkite
    assert isinstance(make_reporter("terminal"), TerminalReporter)


@pytest.mark.parametrize(("env", "coloured"), [({}, False), ({"FORCE_COLOR": "1"}, True),
                                               ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False)])
def test_a_log_is_coloured_when_forced_and_never_against_no_color(
        monkeypatch: pytest.MonkeyPatch, env: dict[str, str], coloured: bool) -> None:
    """A CI log (no terminal) colours its summary under FORCE_COLOR, as the commands do."""
    for name in ("FORCE_COLOR", "NO_COLOR", "GITHUB_ACTIONS", "BUILDKITE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for style in ("plain", "github", "buildkite"):
        assert make_reporter(style).color is coloured, style


def test_buildkite_sections_expand_on_failure(make_spec) -> None:
    spec = make_spec({"test_a.py": "print(1)\n", "test_b.py": "raise SystemExit(1)\n"})
    out = io.BytesIO()
    execute(spec, reporter=LogReporter(out=out, err=io.StringIO(), buildkite=True))
    lines = out.getvalue().decode().splitlines()
    assert "--- [1/2] test_a.py - estimate 0.1s, timeout 5.0s" in lines
    i = lines.index("--- [2/2] test_b.py - estimate 0.1s, timeout 5.0s")
    assert "^^^ +++" in lines[i:] and "^^^ +++" not in lines[:i]


def test_interrupt_forwards_and_stops(make_spec) -> None:
    body = """
    import signal, sys, time
    def bye(signum, frame):
        print("got", signal.Signals(signum).name, flush=True)
        sys.exit(7)
    signal.signal(signal.SIGINT, bye)
    print("ready", flush=True)
    time.sleep(60)
    """
    spec = make_spec({"test_a.py": "print(1)\n", "test_b.py": body, "test_c.py": "print(3)\n"},
                     floor=60.0, grace=5.0)
    interrupt = Interrupt()
    ready = threading.Event()

    class Watch(NullReporter):
        def output(self, data: bytes) -> None:
            if b"ready" in data:
                ready.set()

    def fire() -> None:
        ready.wait(20)
        interrupt.trigger(signal.SIGINT)

    threading.Thread(target=fire, daemon=True).start()
    t0 = time.monotonic()
    job = execute(spec, reporter=Watch(), interrupt=interrupt)
    interrupt.close()
    assert time.monotonic() - t0 < 30.0  # far below floor 60 s: the forwarded SIGINT ended it
    assert [r.outcome for r in job.results] == [Outcome.PASSED, Outcome.INTERRUPTED, Outcome.NOT_RUN]
    assert "got SIGINT" in job.results[1].tail
    assert job.results[1].attempts[0].returncode == 7  # its own handler ran: not SIGKILLed
    assert job.exit_code == 130
    assert "runner received SIGINT" in job.results[2].message


def test_terminal_reporter_warning_goes_to_stderr(capsys) -> None:
    rep = TerminalReporter(Console(file=io.StringIO(), force_terminal=True))
    rep.warning("database [down]")
    assert "testfleet: warning: database [down]" in capsys.readouterr().err


class _TtyErr(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_reporter_warning_during_progress_gets_its_own_line(make_spec, monkeypatch) -> None:
    """On a terminal, a warning raised while the progress display is live (a JUnit
    checkpoint or the history failing mid-run) must not be glued onto the progress line."""
    import re

    err = _TtyErr()
    monkeypatch.setattr("sys.stderr", err)
    buf = io.StringIO()
    rep = TerminalReporter(Console(file=buf, force_terminal=True, width=120, color_system=None))
    rep.job_started(make_spec({"test_a.py": "print(1)\n"}))
    try:
        rep.warning("cannot write JUnit file /x/j.xml")
    finally:
        rep.progress.stop()
    assert err.getvalue() == ""
    lines = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line).strip("\r")
             for line in buf.getvalue().replace("\r", "\n").split("\n")]
    assert "testfleet: warning: cannot write JUnit file /x/j.xml" in lines


# A workflow command is a line that starts with "::" after leading whitespace (the runner
# trims it); these are the only ones testfleet itself may print outside a test's fence.
_OWN_COMMANDS = re.compile(r"::(group::|endgroup::$|stop-commands::[0-9a-f]{32}$|[0-9a-f]{32}::$"
                           r"|error file=|warning title=testfleet::)")


def test_github_log_never_prints_a_hostile_name_as_a_line_of_its_own(make_spec) -> None:
    """#17: a file name (from a plan file) holding a newline and ``::error::`` is printed
    escaped on testfleet's own lines (``<== {file}``, the summary table), not as a command."""
    name = "test_b\n::error::pwned\r::add-mask::x\u2028.py"
    spec = make_spec({"test_a.py": "print('fine')\n", name: "raise SystemExit(1)\n"},
                     fast_fail=False, job_id="job\n::error::id")
    out, err = io.BytesIO(), io.StringIO()
    execute(spec, reporter=LogReporter(out=out, err=err, github=True))
    text = out.getvalue().decode()
    commands = [line for line in re.split(r"\r\n|\r|\n", text) if line.lstrip().startswith("::")]
    assert commands and all(_OWN_COMMANDS.match(line.lstrip()) for line in commands), commands
    assert "<== test_b\\n::error::pwned\\r::add-mask::x\\u2028.py: FAILED" in text
    assert "testfleet run job\\n::error::id: FAILED" in text
