"""Whose configuration decides a fork's trust: the base branch's, never the fork's.

A pull request from a fork is planned in a checkout of the fork's code, so the
configuration on disk is the fork's. Left alone, a fork could set
``trusted_only = false``, add its own ``authorize_labels`` or point a stage's
``runs_on`` at self-hosted runners, and be given them. The settings that decide
what a fork may run, and where, are therefore read from the configuration file
as it is at the pull request's base commit (``git show <sha>:<path>``: no
checkout of the fork's code is needed) and laid over the fork's configuration;
everything else (stages, labels, selection) stays the fork's, since that is what
the fork is asking to test.

When the base configuration cannot be read (no commit in the clone, no git, the
file absent or invalid at the base) nothing is known about what is trusted, so
every stage is denied to the fork (fail closed) and the plan says why.

:func:`read_base` does the I/O; :func:`apply` is pure.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testfleet.config import Config, Project, StageConfig, config_from_text
from testfleet.errors import ConfigError

if TYPE_CHECKING:
    from testfleet.documents.plan import TrustDoc

#: Per-stage settings that decide where a fork's code runs and what it can reach.
#: Keys that this version's StageConfig does not have are skipped.
TRUST_STAGE_KEYS = ("trusted_only", "runs_on", "container", "secrets", "setup",
                    # the stage's trigger gates (a fork must not drop its label gate)
                    "cadences", "requires_labels", "events", "run_on_changes", "registrations",
                    "files",
                    # stage variants (#12): each names its own runners, image and secrets
                    "variants")
#: Settings whose base value decides a fork's authorization (see ``authorizing_labels``).
TRUST_POLICY_KEYS = ("authorize_labels", "label_prefix", "scope_labels", "labels")
#: Policy gates every PR passes before stages run (docs/stages.md), taken from the base too.
TRUST_GATE_KEYS = ("required_label", "required_label_scope", "drafts")

_SHA = re.compile(r"[0-9a-fA-F]{7,64}")
_MAX_CONFIG_BYTES = 16 << 20


@dataclass(frozen=True)
class Trust:
    """Where a fork pull request's trust-relevant settings came from.

    ``base`` is the base commit's validated configuration, or None when it could not
    be read (``problem`` says why; then every stage is denied to the fork).
    """

    commit: str | None
    path: str | None
    base: Config | None = field(default=None, compare=False)
    problem: str | None = None

    def to_json(self) -> TrustDoc:
        return {
            "source": "base" if self.base is not None else "unavailable",
            "commit": self.commit,
            "config": self.path,
            "settings": sorted([*stage_keys(), *TRUST_POLICY_KEYS, *TRUST_GATE_KEYS]),
            "problem": self.problem,
        }


def stage_keys() -> tuple[str, ...]:
    return tuple(k for k in TRUST_STAGE_KEYS if k in StageConfig.model_fields)


def describe(trust: Mapping[str, Any]) -> str:
    """One line for the table and Markdown outputs, from the plan's ``trust`` field."""
    settings = ", ".join(trust.get("settings", []))
    if trust.get("source") == "base":
        commit = str(trust.get("commit") or "")[:12]
        return (f"pull request: trust settings ({settings}) from the base commit "
                f"{commit}'s {trust.get('config')}, not from the fork")
    return (f"pull request: the base commit's configuration could not be read "
            f"({trust.get('problem')}); every stage is unauthorized (fail closed)")


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=60,
                          check=False, stdin=subprocess.DEVNULL)


def read_base(project: Project, commit: str | None, *, from_payload: bool = True) -> Trust:
    """Read and validate ``project``'s configuration file as it is at ``commit`` (from
    the event payload, which must be a commit id, or ``--trust-base``, any revision)."""
    if commit is None:
        return Trust(None, None, problem="the event payload has no pull_request.base.sha")
    if from_payload and not _SHA.fullmatch(commit):
        return Trust(None, None, problem=f"pull_request.base.sha {commit[:80]!r} is not a "
                                         "commit id")
    if commit.startswith("-") or ":" in commit or any(ord(c) < 33 or ord(c) == 127
                                                      for c in commit):
        return Trust(None, None, problem=f"{commit[:80]!r} is not a usable git revision")
    try:
        top = _git(project.root, "rev-parse", "--show-toplevel")
    except (OSError, subprocess.SubprocessError) as exc:
        return Trust(commit, None, problem=f"git is not usable: {exc}")
    if top.returncode != 0:
        return Trust(commit, None, problem="the project is not in a git work tree: "
                     + top.stderr.decode("utf-8", "replace").strip()[:200])
    toplevel = Path(top.stdout.decode("utf-8", "surrogateescape").strip()).resolve()
    found = _as_found(project)
    try:
        rel = found.relative_to(toplevel).as_posix()
    except ValueError:
        return Trust(commit, None, problem=f"the configuration {found} is "
                                           f"outside the git work tree {toplevel}")
    problem = _not_a_file_at_base(project.root, commit, rel)
    if problem is not None:
        return Trust(commit, rel, problem=problem)
    try:
        shown = _git(project.root, "show", f"{commit}:{rel}")
    except (OSError, subprocess.SubprocessError) as exc:
        return Trust(commit, rel, problem=f"git show failed: {exc}")
    if shown.returncode != 0:
        why = shown.stderr.decode("utf-8", "replace").strip().splitlines()
        return Trust(commit, rel, problem=f"git show {commit[:12]}:{rel}: "
                     + (why[0][:200] if why else f"exit {shown.returncode}")
                     + " (fetch the base commit, e.g. actions/checkout with fetch-depth: 2)")
    if len(shown.stdout) > _MAX_CONFIG_BYTES:
        return Trust(commit, rel, problem=f"{rel} at the base commit is larger than 16 MiB")
    try:
        text = shown.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Trust(commit, rel, problem=f"{rel} at the base commit is not UTF-8 ({exc.reason})")
    try:
        base = config_from_text(text, Path(rel).name)
    except ConfigError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "invalid"
        return Trust(commit, rel, problem=f"{rel} at the base commit is not a valid "
                                          f"configuration: {first[:300]}")
    return Trust(commit, rel, base=base)


def _as_found(project: Project) -> Path:
    """The configuration's path as it was found, its last component not resolved.

    ``Project.config_path`` is resolved: if the fork made ``testfleet.toml`` a symlink to
    a laxer file that also exists at the base commit, the resolved path names that file,
    and the base's copy of it would be read as "the base's configuration". The path where
    discovery found the file (``find_config`` from the project root, which is how it was
    found unless ``--config`` named another) is what the base is asked for instead.
    """
    from testfleet.configfile import find_config

    found = find_config(project.root)
    if found is not None and found.resolve() == project.config_path.resolve():
        return found
    return project.config_path


def _not_a_file_at_base(root: Path, commit: str, rel: str) -> str | None:
    """Why ``rel`` at ``commit`` is not a regular file, or None. ``git show`` would print
    a symlink's target path as if it were the file's content, and a link may point at
    any file the base has; the base's configuration is read only where it really is."""
    try:
        listed = _git(root, "ls-tree", "-z", commit, "--", rel)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"git ls-tree failed: {exc}"
    if listed.returncode != 0:
        return None  # git show below says why (commit not fetched, ...)
    entry = listed.stdout.split(b"\0", 1)[0].split(b" ", 2)
    if not listed.stdout:
        return None  # absent at the base: git show says so
    mode = entry[0].decode("ascii", "replace")
    if mode == "120000":
        return (f"{rel} is a symlink at the base commit; the base's configuration is read "
                "only at its real path, never through a link")
    if mode not in ("100644", "100755"):
        return f"{rel} at the base commit is not a regular file (git mode {mode})"
    return None


def apply(config: Config, trust: Trust) -> tuple[Config, dict[str, str]]:
    """The configuration to plan a fork's pull request with, and the stages denied to it.

    Each stage's trust keys come from the same stage at the base. A stage the base
    does not have has no trusted settings at all, so it is denied, as is every stage
    when the base could not be read. Returns (effective config, stage -> reason).
    """
    if trust.base is None:
        why = f"the base commit's configuration could not be read ({trust.problem})"
        return config, {name: why for name in config.stages}
    keys = stage_keys()
    stages: dict[str, StageConfig] = {}
    denied: dict[str, str] = {}
    for name, stage in config.stages.items():
        base_stage = trust.base.stages.get(name)
        if base_stage is None:
            denied[name] = (f"stage {name} is not in the base commit's configuration, so "
                            "nothing says where a fork may run it")
            stages[name] = stage
            continue
        stages[name] = stage.model_copy(update={k: getattr(base_stage, k) for k in keys})
    policy = config.policy.model_copy(
        update={k: getattr(trust.base.policy, k) for k in TRUST_GATE_KEYS})
    return config.model_copy(update={"stages": stages, "policy": policy}), denied
