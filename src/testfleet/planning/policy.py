"""Trigger -> policy: what one CI event is allowed and asked to run.

A pure function of the configuration and the trigger, so that every rule of
``[tool.testfleet.policy]`` can be tested as a table without a repository, a
registry or a CI engine. Problems the trigger author could not have avoided
(a strange PR label) become warnings and a documented fallback; problems of the
command line itself (an unknown cadence or cron) raise :class:`UsageError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_args

from testfleet.config import Config, StageConfig
from testfleet.config.triggers import change_trigger, event_excluded
from testfleet.documents.vocabulary import Event, Reason
from testfleet.errors import UsageError
from testfleet.label_hints import closest_label

if TYPE_CHECKING:
    from testfleet.documents.plan import PolicyDoc, TriggerFlagsDoc

PR_EVENTS = ("pull_request", "pull_request_target")
EVENTS: tuple[Event, ...] = get_args(Event)

#: GitHub caps label names at 50 characters; anything far longer is not a real label.
MAX_LABEL_CHARS = 100


@dataclass(frozen=True)
class Trigger:
    """What happened in CI, as plain values (from flags or a GitHub event payload)."""

    event: Event = "push"
    labels: tuple[str, ...] = ()
    cadence: str | None = None
    schedule: str | None = None
    fork: bool = False
    match_all_labels: bool = False
    draft: bool = False
    #: the pull request's base commit (payload ``pull_request.base.sha``): a fork's
    #: trust settings are read from the configuration there, not from the fork
    base_sha: str | None = None
    #: the labels that may authorize a fork (None: any of its labels). On
    #: ``pull_request_target`` only the label this event added: a label applied before
    #: the fork's latest push must not authorize code nobody has looked at.
    authorizing: tuple[str, ...] | None = None

    def to_json(self) -> TriggerFlagsDoc:
        return {
            "event": self.event,
            "labels": list(self.labels),
            "cadence": self.cadence,
            "schedule": self.schedule,
            "fork": self.fork,
            "match_all_labels": self.match_all_labels,
            "draft": self.draft,
        }

    @property
    def is_pull_request(self) -> bool:
        return self.event in PR_EVENTS


@dataclass(frozen=True)
class Policy:
    """What a trigger resolved to.

    ``include_labels`` is the set a labelled registration must meet;
    ``requested_labels`` are the labels a PR asked for by name (they keep their
    stages when pruning); ``broad`` disables pruning (nightly and wider cadences,
    scope labels); ``authorized`` says whether ``trusted_only`` stages may run.
    """

    event: Event
    cadence: str
    include_labels: tuple[str, ...]
    requested_labels: tuple[str, ...] = ()
    scope: str | None = None
    admit_nightly: bool = False
    bypass_fastfail: bool = False
    write_baseline: bool = False
    broad: bool = False
    fork: bool = False
    authorized: bool = True
    authorized_by: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # Stages and triggers (#12): the usable raw PR labels (stage label gates match them),
    # whether the PR is a draft, and whether this cadence runs only nightly=True tests.
    pr_labels: tuple[str, ...] = ()
    draft: bool = False
    exact_nightly: bool = False

    def to_json(self) -> PolicyDoc:
        return {
            "event": self.event,
            "cadence": self.cadence,
            "include_labels": list(self.include_labels),
            "requested_labels": list(self.requested_labels),
            "scope": self.scope,
            "admit_nightly": self.admit_nightly,
            "bypass_fastfail": self.bypass_fastfail,
            "write_baseline": self.write_baseline,
            "broad": self.broad,
            "fork": self.fork,
            "authorized": self.authorized,
            "authorized_by": self.authorized_by,
            "notes": list(self.notes),
            "pr_labels": list(self.pr_labels),
            "draft": self.draft,
            "exact_nightly": self.exact_nightly,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Policy:
        return cls(
            event=data["event"],
            cadence=data["cadence"],
            include_labels=tuple(data["include_labels"]),
            requested_labels=tuple(data.get("requested_labels", ())),
            scope=data.get("scope"),
            admit_nightly=bool(data["admit_nightly"]),
            bypass_fastfail=bool(data["bypass_fastfail"]),
            write_baseline=bool(data["write_baseline"]),
            broad=bool(data.get("broad", False)),
            fork=bool(data.get("fork", False)),
            authorized=bool(data.get("authorized", True)),
            authorized_by=data.get("authorized_by"),
            notes=tuple(data.get("notes", ())),
            pr_labels=tuple(data.get("pr_labels", ())),
            draft=bool(data.get("draft", False)),
            exact_nightly=bool(data.get("exact_nightly", False)),
        )


def show(value: str, limit: int = 60) -> str:
    """A safe, short rendering of untrusted text for messages: ``repr`` escapes
    newlines and control characters, and very long values are cut."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…'"


def label_problem(raw: str) -> str | None:
    """Why a raw PR label is unusable (and ignored), or None."""
    if not raw.strip():
        return "is empty"
    if len(raw) > MAX_LABEL_CHARS:
        return f"is {len(raw)} characters long (limit {MAX_LABEL_CHARS})"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in raw):
        return "contains control characters (newline, tab, ...)"
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in raw):
        return "contains a lone surrogate (not text any output can hold)"
    return None


def _cadence_for(config: Config, trigger: Trigger, labels: set[str], notes: list[str],
                 warnings: list[str]) -> str:
    policy = config.policy
    cadences = policy.cadences
    if trigger.cadence is not None:
        if trigger.cadence not in cadences:
            raise UsageError(
                f"unknown cadence {show(trigger.cadence)}; valid: {', '.join(sorted(cadences))}"
            )
        notes.append(f"cadence {trigger.cadence} set explicitly")
        return trigger.cadence
    if trigger.event == "schedule":
        if trigger.schedule is None:
            raise UsageError(
                "a schedule trigger needs its cron string (--schedule CRON, or --github with a "
                "schedule payload)"
            )
        cron = " ".join(trigger.schedule.split())
        mapping = {" ".join(k.split()): v for k, v in policy.schedules.items()}
        if cron not in mapping:
            known = ", ".join(repr(k) for k in sorted(mapping)) or "none configured"
            raise UsageError(
                f"schedule {show(trigger.schedule)} maps to no cadence; add it to "
                f"[tool.testfleet.policy] schedules (known: {known})"
            )
        notes.append(f"schedule {cron!r} -> cadence {mapping[cron]}")
        return mapping[cron]
    if trigger.is_pull_request and policy.nightly_label in labels:
        if "nightly" in cadences:
            notes.append(f"label {policy.nightly_label!r} selects cadence nightly")
            return "nightly"
        warnings.append(f"label {policy.nightly_label!r} ignored: no 'nightly' cadence is "
                        "configured in [tool.testfleet.policy] cadences")
    return "regular"


def authorizing_labels(config: Config, raw_labels: set[str]) -> list[str]:
    """The raw PR labels that authorize a fork for ``trusted_only`` stages (sorted).

    With ``policy.authorize_labels`` set, exactly those. Otherwise only a label that
    selects something: a scope label (``run-ci-all``) or the prefix plus a registered
    label. A prefixed label that names nothing (``run-ci-nosuchlabel``) grants
    nothing, so it must not authorize either. ``config`` is the trusted one (the
    base branch's for a fork), so a fork cannot add the label that authorizes it.
    """
    pconf = config.policy
    if pconf.authorize_labels is not None:
        return sorted(raw_labels & set(pconf.authorize_labels))
    registered = set(config.labels)
    prefix = pconf.label_prefix
    return sorted(
        raw for raw in raw_labels
        if raw in pconf.scope_labels
        or (raw.startswith(prefix) and raw[len(prefix):] in registered)
    )


def resolve_policy(config: Config, trigger: Trigger, *,
                   trust: Config | None = None) -> tuple[Policy, list[str]]:
    """Resolve ``trigger`` against the project's policy rules.

    Returns the policy and the warnings about the trigger (ignored labels and
    the like), which the plan reports verbatim. ``trust`` is the configuration
    that decides a fork's authorization (the base branch's); by default ``config``.
    """
    if trigger.event not in EVENTS:
        raise UsageError(f"unknown event {show(trigger.event)}; valid: {', '.join(EVENTS)}")
    if trigger.schedule is not None and trigger.event != "schedule":
        raise UsageError("--schedule applies only to the schedule event")
    if trigger.labels and not trigger.is_pull_request:
        raise UsageError(
            f"labels apply only to pull_request events, not {trigger.event} "
            "(use --match-all-labels or --cadence to widen a manual run)"
        )
    if trigger.fork and not trigger.is_pull_request:
        raise UsageError("--fork applies only to pull_request events")
    if trigger.draft and not trigger.is_pull_request:
        raise UsageError("--draft applies only to pull_request events")

    pconf = config.policy
    warnings: list[str] = []
    notes: list[str] = []
    registered = set(config.labels)

    raw_ok: list[str] = []
    for raw in trigger.labels:
        problem = label_problem(raw)
        if problem:
            warnings.append(f"PR label {show(raw)} ignored: it {problem}")
        else:
            raw_ok.append(raw)
    raw_set = set(raw_ok)

    requested: set[str] = set()
    scopes: list[tuple[int, str, list[str]]] = []
    workflow = {pconf.nightly_label, pconf.bypass_label, *gate_labels(config)}
    authorize_names = set(pconf.authorize_labels or ())
    if trust is not None:
        authorize_names |= set(trust.policy.authorize_labels or ())
    known = {*(pconf.label_prefix + name for name in registered), *pconf.scope_labels,
             *workflow, *authorize_names}
    ignored: list[str] = []
    for raw in sorted(raw_set):
        if raw in pconf.scope_labels:
            scope = pconf.scope_labels[raw]
            scopes.append((scope.rank, raw, scope.exclude_labels))
        elif raw in workflow or raw in authorize_names:
            continue
        elif raw.startswith(pconf.label_prefix):
            name = raw[len(pconf.label_prefix):]
            if name in registered:
                requested.add(name)
            else:
                warnings.append(
                    f"PR label {show(raw)} grants nothing: {show(name)} is not a registered label"
                    + _did_you_mean(raw, known, pconf.label_prefix)
                )
        elif (hint := closest_label(raw, known, prefix=pconf.label_prefix)) is not None:
            warnings.append(f"PR label {show(raw)} ignored: it is not a CI label "
                            f"(did you mean {hint!r}?)")
        else:
            # the repository's own labels (bug, documentation, ...): not ours, not noise
            ignored.append(raw)
    if ignored:
        notes.append(f"{len(ignored)} PR label(s) that are not CI labels ignored")

    cadence = _cadence_for(config, trigger, raw_set, notes, warnings)
    cconf = pconf.cadences[cadence]
    if cconf.include == "all":
        scopes.append((cconf.rank, f"cadence {cadence}", cconf.exclude_labels))
    if trigger.match_all_labels:
        scopes.append((max([s[0] for s in scopes] + [0]) + 1, "--match-all-labels", []))

    include: set[str] = set()
    scope_name: str | None = None
    if scopes:
        # Highest rank wins; equal ranks resolve to the wider set, then by name.
        _rank, scope_name, excluded = max(scopes, key=lambda s: (s[0], -len(s[2]), s[1]))
        include = registered - set(excluded)
        dropped = sorted(registered & set(excluded))
        notes.append(
            f"scope {scope_name} includes every label"
            + (f" except {', '.join(dropped)}" if dropped else "")
        )
    include |= requested

    bypass = cconf.bypass_fastfail or (trigger.is_pull_request and pconf.bypass_label in raw_set)
    write_baseline = cconf.write_baseline
    if write_baseline and trigger.is_pull_request:
        write_baseline = False
        notes.append("pull requests never write metric baselines (untrusted code)")

    authorized, authorized_by = True, None
    if trigger.is_pull_request and trigger.fork:
        offered = raw_set if trigger.authorizing is None else raw_set & set(trigger.authorizing)
        granting = authorizing_labels(trust if trust is not None else config, offered)
        authorized = bool(granting)
        authorized_by = granting[0] if granting else None
        if not granting and authorizing_labels(trust if trust is not None else config, raw_set):
            notes.append("fork pull request: only a label added by this very event authorizes "
                         "it (a push after the label was added needs the label again)")

    policy = Policy(
        event=trigger.event,
        cadence=cadence,
        include_labels=tuple(sorted(include)),
        requested_labels=tuple(sorted(requested)),
        scope=scope_name,
        admit_nightly=cconf.admit_nightly,
        bypass_fastfail=bypass,
        write_baseline=write_baseline,
        broad=scope_name is not None,
        fork=trigger.fork,
        authorized=authorized,
        authorized_by=authorized_by,
        notes=tuple(notes),
        pr_labels=tuple(sorted(raw_set)) if trigger.is_pull_request else (),
        draft=trigger.draft and trigger.is_pull_request,
        exact_nightly=cconf.admit_nightly and cconf.nightly_split == "exact",
    )
    return policy, warnings


def gate_labels(config: Config) -> set[str]:
    """PR labels the configuration uses as gates (the project-wide required label and every
    stage's ``requires_labels``): workflow labels, not domain-label requests."""
    labels = {label for stage in config.stages.values() for label in stage.requires_labels}
    if config.policy.required_label is not None:
        labels.add(config.policy.required_label)
    return labels


def stage_gate(config: Config, policy: Policy, name: str,
               changed: Sequence[str] | None = None) -> tuple[Reason, str] | None:
    """Why stage ``name`` does not run at all under ``policy``: (reason, detail), or None.

    A stage with variants runs when one of its variants does (each variant may set its
    own ``events``, ``cadences`` and ``run_on_changes``); the planner then leaves out the
    variants whose own gate says no (:func:`lane_gate`). ``changed`` are the paths the
    trigger changed, when known (``run_on_changes``).
    """
    stage = config.stages[name]
    if not stage.variants:
        return lane_gate(config, policy, name, stage, changed)
    gates = [lane_gate(config, policy, name, stage.with_variant(v), changed, v)
             for v in sorted(stage.variants)]
    return None if any(g is None for g in gates) else gates[0]


def lane_gate(config: Config, policy: Policy, name: str, lane: StageConfig,
              changed: Sequence[str] | None = None, variant: str = "") -> tuple[Reason, str] | None:
    """Why one lane (a stage, or a stage as one of its variants runs it) does not run.

    Checked in order: a ``run_on_changes`` entry for this event that a changed path
    matches (the lane then runs whatever its events and cadences say), the lane's
    ``events``, its cadences, a draft pull request, the project-wide required label, the
    stage's own ``requires_labels``. Label and draft gates apply to pull requests only;
    pushes, schedules and manual runs are not gated by labels.
    """
    what = f"stage {name}" + (f" variant {variant}" if variant else "")
    if change_trigger(lane, policy.event, changed) is None:
        why = event_excluded(lane, what, policy.event)
        if why is not None:
            return ("event-excluded", why)
        if lane.cadences is not None and policy.cadence not in lane.cadences:
            return ("cadence-excluded",
                    f"{what} runs only on cadence(s) {', '.join(lane.cadences)}; "
                    f"this run is {policy.cadence}")
    if policy.event not in PR_EVENTS:
        return None
    pconf = config.policy
    spec = config.backend_specs().get(lane.backend)
    gpu = bool(spec and spec.gpu)
    if policy.draft and (pconf.drafts == "skip" or (pconf.drafts == "skip-gpu" and gpu)):
        return ("draft", f"draft pull request; policy.drafts = {pconf.drafts!r} "
                         "(mark it ready for review to run this stage)")
    labels = set(policy.pr_labels)
    required = pconf.required_label
    if required is not None and (gpu or pconf.required_label_scope == "all") \
            and required not in labels:
        return ("label-required",
                f"every pull request needs the label {required!r} before "
                f"{'any GPU stage' if pconf.required_label_scope == 'gpu' else 'any stage'} runs")
    if lane.requires_labels and not labels.intersection(lane.requires_labels):
        wanted = " or ".join(repr(x) for x in lane.requires_labels)
        return ("label-required", f"stage {name} runs on a pull request only with the label "
                                  f"{wanted}")
    return None


def authorization_hint(config: Config) -> str:
    """How a fork PR gets authorized, for messages."""
    labels = config.policy.authorize_labels
    if labels is None:
        return (f"a '{config.policy.label_prefix}<label>' label of a registered label, "
                "or a scope label")
    if not labels:
        return "nothing (policy.authorize_labels is empty)"
    return "one of the labels " + ", ".join(labels)


def _did_you_mean(raw: str, known: set[str], prefix: str) -> str:
    hint = closest_label(raw, known, prefix=prefix)
    return f" (did you mean {hint!r}?)" if hint is not None else ""
