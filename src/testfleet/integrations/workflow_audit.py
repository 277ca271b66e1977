"""Find GitHub workflows in which a fork's pull request chooses its runner.

Any workflow of the repository, hand-written ones included, is read as data (never run)
for three patterns that hand a fork what only the base branch should decide:

* ``fork-self-hosted``: a job on self-hosted (or any non-GitHub-hosted) runners in a
  workflow triggered by ``pull_request``, with no ``if:`` that keeps pull requests out.
  GitHub reads such a workflow from the pull request's merge commit, so a fork runs
  whatever it likes there, on those machines, unless a runner group limits them to
  workflows at the default branch. A job that calls a reusable workflow of the repository
  (``uses: ./.github/workflows/x.yml``) is read through it, as adoption reads it
  (:mod:`testfleet.workflow_calls`): the called jobs' ``runs-on`` with the caller's
  ``with:`` values in place (``runs_on: '["h200"]'`` into ``${{ fromJSON(inputs.runs_on) }}``),
  nested calls followed; a value the caller computes at run time is not guessed;
* ``fork-chosen-runner``: a job whose ``runs-on`` comes from another job's outputs (directly
  or through a matrix built from them) when that job ran code from the pull request: in a
  ``pull_request`` workflow any ``run:`` step or local action (``uses: ./...``) after a
  checkout; in a ``pull_request_target`` workflow, one that checked the pull request out
  and then ran a local action or a script from that checkout;
* ``fork-executed-checkout``: in a ``pull_request_target`` workflow, a local action from the
  pull request's checkout, or a step run inside it (the "pwn request").

Each finding names the file, the job and the line of its ``runs-on`` (or of the step, or
of the ``uses:`` of a call). :func:`audit_workflow` reads nothing but the text it is given
and, for calls, the repository's workflows it names; :func:`audit_tree` finds the files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from testfleet.findings import Finding
from testfleet.workflow_calls import (
    MAX_CALL_DEPTH,
    WorkflowUnreadable,
    call_inputs,
    jobs_with_inputs,
    local_workflow,
    parse_workflow,
    workflow_text,
)

_HOSTED = re.compile(r"^(ubuntu|windows|macos)-(latest|\d[\w.]*)(-[\w.]+)*$")
_NEEDS_OUTPUT = re.compile(r"needs\.([A-Za-z_][\w-]*)\.outputs")
_PR_REF = re.compile(r"github\.event\.pull_request\.head|refs/pull/|github\.head_ref|"
                     r"merge_commit_sha")
#: An ``if:`` that keeps a job away from pull requests (or from forks' ones).
_EXCLUDES_PR = re.compile(
    r"github\.event_name\s*!=\s*'pull_request'|"
    r"github\.event\.pull_request\.head\.repo\.full_name\s*==\s*github\.repository|"
    r"github\.event\.pull_request\.head\.repo\.fork\s*==\s*false")
MAX_WORKFLOW_BYTES = 4 << 20


def _node_map(node: yaml.Node) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(k.value): (k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)}


def _plain(node: yaml.Node | None) -> Any:
    if node is None:
        return None
    if isinstance(node, yaml.ScalarNode):
        return node.value
    if isinstance(node, yaml.SequenceNode):
        return [_plain(n) for n in node.value]
    if isinstance(node, yaml.MappingNode):
        return {str(_plain(k)): _plain(v) for k, v in node.value}
    return None  # pragma: no cover - the three node kinds are all there are


def _triggers(root: dict[str, tuple[yaml.Node, yaml.Node]]) -> set[str]:
    entry = root.get("on") or root.get("true")  # YAML 1.1 reads an unquoted `on` as true
    value = _plain(entry[1]) if entry else None
    if isinstance(value, str):
        return {value}
    if isinstance(value, list):
        return {str(v) for v in value}
    if isinstance(value, dict):
        return set(value)
    return set()


def _labels(runs_on: Any) -> list[str] | None:
    """The literal labels of ``runs-on`` (None when an expression decides them)."""
    if isinstance(runs_on, str):
        return None if "${{" in runs_on else [runs_on]
    if isinstance(runs_on, list):
        return None if any("${{" in str(x) for x in runs_on) else [str(x) for x in runs_on]
    if isinstance(runs_on, dict):
        labels = runs_on.get("labels") or []
        group = runs_on.get("group")
        out = [str(x) for x in (labels if isinstance(labels, list) else [labels])]
        return [*out, f"group:{group}"] if group else out
    return []


def _self_hosted(labels: list[str]) -> bool:
    return any(not _HOSTED.match(label) for label in labels)


def _runner_sources(job: dict[str, Any]) -> set[str]:
    """The jobs whose outputs decide this job's runner (directly, or via its matrix)."""
    text = str(job.get("runs-on", ""))
    sources = set(_NEEDS_OUTPUT.findall(text))
    if "matrix." in text:
        sources |= set(_NEEDS_OUTPUT.findall(str((job.get("strategy") or {}).get("matrix", ""))))
    return sources


def _runs_pr_code(job: dict[str, Any], event: str) -> str | None:
    """Why ``job`` executes code from the pull request, or None."""
    steps = [s for s in job.get("steps") or [] if isinstance(s, dict)]
    pr_paths: list[str] = []
    checked_out = False
    for step in steps:
        uses = str(step.get("uses", ""))
        with_ = step.get("with") or {}
        if uses.startswith("actions/checkout"):
            if event == "pull_request":
                checked_out = True
            elif _PR_REF.search(str(with_.get("ref", ""))) or _PR_REF.search(
                    str(with_.get("repository", ""))):
                pr_paths.append(str(with_.get("path", "") or ".").strip("/") or ".")
            continue
        if event == "pull_request" and checked_out:
            if uses.startswith("./"):
                return f"the local action {uses} from the pull request's checkout"
            if "run" in step:
                return "run: steps in the pull request's checkout"
        for path in pr_paths:
            where = str(step.get("working-directory", ".")).strip("/") or "."
            if uses.startswith("./") and (path == "." or uses[2:].startswith(path + "/")):
                return f"the local action {uses} from the pull request's checkout"
            if "run" in step and (path == "." or where == path or where.startswith(path + "/")):
                return f"a run: step in the pull request's checkout ({path})"
    return None


def _called(path: Path, cache: dict[Path, Any]) -> Any:
    """A called workflow as data, read once per audit (None when it cannot be read: the
    file's own audit says so when it is in .github/workflows)."""
    if path not in cache:
        try:
            cache[path] = parse_workflow(workflow_text(path))
        except WorkflowUnreadable:
            cache[path] = None
    return cache[path]


def _called_runners(repo: Path, uses: str, with_: Mapping[str, Any], cache: dict[Path, Any],
                    depth: int = 0) -> list[tuple[str, str, list[str]]]:
    """(workflow, job, labels) of each job a call reaches on a pull request that runs on
    non-GitHub-hosted runners: the called jobs with the caller's literal ``with:`` values
    in place (one it computes at run time stays unknown, so no label is guessed), nested
    calls followed ``MAX_CALL_DEPTH`` levels, a job whose ``if:`` keeps pull requests out
    left out."""
    path = local_workflow(repo, uses)
    data = _called(path, cache) if path is not None else None
    if not isinstance(data, dict):
        return []
    inputs, computed = call_inputs(data, with_)
    known = {k: v for k, v in inputs.items() if k not in computed}
    found: list[tuple[str, str, list[str]]] = []
    for job_id, job in jobs_with_inputs(data, known):
        if _EXCLUDES_PR.search(str(job.get("if", ""))):
            continue
        inner = job.get("uses")
        if isinstance(inner, str):
            inner_with = job.get("with")
            if depth + 1 < MAX_CALL_DEPTH:
                found += _called_runners(repo, inner, inner_with if isinstance(
                    inner_with, Mapping) else {}, cache, depth + 1)
            continue
        labels = _labels(job.get("runs-on"))
        if labels and _self_hosted(labels):
            found.append((uses[2:], job_id, labels))
    return found


def audit_workflow(text: str, file: str, repo: Path | None = None,
                   cache: dict[Path, Any] | None = None) -> list[Finding]:
    """The findings for one workflow's text (see the module docstring). ``repo``: the
    repository whose reusable workflows its jobs call (None: calls are not followed);
    ``cache`` keeps each called workflow read once over many callers."""
    try:
        tree = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        return [Finding(file, 0, 0, "warning", "workflow-unreadable",
                        f"not a readable workflow: {str(exc).splitlines()[0][:200]}")]
    root = _node_map(tree) if tree is not None else {}
    events = _triggers(root) & {"pull_request", "pull_request_target"}
    jobs_entry = root.get("jobs")
    if not events or jobs_entry is None:
        return []
    jobs = _node_map(jobs_entry[1])
    plain = {name: _plain(node) for name, (_, node) in jobs.items()}
    findings: list[Finding] = []
    for name, (key, node) in jobs.items():
        job = plain[name] if isinstance(plain[name], dict) else {}
        fields = _node_map(node)
        line = (fields["runs-on"][0] if "runs-on" in fields else key).start_mark.line + 1
        labels = _labels(job.get("runs-on"))
        guarded = bool(_EXCLUDES_PR.search(str(job.get("if", ""))))
        if "pull_request" in events and labels and _self_hosted(labels) and not guarded:
            findings.append(Finding(
                file, line, 0, "warning", "fork-self-hosted",
                f"job {name} runs on {', '.join(labels)} in a workflow triggered by pull_request: "
                "a fork's pull request runs it from its own copy of this file; dispatch such jobs "
                "from a pull_request_target workflow (testfleet init --github writes one), or "
                "limit the runner group to workflows at the default branch"))
        uses = job.get("uses")
        if "pull_request" in events and repo is not None and isinstance(uses, str) \
                and not guarded:
            with_ = job.get("with")
            at = fields["uses"][0].start_mark.line + 1
            reached = _called_runners(repo, uses, with_ if isinstance(with_, Mapping) else {},
                                      {} if cache is None else cache)
            # a workflow that calls itself reaches the same job at every level: said once
            for called, inner, inner_labels in dict.fromkeys(
                    (c, j, tuple(ls)) for c, j, ls in reached):
                findings.append(Finding(
                    file, at, 0, "warning", "fork-self-hosted",
                    f"job {name} calls {called}, whose job {inner} runs on "
                    f"{', '.join(inner_labels)}, in a workflow triggered by pull_request: a "
                    "fork's pull request runs it from its own copy of these files; dispatch "
                    "such jobs from a pull_request_target workflow (testfleet init --github "
                    "writes one), or limit the runner group to workflows at the default branch"))
        for source in sorted(_runner_sources(job)):
            upstream = plain.get(source)
            for event in sorted(events):
                why = _runs_pr_code(upstream, event) if isinstance(upstream, dict) else None
                if why:
                    findings.append(Finding(
                        file, line, 0, "warning", "fork-chosen-runner",
                        f"the runner of job {name} comes from job {source}'s outputs, and job "
                        f"{source} ran {why} on {event}: a fork can choose this job's runner; "
                        "write runs-on from trusted data (testfleet writes it from the config)"))
                    break
        if "pull_request_target" in events:
            why = _runs_pr_code(job, "pull_request_target")
            if why:
                findings.append(Finding(
                    file, key.start_mark.line + 1, 0, "warning", "fork-executed-checkout",
                    f"job {name} runs {why} in a pull_request_target workflow, which has the "
                    "base repository's token and secrets; check the pull request out as data "
                    "only (into a path of its own) and run nothing from it"))
    return findings


def workflows_dir(start: Path) -> Path | None:
    """``.github/workflows`` of the repository ``start`` is in (walking up to the top of the
    git work tree, or to the filesystem root without one)."""
    here = start.resolve()
    for parent in (here, *here.parents):
        candidate = parent / ".github" / "workflows"
        if candidate.is_dir():
            return candidate
        if (parent / ".git").exists():
            return None
    return None


def audit_tree(root: Path, only: frozenset[str] | None = None) -> list[Finding]:
    """Every workflow of the repository ``root`` is in (``only``: of these root-relative
    paths); paths relative to ``root``."""
    directory = workflows_dir(root)
    if directory is None:
        return []
    repo = directory.parent.parent
    cache: dict[Path, Any] = {}
    findings: list[Finding] = []
    for path in sorted([*directory.glob("*.yml"), *directory.glob("*.yaml")]):
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        if only is not None and rel not in only:
            continue
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_WORKFLOW_BYTES:
                continue
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            findings.append(Finding(rel, 0, 0, "warning", "workflow-unreadable",
                                    f"cannot read it: {exc}"))
            continue
        findings += audit_workflow(text, rel, repo, cache)
    return findings
