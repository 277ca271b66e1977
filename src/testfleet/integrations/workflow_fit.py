"""Whether a plan fits the workflow about to run it: ``testfleet plan --fits-workflow``.

A generated workflow's stage jobs (in the stages workflow it calls) have each lane's
runner and CI settings (container, setup, secrets, env, ...) written in them, because
GitHub reads them before any plan exists. When the configuration changes and the workflow is not regenerated, a
plan's jobs would run under settings it was not made for. The plan job therefore reads
the workflow file it runs in (the base branch's, for ``testfleet-trusted.yml``) and
refuses a plan that has jobs for a lane with no job in it, for a lane whose ``runs-on``
there is not the plan's, or whose CI settings digest (the job's ``TESTFLEET_CI_SETTINGS``)
differs; and a lane with more jobs than a GitHub matrix holds. The check was a Python
script inlined into every generated plan job; here it is testfleet's own code, tested.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from testfleet.integrations.github_groups import LANES_ENV
from testfleet.planning.jobci import static_fingerprint

#: The env key of a stage job that holds the digest of the CI settings it was written with.
SETTINGS_ENV = "TESTFLEET_CI_SETTINGS"
MAX_MATRIX = 256  # GitHub's limit of jobs per matrix
_RUNNERS_MAP = re.compile(r"\$\{\{\s*fromJSON\('((?:[^']|'')*)'\)\[matrix\.lane\]\s*\}\}")
_LANE = re.compile(r"fromJSON\((?:needs\.plan\.outputs|inputs)\.stages\)\['((?:[^']|'')+)'\]\.matrix")
#: A job that calls a reusable workflow of the same repository (the stages workflow).
_LOCAL_CALL = re.compile(r"^\./\.github/workflows/([A-Za-z0-9_.-]+\.ya?ml)$")
REGENERATE = "regenerate it with 'testfleet init --github --force'"


def _doc(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"not YAML: {str(exc).splitlines()[0]}") from None


def _stage_jobs(doc: Any) -> list[tuple[str, dict[str, Any]]]:
    """(the key of its matrix in the plan's ``stages`` output, the job) for every stage job
    of a generated workflow (or of the stages workflow it calls)."""
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    out: list[tuple[str, dict[str, Any]]] = []
    for job in (jobs or {}).values():
        if not isinstance(job, dict) or not isinstance(job.get("strategy"), dict):
            continue
        m = _LANE.search(str(job["strategy"].get("matrix", "")))
        if m is not None:
            out.append((m.group(1).replace("''", "'"), job))
    return out


def _called(doc: Any) -> list[str]:
    """The file names (in the same ``.github/workflows``) of the reusable workflows of this
    repository the workflow ``doc`` calls, in order, each once."""
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    names: list[str] = []
    for job in (jobs or {}).values():
        m = _LOCAL_CALL.match(str(job.get("uses", "")).strip()) if isinstance(job, dict) else None
        if m is not None and m.group(1) not in names:
            names.append(m.group(1))
    return names


def _members(key: str, job: Mapping[str, Any]) -> list[str]:
    env = job.get("env")
    named = env.get(LANES_ENV) if isinstance(env, dict) else None
    return str(named).split() if named else [key]


def _labels(runs_on: Any, lane: str) -> list[str]:
    if isinstance(runs_on, str):
        m = _RUNNERS_MAP.fullmatch(runs_on.strip())
        if m is None:
            return [runs_on]
        try:
            table = json.loads(m.group(1).replace("''", "'"))
        except ValueError:
            return [runs_on]
        value = table.get(lane, []) if isinstance(table, dict) else []
        return [value] if isinstance(value, str) else [str(x) for x in value]
    return [str(x) for x in runs_on or []]


@dataclass(frozen=True)
class WorkflowJobs:
    """The stage jobs of a generated workflow, read once.

    ``lanes``: lane -> (its job's ``runs-on`` labels, its CI settings digest), for every
    lane a stage job runs (one lane, or the group named in its ``TESTFLEET_LANES``, each
    with its runners in the job's map). ``groups``: key -> (its lanes, whether its job is
    written ``fail-fast: false``) for every job that runs several lanes (the plan's
    ``stages`` output keys their matrix by ``key``)."""

    lanes: dict[str, tuple[list[str], str]]
    groups: dict[str, tuple[list[str], bool]]


def workflow_jobs(*texts: str) -> WorkflowJobs:
    """The stage jobs of the workflows ``texts`` (a generated workflow and the stages
    workflow it calls), read together."""
    return _workflow_jobs([_doc(text) for text in texts])


def _workflow_jobs(docs: list[Any]) -> WorkflowJobs:
    out = WorkflowJobs({}, {})
    for key, job in (pair for doc in docs for pair in _stage_jobs(doc)):
        env = job.get("env")
        digest = env.get(SETTINGS_ENV, "") if isinstance(env, dict) else ""
        members = _members(key, job)
        for lane in members:
            out.lanes[lane] = (_labels(job.get("runs-on"), lane), str(digest))
        if len(members) > 1:
            out.groups[key] = (members, job["strategy"].get("fail-fast") is False)
    return out


def workflow_lanes(*texts: str) -> dict[str, tuple[list[str], str]]:
    """:attr:`WorkflowJobs.lanes` of the workflows ``texts``."""
    return workflow_jobs(*texts).lanes


def read_workflow(path: Path) -> WorkflowJobs:
    """The generated workflow at ``path`` with the stages workflow it calls (beside it, in
    ``.github/workflows``); ValueError saying why either cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(exc.strerror or str(exc)) from None
    docs = [_doc(text)]
    for name in _called(docs[0]):
        called = path.parent / name
        try:
            docs.append(_doc(called.read_text(encoding="utf-8")))
        except OSError as exc:
            raise ValueError(f"the workflow it calls, {called}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise ValueError(f"the workflow it calls, {called}: {exc}") from None
    return _workflow_jobs(docs)


def _lane(job: Mapping[str, Any]) -> str:
    return str(job["stage"]) + (f".{job['variant']}" if job.get("variant") else "")


def misfits(plan: Mapping[str, Any], lanes: Mapping[str, tuple[list[str], str]],
            groups: Mapping[str, tuple[list[str], bool]] | None = None) -> list[str]:
    """Why ``plan`` cannot run in a workflow with these stage jobs (empty: it can)."""
    jobs = [j for j in plan.get("jobs", []) if isinstance(j, Mapping)]
    out: list[str] = []
    # a lane that shares a fail-fast: false job because it runs one job must still run one
    one_each = {lane for members, no_fail_fast in (groups or {}).values() if no_fail_fast
                for lane in members}
    counts = Counter(_lane(j) for j in jobs)
    for lane in sorted({_lane(j) for j in jobs if _lane(j) in one_each
                        and (j.get("ci") or {}).get("fail_fast") is not False
                        and counts[_lane(j)] > 1}):
        out.append(f"stage {lane} has {counts[lane]} jobs but shares a job written for stages "
                   f"that run one job each; {REGENERATE}")
    for lane in sorted({_lane(j) for j in jobs} - set(lanes)):
        out.append(f"stage {lane} has jobs but no job in this workflow; {REGENERATE}")
    changed = sorted({_lane(j) for j in jobs if _lane(j) in lanes and static_fingerprint(
        j.get("ci", {}), j.get("env", {})) != lanes[_lane(j)][1]})
    out += [f"the CI settings of stage {lane} (container, setup, secrets, env, python, uv, "
            f"checkouts, fail_fast, max_parallel) changed since this workflow was generated; "
            f"{REGENERATE}" for lane in changed]
    moved = sorted({_lane(j) for j in jobs
                    if _lane(j) in lanes and list(j.get("runs_on", [])) != lanes[_lane(j)][0]})
    out += [f"the runs_on of stage {lane} changed since this workflow was generated (its "
            f"runners are written in this file, never taken from a plan); {REGENERATE}"
            for lane in moved]
    for lane, n in sorted(Counter(_lane(j) for j in jobs).items()):
        if n > MAX_MATRIX:
            out.append(f"stage {lane} has {n} jobs; a GitHub matrix holds at most "
                       f"{MAX_MATRIX} (lower max_shards)")
    return out
