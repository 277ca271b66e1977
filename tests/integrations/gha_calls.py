"""A generated workflow with its calls of the stages workflow expanded, as GitHub runs them.

``testfleet.yml`` and ``testfleet-trusted.yml`` call ``testfleet-stages.yml`` twice: job
``stages`` with the plan's matrices and job ``rescue`` with the rescue wave's. GitHub runs
the called workflow's jobs inside the caller's run, each gated by the caller's ``if:`` and
``needs:``, with the caller's ``with:`` values as ``inputs`` and its ``secrets:`` as
``secrets``. Tests (and the CI simulations) read the stage jobs from the expanded form:
each called job under its own id (``<job>`` for ``stages``, ``<job>-rescue`` for
``rescue``), its expressions with every ``inputs.x`` and ``secrets.x`` replaced by the
caller's expression for it, its ``needs:`` the caller's and its own (renamed), and every
other job's need on a caller replaced by the jobs it called.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

from testfleet.integrations.github_options import STAGES_WORKFLOW_PATH

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}", re.DOTALL)
SUFFIX = {"stages": "", "rescue": "-rescue"}
USES = f"./{STAGES_WORKFLOW_PATH}"


def load(text: str) -> dict[str, Any]:
    data = yaml.safe_load(text)
    if True in data:  # YAML 1.1 reads the key `on` as a boolean
        data["on"] = data.pop(True)
    return data


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    text = str(value)
    whole = EXPR.fullmatch(text.strip())
    if whole:  # a path stays as it is; any other expression keeps its precedence
        inner = whole.group(1)
        return inner if re.fullmatch(r"[A-Za-z_][\w.-]*", inner) else f"({inner})"
    return "'" + text.replace("'", "''") + "'"


def _rewrite(node: Any, names: dict[str, dict[str, str]]) -> Any:
    """``node`` with ``inputs.x``/``secrets.x`` inside its expressions replaced."""
    if isinstance(node, dict):
        return {k: _rewrite(v, names) for k, v in node.items()}
    if isinstance(node, list):
        return [_rewrite(v, names) for v in node]
    if not isinstance(node, str) or "${{" not in node:
        return node

    def one(match: re.Match[str]) -> str:
        inner = match.group(1)
        for ctx, table in names.items():
            inner = re.sub(rf"\b{ctx}\.([A-Za-z0-9_-]+)\b",
                           lambda m, t=table: t.get(m.group(1), "''"), inner)
        return "${{ " + inner + " }}"

    return EXPR.sub(one, node)


def expand(data: dict[str, Any], called: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a parsed caller) with its calls of ``called`` (the parsed stages workflow)
    expanded in place of the calling jobs."""
    data = copy.deepcopy(data)
    spec = called["on"]["workflow_call"]
    defaults = {k: _literal(v.get("default", "")) for k, v in spec.get("inputs", {}).items()}
    jobs: dict[str, Any] = {}
    renamed: dict[str, list[str]] = {}
    for job_id, job in data["jobs"].items():
        if job.get("uses") != USES:
            jobs[job_id] = job
            continue
        suffix = SUFFIX[job_id]
        inputs = {**defaults, **{k: _literal(v) for k, v in job.get("with", {}).items()}}
        secrets = {k: _literal(v) for k, v in (job.get("secrets") or {}).items()}
        gate = EXPR.fullmatch(job["if"].strip()).group(1) if "if" in job else "true"
        renamed[job_id] = []
        for inner_id, inner in called["jobs"].items():
            inner = _rewrite(copy.deepcopy(inner), {"inputs": inputs, "secrets": secrets})
            cond = EXPR.fullmatch(inner["if"].strip()).group(1) if "if" in inner else "success()"
            inner["if"] = f"${{{{ ({gate}) && ({cond}) }}}}"
            inner["needs"] = [*job.get("needs", []), *(n + suffix for n in inner.get("needs", []))]
            jobs[inner_id + suffix] = inner
            renamed[job_id].append(inner_id + suffix)
    for job in jobs.values():
        needs = job.get("needs")
        if isinstance(needs, list):
            job["needs"] = [m for n in needs for m in renamed.get(n, [n])]
    data["jobs"] = jobs
    return data


def expanded_file(workflow: Path) -> dict[str, Any]:
    """The generated workflow at ``workflow`` with the stages workflow beside it expanded."""
    data = load(workflow.read_text())
    stages = workflow.parent / Path(STAGES_WORKFLOW_PATH).name
    return expand(data, load(stages.read_text())) if stages.exists() else data


def expanded_text(text: str, stages: str | None) -> dict[str, Any]:
    """A rendered workflow (and the rendered stages workflow, None when there is none)."""
    data = load(text)
    return expand(data, load(stages)) if stages is not None else data


def rendered(config: Any, opts: Any = None, *, trusted: bool = False) -> dict[str, Any]:
    """``render_workflow`` (or the trusted workflow) for ``config``, expanded."""
    from testfleet.integrations.github_stages import render_stages_workflow
    from testfleet.integrations.github_trusted import render_trusted_workflow
    from testfleet.integrations.github_workflow import render_workflow

    text = render_trusted_workflow(config, opts) if trusted else render_workflow(config, opts)
    assert text is not None
    return expanded_text(text, render_stages_workflow(config, opts))


__all__ = ["expand", "expanded_file", "expanded_text", "load", "rendered"]
