"""Human summaries of a finished job: a terminal table and GitHub's step-summary Markdown."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testfleet.runner.model import FileResult, JobResult, Outcome
from testfleet.runner.textclean import clean, last_lines
from testfleet.textsafe import printable

if TYPE_CHECKING:
    from rich.table import Table

STYLE = {
    Outcome.PASSED: "green", Outcome.FLAKY: "yellow", Outcome.FAILED: "bold red",
    Outcome.TIMEOUT: "bold red", Outcome.ERROR: "bold red", Outcome.INTERRUPTED: "magenta",
    Outcome.NOT_RUN: "dim",
}
ICON = {
    Outcome.PASSED: "✅", Outcome.FLAKY: "⚠️", Outcome.FAILED: "❌", Outcome.TIMEOUT: "⏱️",
    Outcome.ERROR: "💥", Outcome.INTERRUPTED: "🛑", Outcome.NOT_RUN: "⏭️",
}
TAIL_LINES = 60
# GitHub rejects a step summary over 1 MiB; 20 tails of 60 lines stay far below that.
MAX_DETAILS = 20
TAIL_CHARS = 8000  # per file, so 20 tails of very long lines stay below it too


def fmt_seconds(s: float) -> str:
    if s < 60:
        return f"{s:.1f}s"
    minutes, sec = divmod(round(s), 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def counts_line(job: JobResult) -> str:
    parts = [f"{job.count(o)} {o.value}" for o in Outcome if job.count(o)]
    line = ", ".join(parts) or "no files"
    # a quarantined file's pass proves little and its failure does not block (#14)
    risky = sum(1 for r in job.results if r.item.quarantined)
    return line + (f"; {risky} quarantined (at risk, not counted as healthy)" if risky else "")


def verdict(job: JobResult) -> str:
    if job.interrupted_by is not None:
        return "INTERRUPTED"
    return "PASSED" if job.exit_code == 0 else "FAILED"


def summary_table(job: JobResult) -> Table:
    from rich.table import Table

    table = Table(title=f"testfleet run {job.spec.job_id}: {verdict(job)} ({counts_line(job)})",
                  title_justify="left")
    for name, justify in (("file", "left"), ("outcome", "left"), ("attempts", "right"),
                          ("duration", "right"), ("estimate", "right"), ("note", "left")):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for res in job.results:
        table.add_row(
            _escape_rich(res.item.file),
            f"[{STYLE[res.outcome]}]{res.outcome.label}[/]",
            str(len(res.attempts)) if res.attempts else "-",
            fmt_seconds(res.duration) if res.attempts else "-",
            fmt_seconds(res.item.estimate),
            _escape_rich(res.message),
        )
    table.caption = (f"total {fmt_seconds(sum(r.duration for r in job.results))} "
                     f"(wall {fmt_seconds(job.duration)}) vs estimate {fmt_seconds(job.estimate)}")
    return table


def _escape_rich(text: str) -> str:
    """A cell of untrusted text: no rich markup, and no line of its own (a table row
    printed outside the ``::stop-commands::`` fence must not become a workflow command)."""
    from rich.markup import escape

    return escape(printable(text))


def md_escape(text: str) -> str:
    """Escape text for a Markdown table cell: hostile file names must not break the table
    (control characters shown, not passed; then the shared escaper)."""
    from testfleet.mdtext import md

    return md(clean(text))


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def step_summary_markdown(job: JobResult) -> str:
    from testfleet.runner.incident_job import job_incidents
    from testfleet.runner.step_summary import incident_lines, probe_lines

    spec = job.spec
    icon = "✅" if job.exit_code == 0 else ("🛑" if job.interrupted_by is not None else "❌")
    incidents = job_incidents(job)  # lead: one cause on eight files is one incident
    note = {f: i.id for i in incidents for f in i.files}
    lines = [
        f"### {icon} testfleet run `{md_escape(spec.job_id)}`: {verdict(job)}",
        "",
        *probe_lines(job),
        *incident_lines(job, incidents),
        f"Stage **{md_escape(spec.settings.stage)}** ({md_escape(spec.settings.backend)}, "
        f"`{spec.settings.command}`), {len(job.results)} files: {counts_line(job)}. "
        f"Took {fmt_seconds(job.duration)} vs estimate {fmt_seconds(job.estimate)}.",
        "",
        "| file | outcome | attempts | duration | estimate | note |",
        "|---|---|---:|---:|---:|---|",
    ]
    for res in job.results:
        lines.append(
            f"| {md_escape(res.item.file)} | {ICON[res.outcome]} {res.outcome.label} | "
            f"{len(res.attempts) or '-'} | {fmt_seconds(res.duration) if res.attempts else '-'} | "
            f"{fmt_seconds(res.item.estimate)} | "
            + (f"incident `{note[res.item.file]}`: " if res.item.file in note else "")
            + f"{md_escape(res.message)} |"
        )
    bad = [r for r in job.results if not (r.outcome.ok or r.outcome is Outcome.NOT_RUN)]
    shown = _one_per_incident(bad, incidents)
    for res, others in shown[:MAX_DETAILS]:
        lines += _details(res, others)
    if len(shown) > MAX_DETAILS:
        lines += ["", f"_{len(shown) - MAX_DETAILS} more failed files: their output is in the "
                      "job log and the JUnit file._"]
    gate = [(r.item.file, line) for r in job.results for line in r.gate_lines]
    if gate:
        lines += ["", "**Metric gate**", ""]
        lines += [f"- {md_escape(f)}: {md_escape(line)}" for f, line in gate]
    return "\n".join(lines) + "\n"


def _one_per_incident(bad: list[FileResult], incidents: list[Any]) -> list[tuple[FileResult, list[str]]]:
    """One output per cause: a file-level incident's first file stands for the others
    (named under it); a file not in such an incident is shown as before."""
    first_of: dict[str, list[str]] = {}
    for incident in incidents:
        if incident.tests:
            continue  # per-test incidents: each file's output tells its own tests' story
        files = list(incident.files)
        first_of.setdefault(files[0], []).extend(files[1:])
    covered = {f for others in first_of.values() for f in others}
    return [(r, first_of.get(r.item.file, [])) for r in bad if r.item.file not in covered]


def _details(res: FileResult, others: list[str] | None = None) -> list[str]:
    tail = last_lines(clean(res.tail), TAIL_LINES)[-TAIL_CHARS:]
    fence = _fence(tail)
    also = ""
    if others:
        names = ", ".join(md_escape(f) for f in others[:10])
        more = f" and {len(others) - 10} more" if len(others) > 10 else ""
        also = f" (the same signature on {len(others)} more: {names}{more})"
    return ["", f"<details><summary>{md_escape(res.item.file)}: {res.outcome.label}, "
            f"{md_escape(res.message)}{also}</summary>", "", f"{fence}text", tail, fence, "",
            "</details>"]


def append_step_summary(job: JobResult, environ: dict[str, str] | None = None) -> Path | None:
    """Append to ``$GITHUB_STEP_SUMMARY`` when it is set; return the path written."""
    env = os.environ if environ is None else environ
    target = env.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(step_summary_markdown(job))
    return path
