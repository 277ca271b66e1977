"""Live output: each file's output streamed as it comes, framed for where it is read.

* :class:`LogReporter` - plain logs; under GitHub Actions every attempt is folded in
  ``::group::`` and the test's own output is fenced with ``::stop-commands::`` so a test
  cannot inject workflow commands (``::add-mask::``, ``::set-output``...) into the job;
  under Buildkite every attempt is a ``---`` section, expanded (``^^^ +++``) on failure.
* :class:`TerminalReporter` - on a terminal: a rich progress display (files done/total,
  elapsed vs estimate, the current file's elapsed vs its estimate) with the output
  printed above it.

Both end with the summary table. Output bytes are never accumulated here.
"""

from __future__ import annotations

import codecs
import contextlib
import secrets
import sys
import threading
import time
from typing import IO, Any, cast

from testfleet.runner.model import Attempt, FileResult, JobResult, JobSpec, RunItem
from testfleet.runner.summary import STYLE, fmt_seconds, summary_table
from testfleet.textsafe import printable


def gh_escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def gh_escape_property(text: str) -> str:
    return gh_escape_data(text).replace(":", "%3A").replace(",", "%2C")


class LogReporter:
    """Plain streaming log, optionally with GitHub Actions workflow commands."""

    def __init__(self, out: IO[bytes] | None = None, err: IO[str] | None = None,
                 github: bool = False, color: bool = False, buildkite: bool = False) -> None:
        self.out = out if out is not None else sys.stdout.buffer
        self.err = err if err is not None else sys.stderr
        self.github = github
        self.buildkite = buildkite and not github
        self.color = color
        self.total = 0
        self._last = b"\n"
        self._token = ""
        self._closed = False

    def _write(self, data: bytes) -> None:
        """Write and flush; a closed stdout (``| head``, a hung-up terminal) silences the
        log but never stops the run: the verdict must not depend on who is reading."""
        if self._closed:
            return
        try:
            self.out.write(data)
            self.out.flush()
        except (OSError, ValueError):
            self._closed = True

    def _line(self, text: str) -> None:
        """One line of testfleet's own, outside the test's fenced output: a file name, reason
        or gate line holding a newline must not start a line (a workflow command) of its own."""
        prefix = b"" if self._last == b"\n" else b"\n"
        self._write(prefix + printable(text).encode("utf-8", errors="replace") + b"\n")
        self._last = b"\n"

    def job_started(self, spec: JobSpec) -> None:
        self.total = len(spec.items)
        est = sum(i.estimate for i in spec.items)
        files = f"{self.total} file{'s' if self.total != 1 else ''}"
        self._line(f"testfleet: job {spec.job_id}: {files} of stage {spec.settings.stage} "
                   f"({spec.settings.backend}, {spec.settings.command}), estimate {fmt_seconds(est)}")

    def attempt_started(self, index: int, item: RunItem, attempt: int, timeout: float) -> None:
        head = (f"[{index + 1}/{self.total}] {item.file}"
                + (f" (attempt {attempt})" if attempt > 1 else "")
                + f" - estimate {fmt_seconds(item.estimate)}, timeout {fmt_seconds(timeout)}")
        if self.github:
            self._token = secrets.token_hex(16)
            self._line(f"::group::{gh_escape_data(head)}")
            self._line(f"::stop-commands::{self._token}")
        elif self.buildkite:
            self._line(f"--- {head}")  # a collapsed section in the Buildkite log
        else:
            self._line(f"==> {head}")

    def output(self, data: bytes) -> None:
        self._write(data)
        self._last = data[-1:]

    def attempt_finished(self, index: int, item: RunItem, attempt: Attempt, retrying: bool) -> None:
        if self.github:
            self._line(f"::{self._token}::")
            self._line("::endgroup::")
        line = (f"<== {item.file}: {attempt.outcome.label} in {fmt_seconds(attempt.duration)}"
                f" ({attempt.reason})")
        if self.buildkite and not attempt.outcome.ok:
            self._line("^^^ +++")  # Buildkite: expand the section of the failed attempt
        self._line(line)
        if retrying:
            self._line(f"    retrying: {attempt.retry_reason}")
        elif attempt.retry_reason and not attempt.outcome.ok:
            self._line(f"    not retried: {attempt.retry_reason}")

    def session_file(self, index: int, item: RunItem, attempt: Attempt, retrying: bool) -> None:
        self._line(f"    [{index + 1}/{self.total}] {item.file}: {attempt.outcome.label} in "
                   f"{fmt_seconds(attempt.duration)} ({attempt.reason})")
        if retrying:
            self._line(f"        retrying: {attempt.retry_reason}")
        elif attempt.retry_reason and not attempt.outcome.ok:
            self._line(f"        not retried: {attempt.retry_reason}")

    def file_finished(self, index: int, result: FileResult) -> None:
        for line in result.gate_lines:
            self._line(f"    {line}")
        if self.github and not result.outcome.ok:
            self._line(f"::error file={gh_escape_property(result.item.file)},"
                       f"title={gh_escape_property('testfleet: ' + result.outcome.label)}::"
                       f"{gh_escape_data(result.message or result.outcome.label)}")

    def job_finished(self, result: JobResult) -> None:
        from rich.console import Console

        if self._last != b"\n":
            self._write(b"\n")
        if self._closed:
            return
        console = Console(file=cast(IO[str], _TextOut(self.out)), force_terminal=self.color,
                          no_color=not self.color, width=160, soft_wrap=False)
        # rich pads a table's title and centres its caption to the table's width: in a
        # plain or CI log that is trailing and leading blanks, so print both as lines.
        table = summary_table(result)
        title, caption = str(table.title or ""), str(table.caption or "")
        table.title = table.caption = None
        try:
            console.print(printable(title), markup=False, highlight=False, soft_wrap=True)
            console.print(table)
            console.print(caption, markup=False, highlight=False, soft_wrap=True)
            self.out.flush()
        except (OSError, ValueError):
            self._closed = True

    def warning(self, message: str) -> None:
        text = (f"::warning title=testfleet::{gh_escape_data(message)}\n" if self.github
                else f"testfleet: warning: {printable(message)}\n")
        try:
            self.err.write(text)
            self.err.flush()
        except (OSError, ValueError):
            pass


class _TextOut:
    """A text view of a binary stream for rich (keeps one stream, so ordering is right)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(text.encode("utf-8", errors="replace"))
        return len(text)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return False


class TerminalReporter:
    """A rich progress display on a terminal, test output printed above it."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console = console or Console(stderr=False)
        self.progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=24),
            TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
            TextColumn("/ est {task.fields[est]}"), console=self.console, transient=False,
            redirect_stdout=False, redirect_stderr=False,
        )
        self.total = 0
        self.job_task: Any = None
        self.file_task: Any = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._file_start = 0.0
        self._file_est = 0.0
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._err_console: Any = None

    def job_started(self, spec: JobSpec) -> None:
        self.total = len(spec.items)
        est = sum(i.estimate for i in spec.items)
        self.progress.start()
        self.job_task = self.progress.add_task(
            f"[bold]{spec.job_id}[/]", total=self.total, info=f"0/{self.total} files",
            est=fmt_seconds(est))
        self._ticker = threading.Thread(target=self._tick, daemon=True, name="testfleet-progress")
        self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(0.25):
            task = self.file_task
            if task is not None:
                elapsed = time.monotonic() - self._file_start
                self.progress.update(task, completed=min(elapsed, self._file_est or elapsed))

    def _print(self, *objects: Any, **kwargs: Any) -> None:
        """Print above the progress display; a vanished terminal never stops the run."""
        with contextlib.suppress(OSError, ValueError):
            self.progress.console.print(*objects, **kwargs)

    def attempt_started(self, index: int, item: RunItem, attempt: int, timeout: float) -> None:
        from rich.markup import escape

        label = escape(printable(item.file)) + (f" (attempt {attempt})" if attempt > 1 else "")
        self._file_start = time.monotonic()
        self._file_est = max(item.estimate, 0.001)
        self.file_task = self.progress.add_task(
            f"  {label}", total=self._file_est, info=f"timeout {fmt_seconds(timeout)}",
            est=fmt_seconds(item.estimate))

    def output(self, data: bytes) -> None:
        text = self._pending + self._decoder.decode(data)
        cut = text.rfind("\n")
        if cut < 0:
            self._pending = text
            if len(self._pending) > 4096:
                self._emit(self._pending)
                self._pending = ""
            return
        self._pending = text[cut + 1:]
        self._emit(text[: cut + 1])

    def _emit(self, text: str) -> None:
        from rich.text import Text

        self._print(Text.from_ansi(text.rstrip("\n")), highlight=False,
                                    markup=False, soft_wrap=True)

    def attempt_finished(self, index: int, item: RunItem, attempt: Attempt, retrying: bool) -> None:
        if self._pending:
            self._emit(self._pending)
            self._pending = ""
        if self.file_task is not None:
            self.progress.remove_task(self.file_task)
            self.file_task = None
        self._print(_verdict(item, attempt, retrying, ""))

    def session_file(self, index: int, item: RunItem, attempt: Attempt, retrying: bool) -> None:
        self._print(_verdict(item, attempt, retrying, "    "))

    def file_finished(self, index: int, result: FileResult) -> None:
        from rich.markup import escape

        for line in result.gate_lines:
            self._print(f"    {escape(line)}")
        done = index + 1
        self.progress.update(self.job_task, completed=done, info=f"{done}/{self.total} files")

    def job_finished(self, result: JobResult) -> None:
        self._stop.set()
        if self.file_task is not None:
            self.progress.remove_task(self.file_task)
        with contextlib.suppress(OSError, ValueError):
            self.progress.stop()
        self._print(summary_table(result))

    def warning(self, message: str) -> None:
        from rich.console import Console
        from rich.markup import escape

        text = f"[yellow]testfleet: warning:[/] {escape(message)}"
        if self.progress.live.is_started and sys.stderr.isatty():
            # Written straight to the terminal, the warning would be glued onto the end of
            # the progress line; printed through the display it gets a line of its own.
            self._print(text, highlight=False)
            return
        if self._err_console is None:
            self._err_console = Console(stderr=True)
        self._err_console.print(text, highlight=False)


def _verdict(item: RunItem, attempt: Attempt, retrying: bool, indent: str) -> str:
    """One file's verdict as rich markup (a session's files are indented under it)."""
    from rich.markup import escape

    style = STYLE[attempt.outcome]
    msg = (f"{indent}[{style}]{attempt.outcome.label}[/] {escape(printable(item.file))} in "
           f"{fmt_seconds(attempt.duration)} [dim]({escape(printable(attempt.reason))})[/]")
    if retrying:
        msg += f"\n{indent}    [yellow]retrying:[/] {escape(attempt.retry_reason)}"
    elif attempt.retry_reason and not attempt.outcome.ok:
        msg += f"\n{indent}    [dim]not retried: {escape(attempt.retry_reason)}[/]"
    return msg


def make_reporter(style: str = "auto") -> Any:
    """Pick the reporter: ``github``, ``buildkite``, ``terminal``, ``plain`` or ``auto``
    (GitHub Actions, then Buildkite, then a terminal, else a plain log)."""
    import os

    if style == "auto":
        if os.environ.get("GITHUB_ACTIONS") == "true":
            style = "github"
        elif os.environ.get("BUILDKITE") == "true":
            style = "buildkite"
        elif sys.stdout.isatty() and os.environ.get("TERM") != "dumb":
            style = "terminal"
        else:
            style = "plain"
    from testfleet import color

    # a log is coloured only when asked (FORCE_COLOR: a CI log that renders ANSI), never by NO_COLOR
    if style == "github":
        return LogReporter(github=True, color=color.wanted())
    if style == "buildkite":
        return LogReporter(buildkite=True, color=color.wanted())
    if style == "terminal":
        return TerminalReporter()
    return LogReporter(color=color.wanted())
