"""The adoption report: a Markdown page a maintainer pastes into the PR that introduces
testfleet (``testfleet init --from-existing --report FILE``).

It puts the two sides next to each other: what the project's collector and workflows
say (read statically, never executed) and what the adopted configuration makes
testfleet do -- files and registrations per stage, the stages each trigger runs with a
reason for every difference, what the generated workflow does not carry over, and
every finding still standing between the tree and a clean ``testfleet check``.
"""

from __future__ import annotations

import fnmatch
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from testfleet.policy import Trigger

if TYPE_CHECKING:
    from testfleet.config import Config
    from testfleet.integrations.adopt import Adoption, Scan
    from testfleet.planning.model import Plan
    from testfleet.registry.model import Registration


@dataclass(frozen=True)
class TriggerCase:
    title: str
    trigger: Trigger
    events: tuple[str, ...]  # workflow events that deliver this trigger
    id: str = ""  # the name a saved runner selection uses for it (docs/adopt.md)


def trigger_cases(labels: list[str], schedules: dict[str, str],
                  gate: str | None = None) -> list[TriggerCase]:
    """push, PR without and with labels, every adopted cadence, manual runs. With a
    required PR label (``gate``) the labelled PR cases carry it too."""
    extra = (gate,) if gate else ()
    cases = [
        TriggerCase("push", Trigger(event="push"), ("push",), "push"),
        TriggerCase("PR, no labels", Trigger(event="pull_request"), ("pull_request",), "pr"),
        TriggerCase("PR, every domain label" + (f" and {gate}" if gate else ""), Trigger(
            event="pull_request", labels=(*extra, *(f"run-ci-{lb}" for lb in sorted(labels)))),
            ("pull_request",), "pr-labels"),
        TriggerCase("PR, run-ci-all" + (f" and {gate}" if gate else ""),
                    Trigger(event="pull_request", labels=(*extra, "run-ci-all")),
                    ("pull_request",), "pr-all"),
    ]
    for cadence in ("nightly", "weekly"):
        if cadence in schedules.values():
            cases.append(TriggerCase(f"{cadence} (schedule)",
                                     Trigger(event="schedule", cadence=cadence), ("schedule",),
                                     cadence))
    cases.append(TriggerCase("release", Trigger(event="workflow_dispatch", cadence="release"),
                             ("workflow_call", "workflow_dispatch"), "release"))
    cases.append(TriggerCase("manual run (all labels)",
                             Trigger(event="workflow_dispatch", match_all_labels=True),
                             ("workflow_dispatch",), "manual"))
    return cases


CASE_IDS = ("push", "pr", "pr-labels", "pr-all", "nightly", "weekly", "release", "manual")
_BLOCK = re.compile(r"^==\s*trigger=(\S+)\s+stage=(\S+)\s*==\s*$")
_PY_PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w.-]+\.py)(?![\w/])")


def parse_runner_selection(text: str, source: str) -> dict[tuple[str, str], set[str]]:
    """A saved selection of the project's runner: ``(trigger id, stage) -> files``.

    The file is the runner's own ``--list-only`` / dry-run output for each trigger and
    stage, each preceded by a line ``== trigger=<id> stage=<stage> ==`` (docs/adopt.md).
    Inside a block every ``path.py`` on a line counts as selected, except on the lines of
    a list introduced by a line that starts with "skip" (``Skipped 2 test(s):``) and
    ending at the next line that is not indented and not a bullet. Raises
    :class:`~testfleet.errors.UsageError` naming the line for a malformed header, an
    unknown trigger id, a block given twice or text before the first header.
    """
    from testfleet.errors import UsageError

    out: dict[tuple[str, str], set[str]] = {}
    current: set[str] | None = None
    skipping = False
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r"==\s*trigger=", line):  # a runner's own '=====' rules are text
            m = _BLOCK.match(line)
            if m is None:
                raise UsageError(f"{source}:{number}: expected '== trigger=<id> stage=<stage> ==', "
                                 f"got {line[:80]!r}")
            case, stage = m.groups()
            if case not in CASE_IDS:
                raise UsageError(f"{source}:{number}: unknown trigger {case!r}; valid: "
                                 f"{', '.join(CASE_IDS)}")
            if (case, stage) in out:
                raise UsageError(f"{source}:{number}: trigger={case} stage={stage} is given twice")
            current = out[(case, stage)] = set()
            skipping = False
            continue
        if not line.strip():
            continue
        if current is None:
            raise UsageError(f"{source}:{number}: text before the first "
                             "'== trigger=<id> stage=<stage> ==' line")
        stripped = line.lstrip()
        top = line == stripped and not stripped.startswith(("-", "*", "+"))
        if top:
            skipping = stripped.lower().startswith("skip")
        if skipping:
            continue
        current.update(p.removeprefix("./") for p in _PY_PATH.findall(line))
    return out


def _project_side(scan: Scan, adoption: Adoption) -> dict[str, tuple[int, int]]:
    """stage -> (files, registrations) as the project's collector has them."""
    regs: Counter[str] = Counter()
    files: dict[str, set[str]] = defaultdict(set)
    pattern = str(adoption.data.get("pattern", "test_*.py"))
    for c in scan.calls:
        regs[c.suite] += 1
        files[c.suite].add(c.file)
    registered = {c.file for c in scan.calls}
    for imp in adoption.data.get("implicit", []):
        for f in scan.test_files:
            if f.startswith(imp["path"] + "/") and f not in registered \
                    and fnmatch.fnmatch(f.rsplit("/", 1)[-1], pattern):
                regs[imp["suite"]] += 1
                files[imp["suite"]].add(f)
    return {s: (len(files[s]), regs[s]) for s in regs}


def build_report(repo: Path, scan: Scan, adoption: Adoption, config: Config,
                 runner: dict[tuple[str, str], set[str]] | None = None,
                 runner_source: str = "") -> str:
    from testfleet.config import Project
    from testfleet.planning import make_plan
    from testfleet.planning.request import PlanRequest
    from testfleet.registry import collect

    project = Project(root=repo, config_path=repo / "pyproject.toml", config=config,
                      raw_config_text="")
    registry = collect(project, use_cache=False)
    regs: list[Registration] = list(registry.registrations)
    ours_files: dict[str, set[str]] = defaultdict(set)
    ours_regs: Counter[str] = Counter()
    for r in regs:
        ours_files[r.suite].add(r.file)
        ours_regs[r.suite] += 1
    theirs = _project_side(scan, adoption)
    errors = [f for f in adoption.findings if f.severity == "error"]
    unread = len({(f.file, f.line) for f in errors if f.code in ("adopt-unread", "adopt-call",
                                                                 "adopt-syntax", "adopt-encoding")})
    total = sum(n for _, n in theirs.values())
    lines = ["# Adoption report", "",
             "Generated by `testfleet init --from-existing --report`. The project's side is read "
             "statically from its collector and workflows; nothing of the project was run.", "",
             "## Summary", "",
             f"- registrations kept: **{len(regs)} / {total + unread}** "
             f"({unread} could not be read, see Findings)",
             f"- implicit registrations (by location): "
             f"{sum(1 for r in regs if r.implicit)}",
             f"- excluded paths: {len(adoption.data.get('exclude', []))}",
             f"- hand edits needed before `testfleet check` passes: **{len(errors)}**",
             f"- dormant stages (no CI job runs them): {len(adoption.dormant)}", ""]

    lines += ["## Files and registrations per stage", "",
              "| stage | backend | project: files | project: registrations | testfleet: files "
              "| testfleet: registrations | CI job |",
              "|---|---|---:|---:|---:|---:|---|"]
    for name, stage in sorted(config.stages.items()):
        pf, pr = theirs.get(name, (0, 0))
        ci = adoption.ci.stages.get(name)
        where = f"`{ci.workflow}` / `{ci.job}`" if ci else "none (dormant)"
        lines.append(f"| `{name}` | {stage.backend} | {pf} | {pr} | {len(ours_files[name])} "
                     f"| {ours_regs[name]} | {where} |")
    lines.append("")

    lines += ["## Selection per trigger", "",
              "Stages are compared with the workflows' stage jobs: a stage job of the existing "
              "CI runs when its workflow is triggered by the event; testfleet runs a stage when "
              "the plan has a job for it."
              + (f" Where the project's runner listed its selection ({runner_source}), the "
                 "files are compared with it one by one." if runner else ""), ""]
    labels = sorted(config.labels)
    reasons: dict[str, str] = {
        "empty": "the existing job starts and finds nothing to run for this trigger; testfleet "
                 "asks for no runner when no registration is selected",
        "no-job": "the existing CI has no job for this event; the generated workflow plans it",
        "dormant": "no job of the existing CI runs this stage; adopted as dormant",
        "not-triggered": "the stage's workflow is not triggered by this event",
        "nightly-job": "the existing job passes the runner's --nightly (it then takes only "
                       "nightly=True registrations), which testfleet runs on the cadences that "
                       "admit nightly registrations only: plan with --cadence nightly (a dispatch "
                       "input cadence=nightly) to run them by hand",
        "per-commit-job": "the existing job runs without --nightly (per-commit registrations "
                          "only); this cadence has nightly_split = \"exact\" and runs only "
                          "nightly=True registrations",
    }
    gate = config.policy.required_label
    for case in trigger_cases(labels, config.policy.schedules, gate):
        plan = make_plan(project, registry, PlanRequest(trigger=case.trigger))
        planned: dict[str, int] = Counter()
        for planned_job in plan.jobs:
            planned[planned_job.stage] += len(planned_job.tests)
        rows = []
        for name in sorted(config.stages):
            ci = adoption.ci.stages.get(name)
            # the stage's jobs: one per --hw when the suite runs under several backends
            # (a PR job whose gate wants a label the PR lacks fails before it tests anything)
            triggered = [j for j in ([ci, *ci.by_hw.values()] if ci else [])
                         if any(e in j.events for e in case.events)
                         and not (case.trigger.is_pull_request
                                  and not j.pr_labels_required <= set(case.trigger.labels))]
            ci = triggered[0] if triggered else ci
            runs_there = bool(triggered)
            runs_here = planned.get(name, 0) > 0
            if runs_there == runs_here:
                continue
            if runs_there and not runs_here and ci is not None and ci.runner is not None \
                    and ci.runner.exact_nightly:
                cls = "nightly-job" if ci.nightly_run else (
                    "per-commit-job" if plan.policy.get("exact_nightly") else "empty")
            elif runs_there and not runs_here:
                cls = "empty"
            elif ci is None:
                cls = "dormant"
            elif not any(e in ci.events for e in case.events):
                cls = "no-job" if not any(
                    e in s.events for s in adoption.ci.stages.values() for e in case.events) \
                    else "not-triggered"
            else:
                cls = "empty"
            rows.append(f"| `{name}` | {'yes' if runs_there else 'no'} | "
                        f"{planned.get(name, 0) if runs_here else 'no'} | {reasons[cls]} |")
        total_files = sum(planned.values())
        lines.append(f"### {case.title}: testfleet runs {total_files} file(s) in "
                     f"{len(plan.jobs)} job(s)")
        lines.append("")
        if case.id == "pr-labels" and labels:
            lines += [f"Labels: {', '.join(f'`run-ci-{lb}`' for lb in labels)}.", ""]
        if rows:
            lines += ["| stage | existing CI runs it | testfleet files | reason |",
                      "|---|---|---|---|", *rows]
        else:
            lines.append("Same stages on both sides.")
        lines.append("")
        if runner:
            lines += _file_comparison(case, plan, runner, adoption, config)

    if runner:
        unknown = sorted({f"trigger={c} stage={st}" for c, st in runner
                          if st not in config.stages
                          or c not in {k.id for k in trigger_cases(labels, config.policy.schedules, gate)}})
        if unknown:
            lines += [f"Not compared (no such stage or trigger in the adopted configuration): "
                      f"{', '.join(unknown)}.", ""]
    lines += ["## Not carried over", ""]
    if adoption.not_carried:
        lines += [f"- {n.render()}" for n in adoption.not_carried]
    else:
        lines.append("Nothing.")
    lines += ["", "## Findings", ""]
    if adoption.findings:
        lines += [f"- `{f.render()}`" for f in adoption.findings]
    else:
        lines.append("None: `testfleet check` passes on the tree as it is.")
    lines += ["", "## Notes", ""]
    lines += [f"- {n}" for n in adoption.notes] or ["None."]
    return "\n".join(lines) + "\n"


def _file_comparison(case: TriggerCase, plan: Plan, runner: dict[tuple[str, str], set[str]],
                     adoption: Adoption, config: Config) -> list[str]:
    """The files of each stage the runner listed for this trigger, against the plan's,
    with the reason for each difference class."""
    jobs = plan.jobs
    fates = {(f.file, f.suite): f"{f.reason} ({f.detail})" if f.detail else f.reason
             for f in plan.skipped}
    unread = {f.file for f in adoption.findings if f.severity == "error"}
    excluded = set(adoption.data.get("exclude", []))
    rows: list[str] = []
    same = 0
    for (case_id, stage), listed in sorted(runner.items()):
        if case_id != case.id or stage not in config.stages:
            continue
        ours = {t.file for j in jobs if j.stage == stage for t in j.tests}
        if ours == listed:
            same += 1
            continue
        for file in sorted(listed - ours):
            why = ("its registration could not be adopted (see Findings)" if file in unread
                   else "excluded by the adopted configuration" if file in excluded
                   else f"testfleet's fate: {fates[(file, stage)]}" if (file, stage) in fates
                   else "not explained by the adoption: compare the runner's rules with the policy")
            rows.append(f"| `{stage}` | `{file}` | runner only | {why} |")
        for file in sorted(ours - listed):
            rows.append(f"| `{stage}` | `{file}` | testfleet only | not explained by the adoption: "
                        "compare the runner's rules with the policy |")
    if not rows and not same:
        return []
    out = [f"Compared with the runner's list: {same} stage(s) select the same files"
           + (f", {len(rows)} file difference(s):" if rows else "."), ""]
    if rows:
        out += ["| stage | file | side | reason |", "|---|---|---|---|", *rows]
    return [*out, ""]
