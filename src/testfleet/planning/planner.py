"""make_plan: registry + trigger + estimates -> a sealed :class:`Plan`.

Pure apart from reading nothing at all: the registry, the request (with its
changed files already read) and the estimates come in as values. Sharding goes
only through :mod:`testfleet.planning.sharding`, so a better algorithm changes
no line here.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cache
from typing import TYPE_CHECKING

from testfleet.breaker.model import BreakerState
from testfleet.breaker.runners import RunnerInventory, self_hosted
from testfleet.commands import AUTO, Style, resolve
from testfleet.config import Config, Project, StageConfig
from testfleet.config.triggers import needs_for
from testfleet.errors import TestfleetError, UsageError
from testfleet.planning import sharding
from testfleet.planning.changes import impact as change_impact
from testfleet.planning.inputs import history_digest
from testfleet.planning.jobci import job_ci, job_timeout
from testfleet.planning.lanes import Lane, find_lane, stage_lanes, uses_stage_estimate
from testfleet.planning.model import (
    REASONS,
    SOURCES,
    Job,
    Plan,
    PlannedTest,
    Skipped,
    StageSummary,
    rounded,
    seal,
)
from testfleet.planning.policy import label_problem, lane_gate, resolve_policy
from testfleet.planning.request import PlanRequest
from testfleet.planning.select import changed_paths, select, validate_request
from testfleet.planning.stage_files import bind_stage_files
from testfleet.registry.model import Registration, Registry

if TYPE_CHECKING:
    from testfleet.documents.plan import QueueDoc, RunnersDoc, TrustDoc
    from testfleet.documents.vocabulary import Reason, Source, StageCount, Status

Estimates = Mapping[tuple[str, str], tuple[float, str]]

#: GitHub Actions refuses a matrix with more entries than this.
MAX_MATRIX_JOBS = 256


class PlanInvariantError(TestfleetError):
    """A plan broke one of its invariants: a bug in testfleet, never the user's input."""

    exit_code = 3


def stage_waves(config: Config, event: str | None = None) -> dict[str, int]:
    """Depth of each stage in the ``needs`` graph (0 = needs nothing).

    Computed from the configuration alone, so a workflow generated once has a
    fixed number of wave jobs whatever a trigger selects. With ``event``, a stage's
    ``needs_on`` entry for it replaces ``needs``; without, every edge counts (the
    deepest the waves can be on any event).
    """
    graph = {name: needs_for(stage.needs, stage.needs_on, event)
             for name, stage in config.stages.items()}

    @cache
    def depth(name: str) -> int:
        return 1 + max((depth(n) for n in graph[name] if n in graph), default=-1)

    return {name: depth(name) for name in graph}


def _literal(reg: Registration) -> tuple[float, Source]:
    if not math.isfinite(reg.est_time) or reg.est_time < 0:
        raise UsageError(f"{reg.file}:{reg.line}: est_time {reg.est_time!r} is not a finite "
                         "number of seconds; run 'testfleet check'")
    return rounded(reg.est_time), "est_time"


def _estimate(reg: Registration, estimates: Estimates | None, lane: str = "") -> tuple[float, Source]:
    """A variant's own history first (it runs on other hardware), else its stage's, else
    the registration's literal."""
    if estimates is None:
        return _literal(reg)
    got = estimates.get((reg.file, lane)) if lane and lane != reg.suite else None
    stage = estimates.get((reg.file, reg.suite))
    if uses_stage_estimate(_source(got), _source(stage)):
        got = stage
    if got is None:
        return _literal(reg)
    seconds, source = got
    if source not in SOURCES or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
            or seconds < 0:
        raise UsageError(
            f"estimate for {reg.file} on {reg.suite} is invalid: {got!r} "
            f"(want (seconds >= 0, one of {', '.join(SOURCES)}))"
        )
    return rounded(seconds), source


def _source(estimate: object) -> str | None:
    """An estimate's source, "" for a malformed one (which the caller then reports)."""
    if estimate is None:
        return None
    source = estimate[1] if isinstance(estimate, tuple) and len(estimate) == 2 else ""
    return source if isinstance(source, str) else ""


def _shard_count(name: str, config: Config, seconds: list[float],
                 warnings: list[str]) -> int:
    stage = config.stages[name]
    fixed = stage.shards
    if fixed is None and stage.target_minutes is None and stage.max_shards is None:
        fixed = 1
    n, warning = sharding.choose_shards(
        seconds,
        shards=fixed,
        target_seconds=stage.target_minutes * 60 if stage.target_minutes is not None else None,
        max_shards=stage.max_shards,
    )
    if warning:
        warnings.append(f"stage {name}: {warning}")
    return n


def _hole_cause(stage: StageConfig, regs: list[Registration], invalid: int = 0,
                held: str | None = None) -> str | None:
    if held is not None and stage.disabled is None and regs:
        return held
    rejected = (f"{invalid} registration{' for this stage is' if invalid == 1 else 's for this stage are'} "
                "invalid") if invalid else ""
    if stage.disabled is not None:
        return f"the stage is dormant: {stage.disabled}"
    if not regs:
        return rejected or "no test file registers it"
    if all(r.disabled_for(stage.runs_on) for r in regs):
        return f"all {len(regs)} registration(s) are disabled" + (f"; {rejected}" if rejected else "")
    return rejected or None


def _bind_path_only(registrations: list[Registration], config: Config,
                    request: PlanRequest) -> list[Registration]:
    """A path-only registration (suite "") named by --file runs on each requested stage of its backend."""
    if not request.files or not request.stages:
        return registrations
    files = set(request.files)
    out: list[Registration] = []
    for reg in registrations:
        if reg.suite == "" and reg.file in files:
            stages = [n for n in request.stages if n in config.stages
                      and reg.backend in config.stages[n].accepted_backends()]
            taken = {r.suite for r in registrations if r.file == reg.file and r.backend == reg.backend}
            bound = [replace(reg, suite=n) for n in stages if n not in taken]
            if bound:
                out.extend(bound)
                continue
        out.append(reg)
    return out


def _runner_disabled(lane: Lane, status: Status, reason: str, chosen: list[Registration],
                     skipped: list[Skipped], skip_counts: dict[str, Counter[str]],
                     ) -> tuple[Status, str, list[Registration]]:
    """Registrations disabled on this lane's runner class only (``disabled_on``) get the
    fate ``disabled`` here, with the runner label that matched; the other lanes run them."""
    kept: list[Registration] = []
    for r in chosen:
        why = r.disabled_for(lane.config.runs_on)
        if why is None:
            kept.append(r)
            continue
        skipped.append(Skipped(r.file, r.backend, r.suite, "disabled", why, lane.variant))
        skip_counts[lane.key]["disabled"] += 1
    if status == "scheduled" and not kept:
        return "empty", "every selected registration is disabled on these runners", []
    return status, reason, kept


def _invalid_fates(registry: Registry | Sequence[Registration]) -> list[Skipped]:
    """Every rejected marker call gets the fate ``invalid`` with its error (#12: errors are fates)."""
    if not isinstance(registry, Registry):
        return []
    return [Skipped(bad.file, bad.backend, bad.suite, "invalid",
                    f"line {bad.line}: {bad.message} ({bad.code})") for bad in registry.invalid]


def make_plan(
    project: Project,
    registry: Registry | Sequence[Registration],
    request: PlanRequest,
    estimates: Estimates | None = None,
    warnings: Sequence[str] = (),
    styles: Mapping[str, Style | None] | None = None,
    quarantine: Mapping[tuple[str, str], str] | None = None,
    breakers: Mapping[str, BreakerState] | None = None,
    runners: RunnerInventory | None = None,
) -> Plan:
    """Plan one trigger. ``estimates`` maps (file, stage) -> (seconds, source); when
    a pair is missing the registration's literal ``est_time`` is used. ``warnings``
    from the caller (e.g. about the history database) are added to the plan's.
    ``styles`` (file -> script or pytest style) resolve ``command = "auto"`` stages; when
    not given, the files of those stages are parsed (never imported) under the root.
    ``quarantine`` maps (stage, file) of flaky files to why: they run in their job and
    their failure does not block it (see testfleet.results.quarantine).
    ``breakers`` maps a lane to its breaker's state as the history holds it (#41): an open
    one holds the lane back (fate ``runner-broken``, a coverage hole) and, on a run that
    is not a pull request, schedules its probe instead. ``runners``: the online self-hosted
    runners (``plan --runners``); a lane no online runner serves gets ``no-runner-online``."""
    config = project.config
    registrations = list(registry.registrations if isinstance(registry, Registry) else registry)
    # A fork's trust settings come from its base commit (planning/trust.py).
    denied: dict[str, str] = {}
    trust_config: Config | None = None
    trust_json: TrustDoc | None = None
    # (and any pull request the trusted workflow plans with --trust-base: the base
    # branch's settings are what its jobs run with).
    fork_pr = request.trigger.is_pull_request and request.trigger.fork
    if request.trigger.is_pull_request and request.trust is not None:
        from testfleet.planning.trust import apply as apply_trust

        config, denied = apply_trust(config, request.trust)
        trust_config = request.trust.base
        trust_json = request.trust.to_json()
    policy, policy_warnings = resolve_policy(config, request.trigger, trust=trust_config)
    if request.trigger.is_pull_request and request.trust is not None \
            and request.trust.base is None:
        from dataclasses import replace

        policy = replace(policy, authorized=False, authorized_by=None)
        policy_warnings.insert(0, f"{'fork ' if fork_pr else ''}pull request planned without "
                               "trust: the base commit's "
                               f"configuration could not be read ({request.trust.problem}); "
                               "every stage is unauthorized")
    warnings = [*policy_warnings, *warnings]
    validate_request(config, registrations, request)
    wanted_lanes, request = _lane_request(config, request)
    registrations = _bind_path_only(registrations, config, request)
    if not request.files:  # an explicit --file request keeps --stage deciding
        registrations = bind_stage_files(registrations, config)
    invalid = _invalid_fates(registry)

    stages_of_file: dict[str, set[str]] = defaultdict(set)
    for reg in registrations:
        stages_of_file[reg.file].add(reg.suite)
    impact = (
        change_impact(request.changes, stages_of_file, config.policy.no_impact)
        if request.changes is not None else None
    )
    sel = select(config, registrations, policy, request, impact, denied, trust_config)
    warnings.extend(sel.warnings)
    sel.skipped.extend(invalid)

    waves = stage_waves(config, policy.event)
    changed = changed_paths(request)
    by_stage: dict[str, list[Registration]] = defaultdict(list)
    for reg in registrations:
        by_stage[reg.suite].append(reg)
    sel.skipped = _lane_fates(config, sel.skipped)
    skip_counts: dict[str, Counter[str]] = defaultdict(Counter)
    for s in sel.skipped:
        skip_counts[f"{s.suite}.{s.variant}" if s.variant else s.suite][s.reason] += 1
    invalid_counts: Counter[tuple[str, str]] = Counter((s.suite, s.backend) for s in invalid)

    jobs: list[Job] = []
    summaries: list[StageSummary] = []
    hole_warnings: list[str] = []
    dormant_holes: dict[str, list[tuple[str, str]]] = {}
    probe_for_breaker: list[tuple[Lane, BreakerState]] = []
    for name, lane in ((n, lane) for n in sorted(config.stages, key=lambda n: (waves[n], n))
                       for lane in stage_lanes(config, n)):
        stage = lane.config
        status, reason = sel.status[name]
        chosen = sel.chosen[name]
        if lane.variant:  # one suite under two backends: each variant runs its backend's
            chosen = [r for r in chosen if r.backend == lane.backend]
        if lane.variant:
            gate = None if request.files else lane_gate(config, policy, name, stage, changed,
                                                        lane.variant)
            status, reason, chosen = _lane_status(lane, status, reason, chosen, wanted_lanes,
                                                  sel.skipped, skip_counts, gate)
        if not request.include_disabled and any(r.disabled_on for r in chosen):
            status, reason, chosen = _runner_disabled(lane, status, reason, chosen,
                                                      sel.skipped, skip_counts)
        held_state = (breakers or {}).get(lane.key)
        held = held_back(held_state, lane, runners) if stage.disabled is None else None
        if held is not None:
            if chosen:
                broken = held_state is not None and held_state.open
                fate: Reason = "runner-broken" if broken else "no-runner-online"
                for r in chosen:
                    sel.skipped.append(Skipped(r.file, r.backend, r.suite, fate, held, lane.variant))
                    skip_counts[lane.key][fate] += 1
                status = "runner-broken" if broken else "no-runner-online"
                reason, chosen = held, []
            warnings.append(f"{lane.key}: {held}")
            if held_state is not None and held_state.open and not request.trigger.is_pull_request \
                    and (not wanted_lanes.get(name) or lane.variant in wanted_lanes[name]) \
                    and (not request.stages or name in request.stages):
                probe_for_breaker.append((lane, held_state))
        auto = stage.command == AUTO
        if auto and chosen and styles is None:
            from testfleet.planning.styles import read_styles

            styles = read_styles(project.root, sorted(
                {r.file for n, regs in sel.chosen.items() for r in regs
                 if any(ln.config.command == AUTO for ln in stage_lanes(config, n))}),
                digests=registry.digests if isinstance(registry, Registry) else None,
                cache_dir=config.cache_dir)
        own = lane.key if lane.variant else ""  # a variant's own history and quarantine first
        q = quarantine or {}
        tests = [PlannedTest(r.file, *_estimate(r, estimates, own),
                             command=resolve(AUTO, (styles or {}).get(r.file)) if auto else None,
                             quarantined=(q.get((own, r.file)) or q.get((name, r.file), ""))
                             if q else "")
                 for r in chosen]
        source_of = {t.file: t.source for t in tests}
        command_of = {t.file: t.command for t in tests}
        quarantined_of = {t.file: t.quarantined for t in tests}
        seconds = [t.estimate for t in tests]
        n = _shard_count(name, config, seconds, warnings) if tests else 0
        groups = sharding.partition([(t.file, t.estimate) for t in tests], n) if n else []
        # ``shards = N`` is N shards whatever the history says: a fixed CI matrix runs
        # ``--shard I/N``. With fewer files than N, shards past the last file have no job
        # (a job never has zero files) and run empty.
        of = max(len(groups), stage.shards or 0) if groups else 0
        ci = job_ci(stage)
        queue = _queue_doc(lane, stage, len(tests), fork_pr, warnings,
                           pr=request.trigger.is_pull_request,
                           pr_queue=config.ci.queue_secret is not None) if groups else None
        for i, group in enumerate(groups, 1):
            jobs.append(Job(
                id=f"{lane.key}-{i}-of-{of}",
                variant=lane.variant,
                stage=name,
                backend=stage.backend,
                runs_on=tuple(stage.runs_on),
                container=stage.container_image,
                command=stage.command,
                shard=i,
                shards=of,
                wave=waves[name],
                needs=tuple(needs_for(stage.needs, stage.needs_on, policy.event)),
                estimate=rounded(sum(sec for _, sec in group)),
                tests=tuple(PlannedTest(f, sec, source_of[f], command_of[f], quarantined_of[f])
                            for f, sec in group),
                env=dict(stage.env),
                ci=ci,
                # a queue runner may end up running any share of its lane (the others
                # lost): its CI job timeout is sized for the whole lane
                timeout_minutes=job_timeout(ci, sum(seconds) if queue
                                            else sum(sec for _, sec in group)),
                queue=queue,
            ))
        over = [j for j in jobs[len(jobs) - len(groups):] if j.estimate > j.timeout_minutes * 60]
        if over:  # the job would be cancelled before its tests end: more shards, or a longer limit
            worst = max(over, key=lambda j: j.estimate)
            warnings.append(f"stage {name}{f' variant {lane.variant}' if lane.variant else ''}: "
                            f"{len(over)} of {len(groups)} shard(s) are estimated longer than the "
                            f"job's {worst.timeout_minutes}-minute timeout (longest "
                            f"{worst.estimate / 60:.1f} min): set target_minutes or raise "
                            "job_timeout_minutes")
        regs = [r for r in by_stage.get(name, []) if r.backend == lane.backend]
        total = sum(seconds)
        makespan = max((sum(sec for _, sec in g) for g in groups), default=0.0)
        lower = max(max(seconds, default=0.0), total / len(groups)) if groups else 0.0
        lane_skips = Counter(skip_counts[lane.key])
        if lane.variant:  # a rejected call has no variant: it is a hole in each lane of its backend
            lane_skips["invalid"] += invalid_counts[(name, lane.backend)]
        cause = _hole_cause(stage, regs, lane_skips.get("invalid", 0), held)
        what = f"stage {name}" + (f" variant {lane.variant}" if lane.variant else "")
        if cause and any(not r.disabled_for(stage.runs_on) for r in regs) and stage.disabled is None:
            hole_warnings.append(f"coverage hole: {what} ({stage.backend}) is missing tests: {cause}")
        elif cause and stage.disabled is not None:
            dormant_holes.setdefault(stage.disabled, []).append(
                (f"{what} ({stage.backend})", f"{lane.key} ({stage.backend})"))
        elif cause:
            hole_warnings.append(f"coverage hole: {what} ({stage.backend}) has no enabled "
                                 f"registrations: {cause}")
        counts: dict[StageCount, int] = {
            "registered": len(regs),
            "enabled": sum(1 for r in regs if not r.disabled_for(stage.runs_on)),
            "scheduled": len(tests),
            # flaky files that run without blocking (#14): scheduled, but at risk
            "quarantined": sum(1 for t in tests if t.quarantined),
        }
        counts.update({r: lane_skips.get(r, 0) for r in REASONS})
        summaries.append(StageSummary(
            variant=lane.variant,
            name=name, backend=stage.backend, status=status, reason=reason, wave=waves[name],
            counts=counts, shards=len(groups), makespan=rounded(makespan),
            lower_bound=rounded(lower),
            ratio=rounded(makespan / lower, 4) if lower > 0 else 1.0,
            history_share=rounded(sum(1 for t in tests if t.source == "history") / len(tests), 4)
            if tests else 0.0,
            hole=cause is not None,
        ))

    # dormant stages are said once per reason, not once per stage (a tree adopted with
    # dozens of stages no job runs would otherwise repeat one long reason dozens of times)
    for why, whats in dormant_holes.items():
        if len(whats) == 1:
            hole_warnings.append(f"coverage hole: {whats[0][0]} has no enabled registrations: "
                                 f"the stage is dormant: {why}")
        else:
            hole_warnings.append(f"coverage hole: {len(whats)} dormant stages have no enabled "
                                 f"registrations ({', '.join(sorted(k for _, k in whats))}): each is dormant: {why}")
    warnings.extend(hole_warnings)
    jobs.extend(probe_jobs(config, by_stage, policy.cadence, estimates, waves, warnings))
    for lane, state in probe_for_breaker:
        jobs.extend(breaker_probe(lane, state, by_stage, estimates, waves, runners, warnings))
    warnings.extend(f"quarantined: {t.file} ({j.stage}) runs but its failure does not fail "
                    f"the job: {t.quarantined}" for j in jobs for t in j.tests if t.quarantined)
    by_backend: dict[str, list[StageSummary]] = defaultdict(list)
    for summary in summaries:
        by_backend[summary.backend].append(summary)
    for backend, members in sorted(by_backend.items()):
        if all(m.hole and (m.counts.get("enabled", 0) == 0 or m.status == "dormant") for m in members):
            warnings.append(f"backend {backend} has no enabled coverage at all "
                            f"({len(members)} stage(s), every one a coverage hole)")
    per_wave = Counter(j.wave for j in jobs)
    for wave, n in sorted(per_wave.items()):
        if n > MAX_MATRIX_JOBS:
            warnings.append(f"wave {wave} has {n} jobs; a GitHub Actions matrix allows at most "
                            f"{MAX_MATRIX_JOBS} (lower shards/max_shards or split stages)")
    if not jobs:
        if request.files:
            fates = "; ".join(f"{s.suite}: {s.reason} ({s.detail})" for s in sel.skipped
                              if s.file in request.files)
            raise UsageError(f"nothing to run for the requested file(s): {fates}")
        warnings.append("no jobs: " + "; ".join(
            f"{s.name} {s.status}" + (f" ({s.reason})" if s.reason else "") for s in summaries
        ) if summaries else "no jobs: the configuration defines no stages")

    plan = Plan(
        policy=policy.to_json(),
        trigger={
            **request.trigger.to_json(),
            # ignored labels are reported (escaped, cut) in warnings, not stored raw
            "labels": [raw for raw in request.trigger.labels if label_problem(raw) is None],
            "files": list(request.files),
            "stages": list(request.stages),
            "include_disabled": request.include_disabled,
            "changes": None if request.changes is None else {
                "source": request.changes.source,
                "paths": len(request.changes.paths),
                "error": request.changes.error,
            },
        },
        jobs=tuple(jobs),
        stages=tuple(summaries),
        skipped=tuple(sorted(sel.skipped, key=lambda s: (s.suite, s.file, s.variant, s.reason))),
        warnings=tuple(_dedupe(warnings)),
        trust=trust_json,
        inputs={"history": history_digest(estimates, quarantine, breakers)},
        runners=_runners_doc(config, runners, summaries),
    )
    check_invariants(plan, registrations, invalid, _lane_table(config))
    return seal(plan)


def _lane_table(config: Config) -> dict[str, list[tuple[str, str]]]:
    """stage -> [(variant, backend)] of its lanes."""
    return {name: [(lane.variant, lane.backend) for lane in stage_lanes(config, name)]
            for name in config.stages}


def _lane_request(config: Config, request: PlanRequest) -> tuple[dict[str, set[str]], PlanRequest]:
    """``--stage S.V`` names one variant of S: selection sees stage S, and the planner
    keeps only the requested variants' lanes (per stage; a stage named whole keeps all)."""
    wanted: dict[str, set[str]] = {}
    names: list[str] = []
    for key in request.stages:
        if key in config.stages:
            names.append(key)
            wanted[key] = set()
            continue
        lane = find_lane(config, key)
        if lane is None:
            names.append(key)
            continue
        names.append(lane.stage)
        if wanted.get(lane.stage) != set():
            wanted.setdefault(lane.stage, set()).add(lane.variant)
    names = list(dict.fromkeys(names))
    if tuple(names) == tuple(request.stages):
        return wanted, request
    return wanted, replace(request, stages=tuple(names))


#: Fates selection decides before a stage's dormancy; a dormant variant keeps them.
_BEFORE_DORMANT = ("not-requested", "disabled", "stage-dormant", "invalid", "path-only")


def _lane_fates(config: Config, skipped: list[Skipped]) -> list[Skipped]:
    """A registration skipped on a stage with variants is skipped on each variant of its
    backend: one fate per lane; on a dormant variant the fate is ``stage-dormant`` unless
    selection decided earlier in its order. Rejected calls (``invalid``) keep one fate."""
    if not any(stage.variants for stage in config.stages.values()):
        return skipped
    out: list[Skipped] = []
    for s in skipped:
        stage = config.stages.get(s.suite)
        if stage is None or not stage.variants or s.reason == "invalid":
            out.append(s)
            continue
        for v, table in sorted(stage.variants.items()):
            if (table.backend or stage.backend) != s.backend:
                continue
            if table.disabled is not None and s.reason not in _BEFORE_DORMANT:
                out.append(replace(s, variant=v, reason="stage-dormant",
                                   detail=f"variant {v} is dormant: {table.disabled}"))
            else:
                out.append(replace(s, variant=v))
    return out


def _lane_status(lane: Lane, status: Status, reason: str, chosen: list[Registration],
                 wanted: Mapping[str, set[str]], skipped: list[Skipped],
                 skip_counts: dict[str, Counter[str]],
                 gate: tuple[Reason, str] | None = None) -> tuple[Status, str, list[Registration]]:
    """A variant's status from its stage's: dormant by its own ``disabled``; of a scheduled
    stage, left out by ``--stage S.V`` naming another variant, excluded by its own trigger
    gate (``gate``: its events, cadences, run_on_changes), empty when no selected
    registration is of its backend, else scheduled. Registrations it does not run get
    their fate here."""
    def skip_all(why: Reason, detail: str) -> None:
        for r in chosen:
            skipped.append(Skipped(r.file, r.backend, r.suite, why, detail, lane.variant))
            skip_counts[lane.key][why] += 1

    others = wanted.get(lane.stage)
    if status == "scheduled" and others and lane.variant not in others:
        detail = f"--stage filter: {', '.join(sorted(f'{lane.stage}.{v}' for v in others))}"
        skip_all("not-requested", detail)
        return "empty", "not requested (--stage filter)", []
    if lane.config.disabled is not None:
        skip_all("stage-dormant", f"variant {lane.variant} is dormant: {lane.config.disabled}")
        return "dormant", lane.config.disabled, []
    if status != "scheduled":
        return status, reason, chosen
    if gate is not None:
        skip_all(*gate)
        return "excluded", gate[1], []
    if not chosen:
        return "empty", f"no selected registration of backend {lane.backend}", []
    return "scheduled", "", chosen


def probe_jobs(config: Config, by_stage: Mapping[str, list[Registration]], cadence: str,
               estimates: Estimates | None, waves: Mapping[str, int],
               warnings: list[str]) -> list[Job]:
    """One probe job per dormant stage whose ``probe`` cadence is this run's: the named
    files (or the stage's ``shortest`` N) on the stage's own runners. Every file is
    quarantined, so a failing probe is recorded and never fails the job; no job needs it."""
    out = []
    for name in sorted(config.stages):
        stage = config.stages[name]
        probe = stage.probe
        if probe is None or stage.disabled is None or probe.cadence != cadence:
            continue
        regs = {r.file: r for r in by_stage.get(name, [])}
        if probe.files:
            unknown = [f for f in probe.files if f not in regs]
            if unknown:
                warnings.append(f"probe of dormant stage {name}: {', '.join(unknown)} "
                                "not registered in it; probing the others")
            chosen = [regs[f] for f in dict.fromkeys(probe.files) if f in regs]
        else:
            chosen = sorted(regs.values(), key=lambda r: (_estimate(r, estimates)[0], r.file))
            chosen = chosen[:probe.shortest]
        if not chosen:
            warnings.append(f"probe of dormant stage {name}: no registered file to probe")
            continue
        why = (f"probe of dormant stage {name} ({stage.disabled}); ready to restore after "
               f"{probe.restore_after} clean probe(s) in a row")
        tests = tuple(PlannedTest(r.file, *_estimate(r, estimates), quarantined=why[:500])
                      for r in chosen)
        out.append(Job(
            id=f"{name}-probe", stage=name, backend=stage.backend, runs_on=tuple(stage.runs_on),
            container=stage.container_image, command=stage.command, shard=1, shards=1,
            wave=waves[name], needs=(), estimate=rounded(sum(t.estimate for t in tests)),
            tests=tests, env=dict(stage.env), probe=True, ci=job_ci(stage),
            timeout_minutes=job_timeout(job_ci(stage), sum(t.estimate for t in tests))))
        warnings.append(f"probe: {name} is dormant; job {name}-probe runs "
                        f"{len(tests)} of its file(s) on its runners and never blocks")
    return out


def _runners_doc(config: Config, runners: RunnerInventory | None,
                 summaries: Sequence[StageSummary]) -> RunnersDoc | None:
    """What the plan knew of its self-hosted runners (None: no lane asks for one)."""
    if not any(self_hosted(lane.config.runs_on) for n in config.stages
               for lane in stage_lanes(config, n)):
        return None
    if runners is None:
        return {"checked": False}
    return {"checked": True, "source": runners.source[:300], "online": len(runners.online),
            "total": runners.total,
            "offline_lanes": sorted(s.lane for s in summaries if s.status == "no-runner-online")}


def _day(epoch: float | None) -> str:
    """A breaker's opening day (UTC), the plan's stable way to say its age."""
    import datetime as dt

    if epoch is None:
        return "an unknown day"
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def held_back(state: BreakerState | None, lane: Lane,
              runners: RunnerInventory | None) -> str | None:
    """Why the lane is held back this run (its breaker is open, or no online runner carries
    its labels), or None. The text says the incident, since when and the runs, from the
    state alone: the same history makes the same plan."""
    if state is not None and state.open:
        if state.opened_by:
            what = f"opened by {state.opened_by}: {state.reason}"
        else:
            what = (f"infrastructure incident {state.signature}: {state.text} in "
                    f"{len(state.runs)} default-branch run(s) in a row "
                    f"({', '.join(r.run for r in state.runs[-5:])})")
        return (f"runner class broken: breaker open since {_day(state.opened_at)}, {what}; "
                f"held back {state.held_runs} run(s) so far; only its probe runs until it "
                "passes")[:500]
    if runners is not None and self_hosted(lane.config.runs_on) \
            and not runners.serves(lane.config.runs_on):
        return (f"no online runner carries {', '.join(lane.config.runs_on)} "
                f"({len(runners.online)} of {runners.total} runner(s) online in "
                f"{runners.source})")[:500]
    return None


def breaker_probe(lane: Lane, state: BreakerState, by_stage: Mapping[str, list[Registration]],
                  estimates: Estimates | None, waves: Mapping[str, int],
                  runners: RunnerInventory | None, warnings: list[str]) -> list[Job]:
    """The one probe job of a lane whose breaker is open (#41): the stage's ``probe`` files
    (or its ``shortest`` N), by default its shortest registered file, on the lane's own
    runners; quarantined, so it never blocks; no job needs it."""
    stage = lane.config
    regs = {r.file: r for r in by_stage.get(lane.stage, [])
            if r.backend == lane.backend and r.disabled_for(stage.runs_on) is None}
    probe = stage.probe
    if probe is not None and probe.files:
        chosen = [regs[f] for f in dict.fromkeys(probe.files) if f in regs]
    else:
        own = lane.key if lane.variant else ""
        chosen = sorted(regs.values(), key=lambda r: (_estimate(r, estimates, own)[0], r.file))
        chosen = chosen[:probe.shortest if probe is not None else 1]
    if not chosen:
        warnings.append(f"probe of broken runner class {lane.key}: no registered file to probe")
        return []
    if runners is not None and self_hosted(stage.runs_on) and not runners.serves(stage.runs_on):
        warnings.append(f"probe of broken runner class {lane.key}: not scheduled, no online "
                        f"runner carries {', '.join(stage.runs_on)}")
        return []
    why = (f"probe of broken runner class {lane.key} (breaker open since "
           f"{_day(state.opened_at)}); it closes after clean probes in a row")[:500]
    own = lane.key if lane.variant else ""
    tests = tuple(PlannedTest(r.file, *_estimate(r, estimates, own), quarantined=why)
                  for r in chosen)
    ci = job_ci(stage)
    warnings.append(f"probe: {lane.key}'s breaker is open; job {lane.key}-probe runs "
                    f"{len(tests)} of its file(s) on its runners and never blocks")
    return [Job(id=f"{lane.key}-probe", stage=lane.stage, variant=lane.variant,
                backend=stage.backend, runs_on=tuple(stage.runs_on),
                container=stage.container_image, command=stage.command, shard=1, shards=1,
                wave=waves[lane.stage], needs=(), estimate=rounded(sum(t.estimate for t in tests)),
                tests=tests, env=dict(stage.env), probe=True, breaker=True, ci=ci,
                timeout_minutes=job_timeout(ci, sum(t.estimate for t in tests)))]


def _queue_doc(lane: Lane, stage: StageConfig, files: int, fork_pr: bool,
               warnings: list[str], *, pr: bool = False, pr_queue: bool = True) -> QueueDoc | None:
    """What a queue lane's jobs carry (#40). A fork's pull request never touches the shared
    database: its queue lanes run in shard mode, and the plan says so. Nor does another
    pull request's, unless ``[tool.testfleet.ci] queue_secret`` names the credential its
    queue runners get (a role limited to the queue tables): the history's write secret
    never reaches a pull request's code."""
    if stage.execution != "queue":
        return None
    if fork_pr:
        warnings.append(f"stage {lane.key}: execution = \"queue\" runs in shard mode for a "
                        "fork's pull request (a fork never touches the shared database)")
        return None
    if pr and not pr_queue:
        warnings.append(f"stage {lane.key}: execution = \"queue\" runs in shard mode for a "
                        "pull request: set [tool.testfleet.ci] queue_secret (the database with "
                        "a role limited to the queue tables) to queue its files")
        return None
    return {"execution": "queue", "lease_seconds": float(stage.queue_lease_seconds),
            "infra_retries": stage.queue_infra_retries, "files": files}


def _dedupe(items: list[str]) -> list[str]:
    """Keep the first of repeated warnings, in order."""
    return list(dict.fromkeys(items))


def check_invariants(plan: Plan, registrations: Sequence[Registration],
                     invalid: Sequence[Skipped] = (),
                     lanes: Mapping[str, list[tuple[str, str]]] | None = None) -> None:
    """Every registration exactly once per lane of its stage (one for a stage without
    variants; each rejected call once) across jobs and skipped; no empty job; holes reported.
    ``lanes`` maps stage -> [(variant, backend)] (see :func:`_lane_table`)."""
    def keys(r: Registration) -> list[str]:
        own = (lanes or {}).get(r.suite)
        if not own or not own[0][0]:
            return [r.suite]
        return [f"{r.suite}.{v}" for v, backend in own if backend == r.backend]

    if lanes and any(own[0][0] for own in lanes.values()):
        want = Counter([(r.file, k) for r in registrations for k in keys(r)])
    else:  # no variants: one fate per registration (the common case, kept cheap)
        want = Counter([(r.file, r.suite) for r in registrations])
    want.update((s.file, s.suite) for s in invalid)
    got: Counter[tuple[str, str]] = Counter(
        [(s.file, f"{s.suite}.{s.variant}" if s.variant else s.suite) for s in plan.skipped])
    for job in plan.jobs:
        if not job.tests:
            raise PlanInvariantError(f"internal error: job {job.id} has no tests")
        if job.probe:
            continue  # a probe runs a dormant stage's files; their fate stays stage-dormant
        lane = job.lane
        got.update([(t.file, lane) for t in job.tests])
    # dict equality runs in C; Counter.__eq__ walks both sides in Python
    if not dict.__eq__(got, want):
        missing = sorted((want - got).elements())[:5]
        extra = sorted((got - want).elements())[:5]
        raise PlanInvariantError(
            "internal error: registrations not accounted exactly once "
            f"(missing {missing}, duplicated or unknown {extra}); please report this"
        )
    ids = [j.id for j in plan.jobs]
    if len(set(ids)) != len(ids):
        raise PlanInvariantError("internal error: duplicate job ids")
    for s in plan.stages:
        if s.hole and not any(s.name in w and "coverage hole" in w for w in plan.warnings):
            raise PlanInvariantError(f"internal error: coverage hole {s.name} not in warnings")
