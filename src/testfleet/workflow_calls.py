"""GitHub workflow files as data, and the jobs of a same-repository reusable workflow with
its caller's ``with:`` values in place.

Two features read a job through the workflow it calls (``uses: ./.github/workflows/x.yml``):
adoption, to find which job runs a stage, and ``check``, to find which runner a fork's pull
request reaches. Both must read a call the same way, so the reading lives here, below both
(it imports no feature). Nothing is executed and nothing is matched with regular
expressions but the ``${{ inputs.x }}`` references themselves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}", re.DOTALL)
INPUT_REF = re.compile(r"^(?:fromJSON\(\s*)?inputs\.([A-Za-z0-9_-]+)\s*\)?$")
MAX_WORKFLOW_BYTES = 2 << 20
#: Reusable workflows are followed this many levels deep (GitHub allows a caller and three
#: nested levels).
MAX_CALL_DEPTH = 3


class WorkflowUnreadable(Exception):
    """A workflow file that cannot be used: unreadable, too large, not UTF-8 or not YAML.
    ``line``/``col`` (1-based) locate a YAML error, 0 when there is none."""

    def __init__(self, message: str, line: int = 0, col: int = 0) -> None:
        super().__init__(message)
        self.line = line
        self.col = col


def workflow_text(path: Path) -> str:
    """The file's text, read capped (a workflow named by a call can be anything)."""
    from testfleet.fileio import read_capped

    try:
        return read_capped(path, MAX_WORKFLOW_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkflowUnreadable(f"cannot read: {exc}") from None


def parse_workflow(text: str) -> Any:
    """The text parsed as YAML (any value; a workflow is a mapping); the error message is
    PyYAML's own."""
    import yaml  # only the features that read workflows load YAML

    try:
        # libyaml's loader when PyYAML has it (the same safe constructors, ~10x faster)
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise WorkflowUnreadable(str(exc), (mark.line + 1) if mark else 0,
                                 (mark.column + 1) if mark else 0) from None


def on_of(data: Mapping[Any, Any]) -> Any:
    # YAML 1.1 reads the bare key ``on`` as the boolean True
    return data.get("on", data.get(True))


def text_of(value: Any, seen: set[int] | None = None) -> str:
    """Every string inside a value, joined: the commands a job can run.

    A YAML alias is the same Python object wherever it is used, so each container is
    visited once: a workflow of nested aliases ("billion laughs") stays linear.
    """
    if isinstance(value, str):
        return value
    if not isinstance(value, (Mapping, list)):
        return ""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return ""
    seen.add(id(value))
    items = value.values() if isinstance(value, Mapping) else value
    return "\n".join(text_of(v, seen) for v in items)


def has_expr(value: Any) -> bool:
    return "${{" in text_of(value)


def map_tree(value: Any, leaf: Callable[[Any], Any],
             keep: Callable[[Any], bool] = lambda key: False) -> Any:
    """``value`` with ``leaf`` applied to every scalar of its lists and tables (a table's
    value under a key ``keep`` accepts stays as written). A list or table reached twice (a
    YAML alias) is mapped once and stays shared, so an alias loop ends."""
    memo: dict[int, Any] = {}

    def walk(node: Any) -> Any:
        if not isinstance(node, (Mapping, list)):
            return leaf(node)
        if id(node) in memo:
            return memo[id(node)]
        out: Any = {} if isinstance(node, Mapping) else []
        memo[id(node)] = out
        if isinstance(node, Mapping):
            out.update({k: v if keep(k) else walk(v) for k, v in node.items()})
        else:
            out.extend(walk(v) for v in node)
        return out

    return walk(value)


def substitute_inputs(value: Any, inputs: Mapping[str, Any]) -> Any:
    """``${{ inputs.x }}`` / ``${{ fromJSON(inputs.x) }}`` replaced by the caller's value.

    Containers shared through YAML aliases are substituted once and stay shared."""

    def leaf(text: Any) -> Any:
        if not isinstance(text, str):
            return text
        whole = EXPR.fullmatch(text.strip())
        if whole:
            m = INPUT_REF.match(whole.group(1))
            if m and m.group(1) in inputs:
                got = inputs[m.group(1)]
                if whole.group(1).startswith("fromJSON") and isinstance(got, str):
                    try:
                        return json.loads(got)
                    except ValueError:
                        return got
                return got

        def one(match: re.Match[str]) -> str:
            ref = INPUT_REF.match(match.group(1))
            if ref and ref.group(1) in inputs and isinstance(inputs[ref.group(1)], (str, int, float)):
                return str(inputs[ref.group(1)])
            return match.group(0)

        return EXPR.sub(one, text)

    return map_tree(value, leaf)


def local_workflow(repo: Path, uses: str) -> Path | None:
    """The file a ``uses: ./...`` call names, when it is a file inside ``repo`` (None for a
    workflow of another repository, a missing file, or a path that leaves the repository)."""
    if not uses.startswith("./"):
        return None
    path = (repo / uses[2:]).resolve()
    if not path.is_file() or repo.resolve() not in path.parents:
        return None
    return path


def call_inputs(data: Mapping[Any, Any], with_: Mapping[str, Any]) -> tuple[dict[str, Any],
                                                                              dict[str, Any]]:
    """(inputs, computed) of one call of the reusable workflow ``data``: its declared
    defaults overridden by the caller's ``with:`` values; ``computed`` holds the ``with:``
    values the caller computes at run time over a literal default (``inputs`` keeps that
    default for them: what a run gets when the computation has nothing to say)."""
    on = on_of(data)
    declared = on.get("workflow_call") if isinstance(on, Mapping) else None
    spec = declared.get("inputs") if isinstance(declared, Mapping) else None
    inputs: dict[str, Any] = {}
    for name, decl in (spec.items() if isinstance(spec, Mapping) else []):
        if isinstance(decl, Mapping) and "default" in decl:
            inputs[str(name)] = decl["default"]
    defaults = dict(inputs)
    computed: dict[str, Any] = {}
    for k, v in with_.items():
        if has_expr(v) and k in defaults and not has_expr(defaults[k]):
            computed[str(k)] = v
        else:
            inputs[str(k)] = v
    return inputs, computed


def jobs_with_inputs(data: Mapping[Any, Any], inputs: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(job id, job) of the reusable workflow ``data``, each with ``inputs`` substituted."""
    jobs = data.get("jobs")
    return [(str(job_id), substitute_inputs(dict(job), inputs))
            for job_id, job in (jobs.items() if isinstance(jobs, Mapping) else [])
            if isinstance(job, Mapping)]
