"""How a path without a plan file plans what it runs: ``testfleet run --stage/--file``
and the pytest plugin's ``--testfleet-stage`` both come here.

Same registry, same estimates, same quarantine as ``testfleet plan`` (one function makes
both: :func:`testfleet.app.plan.plan_from_history`); and the first plan of
a CI run on a machine is frozen (:mod:`testfleet.planning.frozen`), so later shards of the
run execute it instead of re-planning from the history earlier shards wrote. A frozen plan
lies where tests can write, so a later shard executes it only when it holds nothing the
history-free plan it makes for the key does not (:mod:`testfleet.runner.planguard`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testfleet.config import Project
from testfleet.planning.model import Plan


@dataclass(frozen=True)
class InProcessPlan:
    """The plan a stage path executes, and how it came to be."""

    plan: Plan
    #: the frozen plan file this run executes from (None: it could not be frozen)
    frozen: Path | None
    #: True when an earlier path of this run on this machine made it
    reused: bool
    #: history, quarantine and freezing notes for the user (untrusted text: print escaped)
    notes: list[str] = field(default_factory=list)


def plan_in_process(project: Project, registry: Any, request: Any, *, database: str | None,
                    stage: str | None, history_problem: str | None = None,
                    environ: Mapping[str, str] | None = None) -> InProcessPlan:
    """This run's plan for ``request``: the frozen one when this machine has it, else a plan
    made now from the history (estimates and quarantine of ``stage``), then frozen."""
    from testfleet.app.plan import plan_from_history
    from testfleet.cachedir import cache_dir_problem
    from testfleet.planning import make_plan
    from testfleet.planning.frozen import freeze, frozen_key, frozen_path, load_frozen
    from testfleet.runner.jobs import ci_run_id
    from testfleet.runner.planguard import require_frozen_matches
    from testfleet.vcs import current_commit

    env = os.environ if environ is None else environ
    unusable = cache_dir_problem(project.root, project.config.cache_dir)
    if unusable is not None:  # nothing is read or written through a symlinked cache_dir
        plan, notes = plan_from_history(project, registry, request, database, stage=stage,
                                     history_problem=history_problem)
        return InProcessPlan(plan, None, False, [
            *notes, f"{unusable}: this run's plan is not frozen; a later shard on this "
                    "machine may plan again; give every shard --plan-digest to make it "
                    "refuse instead"])
    literal = make_plan(project, registry, request)  # no history: the key's basis
    key = frozen_key(literal.digest, current_commit(project.root, dict(env)), ci_run_id(env))
    path = frozen_path(project.root / project.config.cache_dir, key)
    existing = load_frozen(path)
    if existing is not None:
        require_frozen_matches(existing, literal, _shown(project, path))
        return InProcessPlan(existing, path, True, [
            f"executing this run's frozen plan {existing.digest[:19]}… ({_shown(project, path)}), "
            "made by its first shard on this machine: shard membership is not re-planned from "
            "history recorded since"])
    plan, out = plan_from_history(project, registry, request, database, stage=stage,
                                     history_problem=history_problem)
    try:
        frozen = freeze(path, plan)
    except OSError as exc:
        out.append(f"cannot freeze this run's plan at {_shown(project, path)} "
                   f"({exc.strerror or exc}): a later shard on this machine may plan again from "
                   "newer history; give every shard --plan-digest to make it refuse instead")
        return InProcessPlan(plan, None, False, out)
    if frozen.digest != plan.digest:  # another shard froze its plan first
        require_frozen_matches(frozen, literal, _shown(project, path))
    return InProcessPlan(frozen, path, frozen.digest != plan.digest, out)


def _shown(project: Project, path: Path) -> str:
    try:
        return path.relative_to(project.root).as_posix()
    except ValueError:
        return str(path)
