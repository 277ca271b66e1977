"""Turn registrations, config, git ages, a plan and history into a :class:`Report`.

:func:`build_report` is pure (everything it needs is passed in, including "now"),
so every number in every format is testable without git, a database or a clock.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from typing import TYPE_CHECKING, Any

from testfleet.config import Config
from testfleet.config.keyloc import config_line
from testfleet.registry.model import Registration
from testfleet.report.ages import LineAge
from testfleet.report.expiry import parse_expiry
from testfleet.report.model import (
    BrokenLane,
    Counts,
    GroupRow,
    HistorySection,
    Hole,
    LedgerEntry,
    PlanSection,
    Report,
    StageRow,
)
from testfleet.report.references import parse_references

if TYPE_CHECKING:
    from testfleet.documents.report import HoleCause


def category(reg: Registration) -> str:
    """The one coverage category of a registration (exclusive, in priority order)."""
    if reg.disabled is not None:
        return "disabled"
    if reg.nightly:
        return "nightly-only"
    if reg.labels:
        return "label-gated"
    return "enabled"


def count(regs: Iterable[Registration], at_risk: Set[tuple[str, str]] = frozenset()) -> Counts:
    """``at_risk``: the (stage, file) pairs the plan quarantines; an enabled registration
    among them counts as at risk instead of its usual category, never as healthy."""
    c: Counter[str] = Counter()
    est = 0.0
    for reg in regs:
        risky = reg.disabled is None and (reg.suite, reg.file) in at_risk
        c["at-risk" if risky else category(reg)] += 1
        if reg.disabled is None:
            est += reg.est_time
    return Counts(c["enabled"], c["label-gated"], c["nightly-only"], c["disabled"], est,
                  c["at-risk"])


def build_report(
    *,
    project: str,
    config: Config,
    registrations: Sequence[Registration],
    now: dt.datetime,
    ages: Mapping[Registration, LineAge] | None = None,
    git: str = "unknown",
    history: HistorySection | None = None,
    plan: PlanSection | None = None,
    notes: Sequence[str] = (),
    findings: Sequence[str] = (),
    config_file: str = "",
    config_text: str = "",
    invalid: Mapping[str, int] | None = None,
    quarantined: Set[tuple[str, str]] = frozenset(),
    breakers: Mapping[str, Any] | None = None,
) -> Report:
    """Everything the report shows, computed from its inputs only. ``invalid`` counts the
    registrations the registry rejected, per stage they name (#12: holes name that cause);
    ``quarantined`` holds the (stage, file) pairs the plan quarantines (at risk).
    ``breakers``: each opted-in lane's runner-class breaker (#41); an open one is a hole."""
    from testfleet.planning.stage_files import bind_stage_files

    # files a stage runs by path (suite "") count as that stage's
    registrations = bind_stage_files(list(registrations), config)
    patterns = tuple(config.check.reference_patterns)
    dormant_stages = {n for n, s in config.stages.items() if s.disabled is not None}
    at_risk = {(stage, file) for stage, file in quarantined if stage not in dormant_stages}
    stages = _stage_rows(config, registrations, patterns, config_text, at_risk)
    dormant = {s.name for s in stages if s.status == "dormant"}
    # a stage with variants is dormant for a registration when every variant of its backend is
    dormant |= {f"{name}\0{backend}" for name, st in config.stages.items() if st.variants
                for backend in st.accepted_backends()
                if all(row.status == "dormant" for row in stages
                       if row.name.startswith(name + ".") and row.backend == backend)}
    backends = _group_rows(
        {s.backend for s in config.stages.values()} | {r.backend for r in registrations},
        lambda r: (r.backend,), registrations, dormant, config, at_risk,
    )
    labels = _group_rows(
        set(config.labels) | {lb for r in registrations for lb in r.labels},
        lambda r: set(r.labels), registrations, dormant, config, at_risk,
    )
    ledger = _ledger(registrations, ages or {}, now, dormant, patterns)
    from testfleet.report.references import dropped_patterns

    broken = _broken(config, stages, breakers or {})

    notes = (*notes, *dropped_patterns())
    return Report(
        project=project,
        generated=now.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        stages=stages,
        backends=backends,
        labels=labels,
        totals=count(registrations, at_risk),
        holes=find_holes(stages, backends, invalid or {}) + tuple(
            Hole("stage", b.lane, "runner-broken", b.detail, b.lost) for b in broken),
        broken=broken,
        ledger=ledger,
        git=git,
        history=history or HistorySection(False, "no history database consulted"),
        plan=plan,
        notes=tuple(notes),
        findings=tuple(findings),
        config_file=config_file,
    )


def _broken(config: Config, stages: Sequence[StageRow],
            breakers: Mapping[str, Any]) -> tuple[BrokenLane, ...]:
    """The lanes an open breaker holds back (a dormant stage's is dormant first)."""
    from testfleet.planning.lanes import find_lane
    from testfleet.planning.planner import held_back

    out = []
    rows = {s.name: s for s in stages}
    for key, state in sorted(breakers.items()):
        lane = find_lane(config, key)
        row = rows.get(key)
        if lane is None or row is None or row.status == "dormant" or not state.open:
            continue
        detail = held_back(state, lane, None) or ""
        out.append(BrokenLane(key, lane.backend, detail, state.opened_at, state.held_runs,
                              state.held_registrations, row.counts.active))
    return tuple(out)


def _stage_rows(config: Config, regs: Sequence[Registration], patterns: tuple[str, ...],
                config_text: str = "", at_risk: Set[tuple[str, str]] = frozenset()
                ) -> tuple[StageRow, ...]:
    by_suite: dict[str, list[Registration]] = defaultdict(list)
    for reg in regs:
        by_suite[reg.suite].append(reg)
    rows: list[StageRow] = []
    from testfleet.planning.lanes import stage_lanes

    # One row per lane: a stage, or each variant of a stage with variants (#12), named
    # <stage>.<variant>, with the registrations of the variant's backend.
    for name, stage, key, variant in ((n, ln.config, ln.key, ln.variant) for n in config.stages
                                      for ln in stage_lanes(config, n)):
        members = [r for r in by_suite.get(name, []) if r.backend == stage.backend]
        rows.append(StageRow(
            config_key=f"stages.{name}.variants.{variant}" if variant else "",
            name=key, backend=stage.backend,
            status="dormant" if stage.disabled is not None else "active",
            counts=count(members, at_risk), reason=stage.disabled,
            references=tuple(parse_references(stage.disabled, patterns)),
            trusted_only=stage.trusted_only, runs_on=tuple(stage.runs_on),
            config_line=config_line(config_text, name,
                                    "disabled" if stage.disabled is not None else None),
        ))
    # Registrations whose suite (or backend) does not match a configured stage are
    # registry errors; they still show, so nothing is silently dropped from the matrix.
    stray: dict[tuple[str, str], list[Registration]] = defaultdict(list)
    for reg in regs:
        configured = config.stages.get(reg.suite)
        if configured is None or reg.backend not in configured.accepted_backends():
            stray[(reg.suite, reg.backend)].append(reg)
    for (suite, backend), members in sorted(stray.items()):
        rows.append(StageRow(name=suite, backend=backend, status="unconfigured",
                             counts=count(members),
                             reason="no stage of this name and backend in the configuration"))
    return tuple(rows)


def _group_rows(names: Iterable[str], groups: Callable[[Registration], Iterable[str]],
                regs: Sequence[Registration], dormant: set[str], config: Config,
                at_risk: Set[tuple[str, str]] = frozenset()) -> tuple[GroupRow, ...]:
    """One row per backend or label (``groups``: those a registration is in, each once);
    ``scheduled`` leaves out dormant and unknown stages. The registrations are sorted
    into their groups in one pass: a pass per group was a third of a warm ``check`` of
    100,000 files (#36)."""
    by_name: dict[str, list[Registration]] = defaultdict(list)
    for reg in regs:
        for name in groups(reg):
            by_name[name].append(reg)
    rows = []
    for name in sorted(names):
        members = by_name.get(name, [])
        scheduled = sum(
            1 for r in members
            if r.disabled is None and r.suite not in dormant and r.suite in config.stages
            and f"{r.suite}\0{r.backend}" not in dormant
        )
        rows.append(GroupRow(name, count(members, at_risk), scheduled,
                             tuple(sorted({r.suite for r in members}))))
    return tuple(rows)


def find_holes(stages: Sequence[StageRow], backends: Sequence[GroupRow],
               invalid: Mapping[str, int] | None = None) -> tuple[Hole, ...]:
    """Backends and stages with nothing that can run; backends first (the bigger loss)."""
    invalid = invalid or {}
    holes: list[Hole] = []
    configured = [s for s in stages if s.status != "unconfigured"]
    for group in backends:
        own = [s for s in configured if s.backend == group.name]
        if not own or group.scheduled > 0:
            continue
        dormant = [s for s in own if s.status == "dormant"]
        cause: HoleCause
        if dormant and len(dormant) == len(own):
            cause = "all-stages-dormant"
            names = ", ".join(s.name for s in dormant)
            detail = (f"its only stage {names} is dormant" if len(dormant) == 1
                      else f"all its stages are dormant: {names}")
        elif group.counts.total == 0 and (n := sum(invalid.get(row.name, 0) for row in own)):
            cause = "all-invalid"
            detail = f"{n} registration{' for this backend is' if n == 1 else 's for this backend are'} invalid"
        elif group.counts.total == 0:
            cause = "no-registrations"
            detail = "no test registers for this backend"
        elif group.counts.active == 0:
            cause = "all-disabled"
            detail = f"all {group.counts.total} registrations are disabled"
        else:
            cause = "nothing-scheduled"
            detail = (f"{group.counts.active} enabled registrations, all in dormant stages "
                      f"({', '.join(s.name for s in dormant)})")
        holes.append(Hole("backend", group.name, cause, detail, group.counts.active))
    for s in configured:
        if s.status == "dormant":
            holes.append(Hole("stage", s.name, "dormant", s.reason or "", s.counts.active))
        elif s.counts.active == 0:
            if s.counts.total == 0 and invalid.get(s.name):
                n = invalid[s.name]
                holes.append(Hole("stage", s.name, "all-invalid",
                                  f"{n} registration{' for this stage is' if n == 1 else 's for this stage are'} "
                                  "invalid", 0))
            elif s.counts.total == 0:
                holes.append(Hole("stage", s.name, "no-registrations",
                                  "no test registers for this stage", 0))
            else:
                n = invalid.get(s.name, 0)
                also = f"; {n} more {'is' if n == 1 else 'are'} invalid" if n else ""
                holes.append(Hole("stage", s.name, "all-disabled",
                                  f"all {s.counts.total} registrations are disabled{also}", 0))
    return tuple(holes)


def _ledger_reason(reg: Registration) -> str:
    """The whole registration's reason when it is off everywhere, else the reason of its
    per-runner disable (a default's ``{pattern}`` filled with its patterns)."""
    if reg.off_everywhere or reg.disabled_on_reason is None:
        return reg.disabled or ""
    return reg.runner_reason(", ".join(reg.disabled_on))


def _ledger(regs: Sequence[Registration], ages: Mapping[Registration, LineAge],
            now: dt.datetime, dormant: set[str], patterns: tuple[str, ...]) -> tuple[LedgerEntry, ...]:
    disabled = [r for r in regs if r.disabled is not None or r.disabled_on_reason is not None]
    shared = Counter(_norm(_ledger_reason(r)) for r in disabled)
    today = now.astimezone(dt.timezone.utc).date()
    entries = []
    for reg in disabled:
        reason = _ledger_reason(reg)
        runners = () if reg.off_everywhere else reg.disabled_on
        age = ages.get(reg, LineAge("unknown", note="age not computed"))
        expiry = parse_expiry(reason)
        entries.append(LedgerEntry(
            file=reg.file, line=reg.line, backend=reg.backend, suite=reg.suite,
            # disabled on some runner classes only: the ledger says which
            reason=reason + (f" (only on runners matching {', '.join(runners)})"
                             if runners else ""),
            references=tuple(parse_references(reason, patterns)), runners=runners,
            age_days=age.days(now), age_status=age.status, age_note=age.note,
            changed=age.changed.date().isoformat() if age.changed else None,
            commit=age.commit, age_lower_bound=age.boundary,
            expiry=expiry.date.isoformat() if expiry and expiry.date else None,
            expiry_error=expiry.error if expiry else None,
            expired=bool(expiry and expiry.expired(today)),
            days_left=expiry.days_left(today) if expiry else None,
            shared_reason=shared[_norm(reason)],
            stage_dormant=reg.suite in dormant, labels=reg.labels,
            reason_line=age.line or reg.line,
        ))
    entries.sort(key=lambda e: (not e.expired, -(e.age_days if e.age_days is not None else -1),
                                e.file, e.line, e.backend))
    return tuple(entries)


def _norm(reason: str) -> str:
    return " ".join(reason.split()).casefold()
