"""The switch: turn off exactly the existing workflows' jobs whose tests the adopted
configuration now runs (``testfleet init --switch``), reversibly (``--unswitch``).

Each replaced job gets the smallest edit that stops it, one line: ``if: false`` with a
comment naming the testfleet workflow that replaces it (an ``if:`` it had is replaced by
that line). Every other job -- lint, image builds, releases, bots, a job running tests
testfleet does not own -- is left as it is, and each is listed with why. The edit is made
on the text (comments, quoting and order stay), read back as YAML before anything is
written (every other key must come out equal), and recorded hunk by hunk with both
files' SHA-256 in ``.github/testfleet-switch.json``, committed with the change, so
``--unswitch`` restores every byte from any checkout.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testfleet.adopt.job import TEST_COMMAND
from testfleet.adopt.workflow_yaml import GENERATED_MARK, events_of
from testfleet.errors import UsageError
from testfleet.workflow_calls import (
    WorkflowUnreadable,
    on_of,
    parse_workflow,
    text_of,
    workflow_text,
)

if TYPE_CHECKING:
    import yaml

    from testfleet.adopt.derive import Adoption
    from testfleet.config import Config
    from testfleet.documents.switch import EditDoc, JobAction, JobDecisionDoc, SwitchRecordDoc

RECORD = ".github/testfleet-switch.json"
REPLACERS = (".github/workflows/testfleet.yml", ".github/workflows/testfleet-trusted.yml")
MAX_RECORD_BYTES = 4 * 1024 * 1024


@dataclass
class SwitchResult:
    """What ``--switch`` / ``--unswitch`` would write: whole files (bytes), the record to
    delete (``--unswitch``), and each job's decision."""

    writes: list[tuple[Path, bytes]] = field(default_factory=list)
    delete: Path | None = None
    jobs: list[JobDecisionDoc] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _workflows(repo: Path) -> dict[str, dict[str, Any]]:
    """The project's own workflows that an event starts (``rel -> data``): testfleet's
    generated ones and reusable workflows (run only where called) are not jobs to switch."""
    wf_dir = repo / ".github" / "workflows"
    out: dict[str, dict[str, Any]] = {}
    if not wf_dir.is_dir():
        return out
    for path in sorted(p for p in wf_dir.iterdir() if p.suffix in (".yml", ".yaml") and p.is_file()):
        rel = path.relative_to(repo).as_posix()
        try:
            text = workflow_text(path)
            if GENERATED_MARK in text:
                continue
            data = parse_workflow(text)
        except WorkflowUnreadable as exc:
            raise UsageError(f"{rel}:{exc.line}: not a workflow testfleet can read ({exc}); "
                             "nothing was switched") from None
        if not isinstance(data, dict) or not isinstance(data.get("jobs"), Mapping):
            continue
        if set(events_of(on_of(data))) <= {"workflow_call"}:
            continue
        out[rel] = data
    return out


def _needs(job: Any) -> list[str]:
    needs = job.get("needs") if isinstance(job, Mapping) else None
    if isinstance(needs, str):
        return [needs]
    return [str(n) for n in needs] if isinstance(needs, list) else []


def classify_jobs(repo: Path, adoption: Adoption, config: Config) -> list[JobDecisionDoc]:
    """Every job of the workflows an event starts: ``replaced`` (its every test run is a
    stage the configuration runs), ``left-alone`` (tied to tests, but not testfleet's to
    turn off: tests of a stage the configuration lacks or keeps dormant, a job that only
    feeds replaced jobs, a job that needs one) or ``kept`` (runs no test)."""
    routes: dict[tuple[str, str], list[tuple[str, tuple[str, ...]]]] = {}
    for rel, job, stage, files in adoption.ci.job_runs:
        routes.setdefault((rel, job), []).append((stage, files))
    testing = {(rel, job) for rel, job, _ in adoption.ci.test_commands}
    by_path = {f: name for name, st in config.stages.items() for f in (st.files or [])}
    decisions: list[JobDecisionDoc] = []
    for rel, data in _workflows(repo).items():
        jobs = {str(k): v for k, v in data["jobs"].items()}
        verdicts: dict[str, tuple[JobAction, str]] = {}
        for job_id in jobs:
            runs = routes.get((rel, job_id), [])
            owned: list[str] = []
            missing: list[str] = []
            for stage, files in runs:
                if stage:
                    st = config.stages.get(stage)
                    if st is None:
                        missing.append(f"stage {stage} is not in the configuration")
                    elif st.disabled:
                        missing.append(f"stage {stage} is dormant in the configuration "
                                       f"({st.disabled})")
                    else:
                        owned.append(stage)
                else:
                    named = sorted({by_path[f] for f in files if f in by_path})
                    if named:
                        owned += named
                    else:
                        missing.append("the files it runs by path are in no stage's files")
            if owned and not missing:
                verdicts[job_id] = ("replaced", "runs " + ", ".join(sorted(set(owned))))
            elif missing:
                verdicts[job_id] = ("left-alone", "; ".join(missing))
            elif (rel, job_id) in testing:
                verdicts[job_id] = ("left-alone", "runs tests testfleet does not own")
        replaced = {j for j, (action, _) in verdicts.items() if action == "replaced"}
        for job_id, job in jobs.items():
            if job_id in verdicts:
                continue
            needed = sorted(n for n in _needs(job) if n in replaced)
            users = sorted(j for j, other in jobs.items() if job_id in _needs(other))
            if needed:
                verdicts[job_id] = ("left-alone", f"needs replaced job(s) {', '.join(needed)}: "
                                    "skipped when they are, unless its if: uses always()")
            elif users and all(u in replaced for u in users) and not TEST_COMMAND.search(text_of(job)):
                verdicts[job_id] = ("left-alone", f"only feeds replaced job(s) {', '.join(users)}; "
                                    "turn it off by hand if nothing else uses it")
            else:
                verdicts[job_id] = ("kept", "runs no test")
        for job_id in jobs:
            action, why = verdicts[job_id]
            decisions.append({"workflow": rel, "job": job_id, "action": action, "why": why})
    return decisions


def render_jobs(jobs: list[JobDecisionDoc]) -> list[str]:
    """One Markdown table row per job (the adoption report's and ``--switch``'s list)."""
    rows = ["| workflow | job | switch | why |", "|---|---|---|---|"]
    rows += [f"| `{j['workflow']}` | `{j['job']}` | {j['action']} | {j['why']} |" for j in jobs]
    return rows


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _job_nodes(text: str, rel: str) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    """job id -> (key node, value node), with their positions in the text."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise UsageError(f"{rel}:{mark.line + 1 if mark else 0}: not valid YAML ({exc})") from None
    if not isinstance(root, yaml.MappingNode):
        raise UsageError(f"{rel}:1: not a workflow (a mapping is expected)")
    for key, value in root.value:
        if key.value == "jobs" and isinstance(value, yaml.MappingNode):
            return {str(k.value): (k, v) for k, v in value.value}
    raise UsageError(f"{rel}:1: no jobs mapping")


def _disable(lines: list[str], rel: str, job_id: str, key: yaml.Node, value: yaml.Node,
             comment: str) -> tuple[int, list[str], list[str]]:
    """The hunk that turns one job off: ``(0-based start, removed, added)``."""
    import yaml

    if not isinstance(value, yaml.MappingNode) or value.flow_style or not value.value:
        raise UsageError(f"{rel}:{key.start_mark.line + 1}: job {job_id} is not a block mapping; "
                         "turn it off by hand (add 'if: false')")
    indent = value.value[0][0].start_mark.column
    first = lines[key.start_mark.line]
    eol = first[len(first.rstrip("\r\n")):] or "\n"
    added = [" " * indent + f"if: false  # {comment}" + eol]
    for k, v in value.value:
        if k.value == "if":
            start = k.start_mark.line
            end = v.end_mark.line if v.end_mark.column > 0 else v.end_mark.line - 1
            if start != key.start_mark.line and lines[start][:indent].strip() == "":
                return start, lines[start:end + 1], added
            raise UsageError(f"{rel}:{start + 1}: the if: of job {job_id} shares its line with "
                             "other keys; turn the job off by hand")
    return key.start_mark.line + 1, [], added


def switch(repo: Path, jobs: list[JobDecisionDoc]) -> SwitchResult:
    """The edited workflows and the record, for the jobs ``classify_jobs`` replaced."""
    record_path = repo / RECORD
    if record_path.exists():
        raise UsageError(f"{RECORD} exists: the old workflows are switched already "
                         "('testfleet init --unswitch' turns them back on)")
    replacers = [r for r in REPLACERS if (repo / r).is_file()]
    if REPLACERS[0] not in replacers:
        raise UsageError("no .github/workflows/testfleet.yml: run 'testfleet init --github' "
                         "first; the switch turns old jobs off only where testfleet's "
                         "workflow runs their stages")
    by: str = " / ".join(Path(r).name for r in replacers)
    result = SwitchResult(jobs=jobs)
    record: SwitchRecordDoc = {"schema": "testfleet.switch/1", "workflows": [], "jobs": jobs}
    per_file: dict[str, list[JobDecisionDoc]] = {}
    for j in jobs:
        if j["action"] == "replaced":
            per_file.setdefault(j["workflow"], []).append(j)
    for rel, replaced in sorted(per_file.items()):
        path = repo / rel
        before = path.read_bytes()
        try:
            text = before.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"{rel}: not UTF-8 text (byte {exc.start})") from None
        lines = text.splitlines(keepends=True)
        nodes = _job_nodes(text, rel)
        hunks = sorted(
            (_disable(lines, rel, j["job"], *nodes[j["job"]],
                      f"replaced by {by} ({j['why'].removeprefix('runs ')}); undo: "
                      "testfleet init --unswitch")
             for j in replaced), key=lambda h: h[0])
        out = list(lines)
        for start, removed, added in reversed(hunks):
            out[start:start + len(removed)] = added
        after_text = "".join(out)
        _check(rel, text, after_text, {j["job"] for j in replaced})
        after = after_text.encode("utf-8")
        edits: list[EditDoc] = []
        shift = 0
        for start, removed, added in hunks:
            edits.append({"line": start + shift + 1, "removed": removed, "added": added})
            shift += len(added) - len(removed)
        record["workflows"].append({"path": rel, "before_sha256": _sha(before),
                                    "after_sha256": _sha(after), "edits": edits})
        result.writes.append((path, after))
    if not per_file:
        raise UsageError("no job of the existing workflows runs only stages the configuration "
                         "runs; nothing to switch")
    result.writes.append((record_path, (json.dumps(record, indent=1) + "\n").encode("utf-8")))
    return result


def _check(rel: str, before: str, after: str, replaced: set[str]) -> None:
    """The edited workflow read back: the replaced jobs' ``if`` is false and nothing else
    of the workflow changed."""
    old, new = parse_workflow(before), parse_workflow(after)
    for job in replaced:
        if new["jobs"][job].get("if") is not False:
            raise UsageError(f"{rel}: switching job {job} off did not read back as if: false; "
                             "nothing was switched")
        old["jobs"][job] = {k: v for k, v in old["jobs"][job].items() if k != "if"}
        new["jobs"][job] = {k: v for k, v in new["jobs"][job].items() if k != "if"}
    if old != new:
        raise UsageError(f"{rel}: the edit would change more than the replaced jobs' if:; "
                         "nothing was switched")


def read_record(repo: Path) -> SwitchRecordDoc:
    """The switch record, strictly (a file that is not one is an error naming it)."""
    from pydantic import TypeAdapter, ValidationError

    from testfleet.documents.switch import SwitchRecordDoc
    from testfleet.fileio import read_regular

    path = repo / RECORD
    if not path.exists():
        raise UsageError(f"no {RECORD}: nothing was switched by 'testfleet init --switch' here")
    try:
        data = json.loads(read_regular(path, MAX_RECORD_BYTES).decode("utf-8"))
    except OSError as exc:
        raise UsageError(f"{RECORD}: cannot read it ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{RECORD}: not a JSON document ({exc})") from None
    try:
        return TypeAdapter(SwitchRecordDoc).validate_python(data, strict=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"{RECORD}: {'.'.join(str(p) for p in first['loc'])}: "
                         f"{first['msg']}") from None


def unswitch(repo: Path) -> SwitchResult:
    """The workflows as they were before the switch, and the record to delete.

    A workflow untouched since the switch comes back byte for byte (its SHA-256 is
    checked); one edited since gets each switched line replaced by what it replaced,
    where that line still is, and is named in a note; a switched line that is gone is an
    error naming the file and line (nothing is written)."""
    record = read_record(repo)
    result = SwitchResult(delete=repo / RECORD, jobs=record["jobs"])
    for wf in record["workflows"]:
        path = repo / wf["path"]
        try:
            current = path.read_bytes()
        except OSError as exc:
            raise UsageError(f"{wf['path']}: cannot read it ({exc.strerror or exc}); nothing "
                             "was restored") from None
        if _sha(current) == wf["before_sha256"]:
            result.notes.append(f"{wf['path']} is as it was before the switch already")
            continue
        lines = current.decode("utf-8").splitlines(keepends=True)
        for edit in reversed(wf["edits"]):
            at = edit["line"] - 1
            if lines[at:at + len(edit["added"])] != edit["added"]:
                found = [i for i in range(len(lines))
                         if lines[i:i + len(edit["added"])] == edit["added"]]
                if len(found) != 1:
                    raise UsageError(f"{wf['path']}:{edit['line']}: the switched line "
                                     f"{edit['added'][0].strip()!r} is no longer there; restore "
                                     "the job by hand (nothing was restored)")
                at = found[0]
            lines[at:at + len(edit["added"])] = edit["removed"]
        restored = "".join(lines).encode("utf-8")
        if _sha(current) == wf["after_sha256"] and _sha(restored) != wf["before_sha256"]:
            raise UsageError(f"{wf['path']}: the restored file is not the one recorded before "
                             "the switch; nothing was restored")
        if _sha(current) != wf["after_sha256"]:
            result.notes.append(f"{wf['path']} was edited since the switch: the switched lines "
                                "were put back, the later edits kept")
        result.writes.append((path, restored))
    return result
