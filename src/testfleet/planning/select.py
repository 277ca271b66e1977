"""Selection: the fate of every registration under one policy (pure).

Each registration either becomes a candidate for its stage's jobs or gets
exactly one skip reason, checked in a fixed order so the reason is the most
useful one to a reader: a request filter first (``not-requested``), then the
registration's own ``disabled``, then the stage's state (``stage-dormant``,
``unauthorized``), then the stage's trigger gates (``event-excluded``,
``cadence-excluded``, ``draft``, ``label-required``), then the side of the nightly split
the stage or the cadence runs (``per-commit-only``, ``nightly-only``), then labels
(``not-selected-by-labels``), and last PR pruning (``stage-unaffected``). An explicit
``--file`` request bypasses the trigger gates, as it does cadence and labels.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from testfleet.config import Config, StageConfig
from testfleet.config.triggers import side_excluded
from testfleet.errors import UsageError
from testfleet.planning.changes import Impact
from testfleet.planning.lanes import stage_backends
from testfleet.planning.model import REASONS, Skipped
from testfleet.planning.policy import Policy, authorization_hint, show, stage_gate
from testfleet.planning.request import PlanRequest
from testfleet.registry.model import Registration

if TYPE_CHECKING:
    from testfleet.documents.vocabulary import Reason, Status


@dataclass
class Selection:
    """Candidates per stage, skipped registrations, and per-stage status decisions."""

    chosen: dict[str, list[Registration]] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    status: dict[str, tuple[Status, str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def prunable(config: Config, stage: StageConfig) -> bool:
    """A stage is pruned by changed files if it says so, else if its backend is a GPU one."""
    if stage.prune is not None:
        return stage.prune
    spec = config.backend_specs().get(stage.backend)
    return bool(spec and spec.gpu)


def validate_request(config: Config, registrations: Sequence[Registration],
                     request: PlanRequest) -> None:
    """Reject requests that cannot be honoured, naming what and why."""
    import difflib

    from testfleet.planning.lanes import all_lanes, find_lane

    for name in request.stages:
        if name not in config.stages and find_lane(config, name) is None:
            # a stage, or one variant of it as <stage>.<variant>
            names = sorted({*config.stages, *all_lanes(config)})
            close = difflib.get_close_matches(name, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            shown = ", ".join(names[:12]) + (f", ... ({len(names) - 12} more)" if len(names) > 12 else "")
            raise UsageError(f"--stage {show(name)}: no such stage or variant{hint}; stages: {shown}")
    if request.include_disabled and not (request.files or request.stages):
        raise UsageError("--include-disabled applies only with --file or --stage")
    if not request.files:
        return
    by_file: dict[str, list[Registration]] = defaultdict(list)
    for reg in registrations:
        by_file[reg.file].append(reg)
    for path in request.files:
        regs = by_file.get(path)
        if not regs:
            raise UsageError(f"--file {path}: not a registered test file (see 'testfleet list')")
        if all(r.suite == "" for r in regs) and not request.stages:
            backends = sorted({r.backend for r in regs})
            choices = sorted(n for n, st in config.stages.items() if st.backend in backends)
            raise UsageError(f"--file {path} is registered by path only (suite \"\"): name the stage "
                             f"to run it on with --stage ({', '.join(choices[:12]) or 'no stage of its backend'})")
        if request.stages:
            named = {getattr(find_lane(config, n), "stage", n) for n in request.stages}
            regs = [r for r in regs if r.suite in named or r.suite == ""]
            if not regs:
                raise UsageError(
                    f"--file {path}: not registered on the requested stage(s) "
                    f"{', '.join(request.stages)}"
                )
        if not request.include_disabled and all(r.disabled for r in regs):
            why = "; ".join(f"{r.suite}: {r.disabled}" for r in regs)
            raise UsageError(
                f"--file {path} is disabled ({why}); pass --include-disabled to run it anyway"
            )


def select(
    config: Config,
    registrations: Sequence[Registration],
    policy: Policy,
    request: PlanRequest,
    impact: Impact | None,
    denied: Mapping[str, str] | None = None,
    trust: Config | None = None,
) -> Selection:
    """Decide each registration's fate; ``impact`` is None when no diff was given.

    ``denied`` maps the stages a fork may not run at all to the reason (see
    :mod:`testfleet.planning.trust`); ``trust`` is the configuration whose
    authorization rules apply (the base branch's for a fork).
    """
    sel = Selection(chosen={name: [] for name in config.stages})
    include = set(policy.include_labels)
    files = set(request.files)
    stages = set(request.stages)
    denied = denied or {}
    auth_hint = authorization_hint(trust if trust is not None else config)
    changed = changed_paths(request)
    gates = {} if files else {name: stage_gate(config, policy, name, changed)
                              for name in config.stages}
    accepted = {name: stage_backends(config, name) for name in config.stages}

    def skip(reg: Registration, reason: Reason, detail: str) -> None:
        assert reason in REASONS, reason
        sel.skipped.append(Skipped(reg.file, reg.backend, reg.suite, reason, detail))

    for reg in sorted(registrations, key=lambda r: (r.file, r.backend, r.suite)):
        if reg.suite == "":
            skip(reg, "path-only", "suite \"\": run by path only, never scheduled by a stage "
                                   "(plan it with --file FILE --stage STAGE)")
            continue
        stage = config.stages.get(reg.suite)
        if stage is None or reg.backend not in accepted[reg.suite]:
            raise UsageError(
                f"{reg.file}:{reg.line}: registration names stage {reg.suite!r} for backend "
                f"{reg.backend!r}, which the configuration does not define; run 'testfleet check'"
            )
        if stages and reg.suite not in stages:
            skip(reg, "not-requested", f"--stage filter: {', '.join(sorted(stages))}")
        elif files and reg.file not in files:
            skip(reg, "not-requested", "explicit --file request names other files")
        elif reg.disabled and reg.off_everywhere and not request.include_disabled:
            skip(reg, "disabled", reg.disabled)
            if files:
                sel.warnings.append(
                    f"--file {reg.file}: its {reg.suite} registration is disabled ({reg.disabled}); "
                    "pass --include-disabled to run it too"
                )
        elif stage.disabled is not None:
            skip(reg, "stage-dormant", stage.disabled)
        elif reg.suite in denied:
            skip(reg, "unauthorized",
                 f"{'fork ' if policy.fork else ''}pull request: {denied[reg.suite]}")
        elif stage.trusted_only and not policy.authorized:
            skip(reg, "unauthorized",
                 f"{reg.suite} is trusted_only and this pull request comes from a fork "
                 f"without an authorizing label ({auth_hint})")
        elif (gate := gates.get(reg.suite)) is not None:
            skip(reg, gate[0], gate[1])
        elif not files and stage.registrations is not None \
                and (side := side_excluded(stage.registrations, reg.suite, reg.nightly)):
            skip(reg, *side)
        elif not files and stage.registrations is None and policy.exact_nightly \
                and not reg.nightly:
            skip(reg, "per-commit-only",
                 f"nightly=False; cadence {policy.cadence} runs only nightly=True registrations "
                 "(nightly_split = 'exact')")
        elif not files and stage.registrations is None and reg.nightly \
                and not policy.admit_nightly:
            skip(reg, "nightly-only", f"nightly=True; cadence {policy.cadence} does not admit it")
        elif not files and reg.labels and not include.intersection(reg.labels):
            # the include set itself is in the plan's policy; repeating it per file bloats
            skip(reg, "not-selected-by-labels",
                 f"labels {', '.join(reg.labels)} not in the include set"
                 + ("" if policy.include_labels else " (none requested)"))
        else:
            sel.chosen[reg.suite].append(reg)

    _prune(config, policy, request, impact, sel)
    _statuses(config, policy, request, sel, auth_hint, gates, denied)
    return sel


def changed_paths(request: PlanRequest) -> tuple[str, ...] | None:
    """The paths the trigger changed, when a usable diff came with it."""
    changes = request.changes
    return changes.paths if changes is not None and changes.error is None else None


def _prune(config: Config, policy: Policy, request: PlanRequest, impact: Impact | None,
           sel: Selection) -> None:
    if impact is None or request.files:
        return
    if policy.event not in ("pull_request", "pull_request_target"):
        sel.warnings.append("changed files ignored: pruning applies to pull_request events only")
        return
    if policy.broad:
        return
    if impact.everything:
        sel.warnings.append(f"no stage pruned: {impact.why}")
        return
    requested = set(policy.requested_labels)
    n_paths = len(request.changes.paths) if request.changes else 0
    detail = f"no changed file affects this stage ({n_paths} changed path(s) in the project)"
    for name, regs in sel.chosen.items():
        if not regs or name in impact.stages or not prunable(config, config.stages[name]):
            continue
        if any(requested.intersection(r.labels) for r in regs):
            continue
        for reg in regs:
            sel.skipped.append(Skipped(reg.file, reg.backend, reg.suite, "stage-unaffected",
                                       detail))
        sel.chosen[name] = []
        sel.status[name] = ("unaffected", "no changed file affects this stage")


def _statuses(config: Config, policy: Policy, request: PlanRequest, sel: Selection,
              auth_hint: str, gates: dict[str, tuple[Reason, str] | None],
              denied: Mapping[str, str]) -> None:
    reasons: dict[str, dict[str, int]] = {name: defaultdict(int) for name in config.stages}
    for s in sel.skipped:
        if s.suite in reasons:
            reasons[s.suite][s.reason] += 1
    for name, stage in config.stages.items():
        if name in sel.status:
            continue
        if stage.disabled is not None:
            sel.status[name] = ("dormant", stage.disabled)
        elif name in denied:
            sel.status[name] = ("unauthorized",
                                f"{'fork ' if policy.fork else ''}pull request: {denied[name]}")
        elif stage.trusted_only and not policy.authorized:
            sel.status[name] = (
                "unauthorized",
                f"trusted_only stage; fork pull request without an authorizing label ({auth_hint})",
            )
        elif (gate := gates.get(name)) is not None and not (request.stages
                                                             and name not in request.stages):
            sel.status[name] = ("excluded", gate[1])
        elif sel.chosen[name]:
            sel.status[name] = ("scheduled", "")
        else:
            counts = reasons[name]
            if request.stages and name not in request.stages:
                why = "not requested (--stage filter)"
            elif request.files and counts.get("not-requested") and len(counts) == 1:
                why = "not requested (--file names no file of this stage)"
            elif not counts:
                why = "no test file registers this stage"
            else:
                why = "nothing selected: " + ", ".join(
                    f"{n} {r}" for r, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
                )
            sel.status[name] = ("empty", why)
