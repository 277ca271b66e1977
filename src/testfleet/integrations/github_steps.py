"""The steps of the generated GitHub workflows, as data for :mod:`.yaml_doc`.

Each function returns one step (or a list of them) as a mapping; comments travel as
:class:`~testfleet.integrations.yaml_doc.Note`. Every action is pinned to a commit (its
version in an end-of-line comment, which Dependabot and Renovate read), every checkout
leaves no credential behind, and no ``run:`` script holds a ``${{ }}`` expression: what a
script needs reaches it through ``env:``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from testfleet.integrations.yaml_doc import Note
from testfleet.integrations.yaml_text import PINNED_ACTIONS

#: ``uses:`` of the vendored composite action (the documented local-action form that
#: actionlint and every runner version understand; zizmor's newer ``$/`` self-repository
#: form is not used on purpose, hence its ignore comment).
LOCAL_ACTION = "./.github/actions/testfleet"
LOCAL_ACTION_NOTE = ("zizmor: ignore[self-repository] the ./ form every runner and actionlint "
                     "read")


def pinned(action: str) -> Note:
    """``action@<sha>`` with its release version as the end-of-line comment."""
    sha, version = PINNED_ACTIONS[action]
    return Note(f"{action}@{sha}", eol=version)


def uses(action: str, with_: Mapping[str, Any] | None = None, *, name: str | None = None,
         cond: str | None = None, before: tuple[str, ...] = ()) -> Note:
    step: dict[str, Any] = {}
    if name:
        step["name"] = name
    if cond:
        step["if"] = cond
    step["uses"] = pinned(action)
    if with_:
        step["with"] = dict(with_)
    return Note(step, before=before)


def checkout(*, ref: str | None = None, path: str | None = None, fetch_depth: int | None = None,
             repository: str | None = None, token: Any = None, name: str | None = None,
             before: tuple[str, ...] = ()) -> Note:
    with_: dict[str, Any] = {}
    if repository:
        with_["repository"] = repository
    if ref:
        with_["ref"] = ref
    if path:
        with_["path"] = path
    if token:
        with_["token"] = token
    with_["persist-credentials"] = False
    if fetch_depth is not None:
        with_["fetch-depth"] = fetch_depth
    return uses("actions/checkout", with_, name=name, before=before)


def setup_python(version: str) -> Note:
    return uses("actions/setup-python", {"python-version": version})


def setup_uv() -> Note:
    # no cache, so no pull request writes one
    return uses("astral-sh/setup-uv", {"enable-cache": False})


def action(name: str, command: str, *, install: str | None, config: str | None,
           step_id: str | None = None, cond: str | None = None,
           env: Mapping[str, Any] | None = None, inputs: Mapping[str, Any] | None = None,
           skip_install: bool = False, before: tuple[str, ...] = ()) -> Note:
    """A step that runs testfleet through the vendored composite action (one
    implementation for the generated workflows and for projects' own)."""
    step: dict[str, Any] = {"name": name}
    if step_id:
        step["id"] = step_id
    if cond:
        step["if"] = cond
    step["uses"] = Note(LOCAL_ACTION, eol=LOCAL_ACTION_NOTE)
    if env:
        step["env"] = dict(env)
    with_: dict[str, Any] = {"command": command}
    if skip_install:
        with_["install"] = "none"
    elif install:
        # one line stays one line; a script keeps its final newline
        one = "\n" not in install.strip()
        with_["install"] = install.strip() if one else install.rstrip("\n") + "\n"
    if config:
        with_["config"] = config
    with_.update(inputs or {})
    step["with"] = with_
    return Note(step, before=before)


def args(*values: str) -> str:
    """The action's ``args`` input: one argument per line."""
    return "".join(f"{v}\n" for v in values)


def setup_files(lane: str, commands: Sequence[str], env: Mapping[str, Any]) -> list[Any]:
    """The ``setup`` items as steps, each item its own ``bash <file>`` process
    (:mod:`testfleet.integrations.setup_scripts`), so an ``exit 0`` in one (a wait loop
    that is done) ends only that item. Items share a step, one line each, until one
    writes ``$GITHUB_ENV`` or ``$GITHUB_PATH``: what it writes reaches only later steps,
    so the next item starts a new one, as when every item was a step of its own."""
    from testfleet.integrations.setup_scripts import script_path

    runs: list[list[str]] = [[]]
    for i, command in enumerate(commands, 1):
        runs[-1].append(f"bash {script_path(lane, i)}")
        if i < len(commands) and ("GITHUB_ENV" in command or "GITHUB_PATH" in command):
            runs.append([])
    out: list[Any] = []
    for lines in runs:
        step: dict[str, Any] = {"run": lines[0] if len(lines) == 1 else "\n".join(lines) + "\n"}
        if env:
            step["env"] = dict(env)
        out.append(step)
    return out


def job_action(env: Mapping[str, Any]) -> Note:
    """The stage job's one step that runs its plan job and keeps what it ran
    (:mod:`testfleet.integrations.github_job_action`), with the stage's secrets."""
    step: dict[str, Any] = {"uses": Note("./.github/actions/testfleet-job", eol=LOCAL_ACTION_NOTE)}
    if env:
        step["env"] = dict(env)
    # a rescue job's matrix entry carries its rescue file's digest; a stage job's has none
    step["with"] = {"job": "${{ matrix.id }}", "plan-digest": "${{ inputs.digest }}",
                    "rescue": "${{ matrix.rescue }}"}
    return Note(step)


def upload(name: str, path: str, *, cond: str | None, if_no_files: str,
           retention_days: int, overwrite: bool = False,
           before: tuple[str, ...] = ()) -> Note:
    with_: dict[str, Any] = {"name": name, "path": path, "if-no-files-found": if_no_files}
    if overwrite:
        with_["overwrite"] = True
    with_["retention-days"] = retention_days
    return uses("actions/upload-artifact", with_, cond=cond, before=before)
