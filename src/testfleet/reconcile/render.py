"""A reconciliation as JSON (``testfleet.reconcile/1``), Markdown (the step summary), a
plain text listing, and GitHub ``::error`` lines. Every file name, job id and reason
came from a status file a job wrote next to a pull request's code: each is escaped by the
project's rules (:func:`~testfleet.textsafe.printable`, :func:`~testfleet.mdtext.md`,
GitHub's workflow-command escaping)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from testfleet.mdtext import md
from testfleet.reconcile.compare import FileProblem, JobProblem, Reconciliation
from testfleet.textsafe import printable

if TYPE_CHECKING:
    from testfleet.documents.reconcile import ReconcileDoc

SCHEMA: Final = "testfleet.reconcile/1"
#: rows listed per kind of problem in text and Markdown (JSON lists them all)
SHOWN = 50

#: kind of problem -> (heading, what it means), in the order they are shown
KINDS: dict[str, tuple[str, str]] = {
    "missing_jobs": ("jobs that never reported", "no status file: the job did not run, died "
                                                 "before writing it, or its artifact is lost"),
    "missing": ("files never reported", "planned, and no job said anything about them"),
    "not_run": ("files reported but not run", "their job stopped before them (fast-fail, "
                                              "interruption) or pytest did not collect them"),
    "duplicated": ("files run more than once", "two jobs (or one job twice) executed them"),
    "moved": ("files run by another job than planned", "the job ran from another split"),
    "unplanned": ("files run but not planned", "executed, but not in this plan"),
    "other_plan": ("statuses from another plan", "the job executed a plan with another digest"),
    "incomplete": ("jobs that did not finish", "interrupted, killed, refused, or only part of "
                                               "their tests selected"),
    "unplanned_jobs": ("statuses that match no job of the plan", "a job or an empty shard this "
                                                                  "plan does not have"),
    "impossible": ("statuses that contradict their plan job", "a field no run of that job "
                                                              "writes: edited, or not written by "
                                                              "testfleet"),
    "failed": ("files whose final report failed", "after a rescue wave reconcile judges every "
                                                  "file's final report (not quarantined)"),
}
#: what is accepted but shown, in the order shown
ACCEPTED: dict[str, tuple[str, str]] = {
    "empty_shards": ("empty shards", "accepted"),
    "superseded": ("superseded attempts", "accepted"),
    "rescued_jobs": ("jobs whose runner was lost, rescued", "accepted: the rescue wave ran "
                                                            "their unreported files"),
    "rescued": ("files from the rescue wave", "accepted: their one final report is the "
                                              "rescue job's"),
    "late": ("files a rescue job ran that their own shard reported late", "accepted: the "
             "shard's report counts, the rescue's run of them does not"),
}


# -- JSON ------------------------------------------------------------------------------------


def to_json(r: Reconciliation) -> ReconcileDoc:
    return {
        "schema": SCHEMA, "ok": r.ok, "plan_digest": r.plan_digest,
        "planned": {"jobs": r.planned_jobs, "files": r.planned_files},
        "reported": {"statuses": r.statuses, "files_executed": r.executed},
        "outcomes": dict(r.outcomes),
        "missing_jobs": [p.to_json() for p in r.missing_jobs],
        "missing": [p.to_json() for p in r.missing],
        "not_run": [p.to_json() for p in r.not_run],
        "duplicated": [p.to_json() for p in r.duplicated],
        "moved": [p.to_json() for p in r.moved],
        "unplanned": [p.to_json() for p in r.unplanned],
        "other_plan": [p.to_json() for p in r.other_plan],
        "incomplete": [p.to_json() for p in r.incomplete],
        "unplanned_jobs": [p.to_json() for p in r.unplanned_jobs],
        "impossible": [p.to_json() for p in r.impossible],
        "empty_shards": [p.to_json() for p in r.empty_shards],
        "superseded": [p.to_json() for p in r.superseded],
        "failed": [p.to_json() for p in r.failed],
        "rescue_digest": r.rescue_digest,
        "rescued_jobs": [p.to_json() for p in r.rescued_jobs],
        "rescued": [p.to_json() for p in r.rescued],
        "late": [p.to_json() for p in r.late],
        "problems": problem_lines(r),
    }


# -- words -----------------------------------------------------------------------------------


def verdict(r: Reconciliation) -> str:
    if not r.ok:
        count = sum(len(getattr(r, name)) for name in Reconciliation.PROBLEMS)
        return f"FAILED: {count} problem(s) between the plan and what its jobs reported"
    if not r.planned_jobs:
        return "OK: the plan has no jobs, and no job executed anything"
    rescued = (f"; {len(r.rescued)} of them from the rescue wave" if r.rescued else "")
    return (f"OK: every planned file ran exactly once ({r.executed} file(s) in "
            f"{r.planned_jobs} job(s){rescued})")


def _file_line(p: FileProblem) -> str:
    where = f" (planned in {p.planned_job})" if p.planned_job else ""
    by = f" by {', '.join(p.jobs)}" if p.jobs else ""
    return f"{p.stage} {p.file}{where}{by}"


def _job_line(p: JobProblem) -> str:
    src = f" [{p.source}]" if p.source else ""
    return f"{p.job_id} ({p.stage}): {p.detail}{src}"


def _line(item: FileProblem | JobProblem) -> str:
    return _file_line(item) if isinstance(item, FileProblem) else _job_line(item)


def problem_lines(r: Reconciliation) -> list[str]:
    """One line per kind of problem, naming the first few (untrusted text, not escaped)."""
    out = []
    for name, (heading, _) in KINDS.items():
        items = getattr(r, name)
        if items:
            names = "; ".join(_line(i) for i in items[:5])
            more = f"; and {len(items) - 5} more" if len(items) > 5 else ""
            out.append(f"{len(items)} {heading}: {names}{more}")
    return out


def render_text(r: Reconciliation) -> str:
    lines = [f"testfleet reconcile: {verdict(r)}",
             f"plan {r.plan_digest}: {r.planned_jobs} job(s), {r.planned_files} file(s); "
             f"{r.statuses} status file(s), {r.executed} planned file(s) executed"]
    if r.outcomes:
        lines.append("outcomes: " + ", ".join(f"{n} {o}" for o, n in r.outcomes.items()))
    for name, (heading, meaning) in {**KINDS, **ACCEPTED}.items():
        items = getattr(r, name)
        if not items:
            continue
        lines.append(f"{len(items)} {heading} ({meaning}):")
        lines += [f"  {printable(_line(i))}" for i in items[:SHOWN]]
        if len(items) > SHOWN:
            lines.append(f"  ... and {len(items) - SHOWN} more (--format json lists all)")
    return "\n".join(lines) + "\n"


def render_markdown(r: Reconciliation) -> str:
    icon = "✅" if r.ok else "❌"
    lines = [f"### {icon} testfleet reconcile: {md(verdict(r))}", "",
             f"Plan `{md(r.plan_digest[:19])}…`: {r.planned_jobs} job(s), {r.planned_files} "
             f"planned file(s); {r.statuses} status file(s); {r.executed} planned file(s) "
             "executed."]
    if r.outcomes:
        lines += ["", "Outcomes: " + ", ".join(f"{n} {md(o)}" for o, n in r.outcomes.items())]
    for name, (heading, meaning) in {**KINDS, **ACCEPTED}.items():
        items = getattr(r, name)
        if not items:
            continue
        lines += ["", f"#### {len(items)} {md(heading)}", "", md(meaning), ""]
        if isinstance(items[0], FileProblem):
            lines += ["| stage | file | planned job | jobs |", "|---|---|---|---|"]
            lines += [f"| {md(p.stage)} | {md(p.file)} | {md(p.planned_job or '-')} | "
                      f"{md(', '.join(p.jobs) or '-')} |" for p in items[:SHOWN]]
        else:
            lines += ["| job | stage | detail |", "|---|---|---|"]
            lines += [f"| {md(p.job_id)} | {md(p.stage)} | {md(p.detail)} |"
                      for p in items[:SHOWN]]
        if len(items) > SHOWN:
            lines.append(f"\n… and {len(items) - SHOWN} more (`--format json` lists all)")
    return "\n".join(lines) + "\n"


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_annotations(r: Reconciliation) -> list[str]:
    """GitHub ``::error`` workflow commands, one per kind of problem."""
    return [f"::error title=testfleet reconcile::{_escape_data(printable(line))}"
            for line in problem_lines(r)]
