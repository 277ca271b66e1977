"""Table-driven tests of every policy rule in issue #3."""

from __future__ import annotations

from typing import Any

import pytest

from testfleet.errors import UsageError
from testfleet.planning.policy import Trigger, resolve_policy

from .conftest import LABELS, make_config

ALL = frozenset(LABELS)


def minus(*names: str) -> frozenset[str]:
    return ALL - set(names)


PR = "pull_request"

# (id, trigger kwargs, expected policy fields)
CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("push is regular, nothing included", {"event": "push"},
     {"cadence": "regular", "include": frozenset(), "admit_nightly": False,
      "bypass_fastfail": False, "write_baseline": False, "broad": False}),
    ("prefixed label requests the domain label", {"event": PR, "labels": ("run-ci-megatron",)},
     {"cadence": "regular", "include": {"megatron"}, "requested": {"megatron"}, "broad": False}),
    ("pull_request_target reads labels the same way",
     {"event": "pull_request_target", "labels": ("run-ci-fsdp",)}, {"include": {"fsdp"}}),
    ("several labels", {"event": PR, "labels": ("run-ci-megatron", "run-ci-fsdp")},
     {"include": {"megatron", "fsdp"}}),
    ("unprefixed label is ignored", {"event": PR, "labels": ("megatron",)},
     {"include": frozenset(), "warn": "did you mean 'run-ci-megatron'"}),
    ("a repository label that is no CI label is silent", {"event": PR, "labels": ("bug",)},
     {"include": frozenset()}),
    ("unregistered label grants nothing", {"event": PR, "labels": ("run-ci-megatronn",)},
     {"include": frozenset(), "warn": "did you mean 'run-ci-megatron'"}),
    ("nightly cadence via schedule", {"event": "schedule", "schedule": "0 15 * * 0-5"},
     {"cadence": "nightly", "include": minus("long", "ft-long"), "admit_nightly": True,
      "bypass_fastfail": True, "write_baseline": True, "broad": True}),
    ("cron whitespace is normalised", {"event": "schedule", "schedule": " 0  15 * * 0-5 "},
     {"cadence": "nightly"}),
    ("weekly includes every label", {"event": "schedule", "schedule": "0 15 * * 6"},
     {"cadence": "weekly", "include": ALL, "admit_nightly": True, "bypass_fastfail": True,
      "write_baseline": True}),
    ("release is weekly's selection without baselines", {"event": "schedule", "schedule": "0 3 1 * *"},
     {"cadence": "release", "include": ALL, "admit_nightly": True, "bypass_fastfail": True,
      "write_baseline": False}),
    ("run-ci-all widens scope, keeps cadence", {"event": PR, "labels": ("run-ci-all",)},
     {"cadence": "regular", "include": ALL, "admit_nightly": False, "bypass_fastfail": False,
      "broad": True, "scope": "run-ci-all"}),
    ("run-ci-image excludes long and ft", {"event": PR, "labels": ("run-ci-image",)},
     {"include": minus("long", "ft-short", "ft-long"), "broad": True}),
    ("run-ci-all beats run-ci-image", {"event": PR, "labels": ("run-ci-image", "run-ci-all")},
     {"include": ALL, "scope": "run-ci-all"}),
    ("nightly beats run-ci-image", {"event": PR, "labels": ("run-ci-image", "nightly")},
     {"cadence": "nightly", "include": minus("long", "ft-long"), "scope": "cadence nightly"}),
    ("weekly beats nightly-like scope", {"event": "schedule", "schedule": "0 15 * * 6"},
     {"scope": "cadence weekly"}),
    ("run-ci-all beats weekly", {"event": PR, "labels": ("run-ci-all",), "cadence": "weekly"},
     {"include": ALL, "scope": "run-ci-all", "cadence": "weekly"}),
    ("requested label is added back on top of a subtraction",
     {"event": PR, "labels": ("run-ci-image", "run-ci-long")},
     {"include": minus("ft-short", "ft-long"), "requested": {"long"}}),
    ("requested label added back on nightly", {"event": PR, "labels": ("nightly", "run-ci-ft-long")},
     {"include": minus("long")}),
    ("nightly label on a PR selects nightly, no baselines from PR code",
     {"event": PR, "labels": ("nightly",)},
     {"cadence": "nightly", "admit_nightly": True, "bypass_fastfail": True, "write_baseline": False}),
    ("bypass-fastfail label", {"event": PR, "labels": ("bypass-fastfail",)},
     {"cadence": "regular", "bypass_fastfail": True, "include": frozenset()}),
    ("workflow_dispatch is regular with no labels", {"event": "workflow_dispatch"},
     {"cadence": "regular", "include": frozenset()}),
    ("workflow_dispatch --match-all-labels", {"event": "workflow_dispatch", "match_all_labels": True},
     {"cadence": "regular", "include": ALL, "broad": True, "admit_nightly": False}),
    ("workflow_call with explicit cadence", {"event": "workflow_call", "cadence": "nightly"},
     {"cadence": "nightly", "write_baseline": True}),
    ("explicit cadence wins over schedule", {"event": "schedule", "schedule": "0 15 * * 0-5",
                                             "cadence": "release"},
     {"cadence": "release", "write_baseline": False}),
    ("explicit cadence wins over nightly label", {"event": PR, "labels": ("nightly",),
                                                  "cadence": "regular"},
     {"cadence": "regular", "admit_nightly": False}),
    ("fork without labels is not authorized", {"event": PR, "fork": True},
     {"authorized": False}),
    # issue #17: a label that grants nothing must not authorize either
    ("fork with a run-ci-* label that names nothing is not authorized",
     {"event": PR, "fork": True, "labels": ("run-ci-unknown-thing",)},
     {"authorized": False, "authorized_by": None, "warn": "grants nothing"}),
    ("fork with a registered label is authorized", {"event": PR, "fork": True,
                                                     "labels": ("run-ci-megatron",)},
     {"authorized": True, "authorized_by": "run-ci-megatron"}),
    ("fork with a scope label is authorized", {"event": PR, "fork": True,
                                               "labels": ("run-ci-all", "run-ci-nosuchlabel")},
     {"authorized": True, "authorized_by": "run-ci-all", "warn": "grants nothing"}),
    ("fork with only a workflow label is not authorized", {"event": PR, "fork": True,
                                                           "labels": ("nightly",)},
     {"authorized": False}),
    ("same-repo PR is authorized", {"event": PR}, {"authorized": True}),
    ("label with newline ignored", {"event": PR, "labels": ("run-ci-megatron\nmatrix=x",)},
     {"include": frozenset(), "warn": "control characters"}),
    ("very long label ignored", {"event": PR, "labels": ("run-ci-" + "a" * 10_000,)},
     {"include": frozenset(), "warn": "characters long"}),
    ("template-looking label grants nothing", {"event": PR, "labels": ("run-ci-${{ secrets.X }}",)},
     {"include": frozenset(), "warn": "grants nothing"}),
    ("quote label grants nothing", {"event": PR, "labels": ('run-ci-"; rm -rf /',)},
     {"include": frozenset(), "warn": "grants nothing"}),
]


@pytest.mark.parametrize(("trigger", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_policy_rule(trigger: dict[str, Any], expected: dict[str, Any]) -> None:
    policy, warnings = resolve_policy(make_config(), Trigger(**trigger))
    for key, want in expected.items():
        if key == "include":
            assert set(policy.include_labels) == set(want)
        elif key == "requested":
            assert set(policy.requested_labels) == set(want)
        elif key == "warn":
            assert any(want in w for w in warnings), warnings
            assert all("\n" not in w and len(w) < 400 for w in warnings)
        else:
            assert getattr(policy, key) == want, key
    if "warn" not in expected:
        assert warnings == []


ERRORS: list[tuple[str, dict[str, Any], str]] = [
    ("unknown cron", {"event": "schedule", "schedule": "5 4 * * *"}, "maps to no cadence"),
    ("schedule without cron", {"event": "schedule"}, "needs its cron string"),
    ("unknown cadence", {"cadence": "hourly"}, "unknown cadence 'hourly'"),
    ("unknown event", {"event": "issue_comment"}, "unknown event"),
    ("labels on push", {"event": "push", "labels": ("run-ci-megatron",)}, "only to pull_request"),
    ("fork on schedule", {"event": "schedule", "schedule": "0 15 * * 6", "fork": True},
     "--fork applies only"),
    ("cron on push", {"event": "push", "schedule": "0 15 * * 6"}, "--schedule applies only"),
]


@pytest.mark.parametrize(("trigger", "message"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_policy_errors(trigger: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        resolve_policy(make_config(), Trigger(**trigger))


def test_configured_names_are_honoured() -> None:
    config = make_config(policy={
        "label_prefix": "ci:",
        "nightly_label": "ci-nightly",
        "bypass_label": "ci-nofail",
        "scope_labels": {"ci:everything": {"rank": 9}},
        "authorize_labels": ["ok-to-test"],
    })
    policy, warnings = resolve_policy(config, Trigger(
        event=PR, fork=True, labels=("ci:megatron", "ci-nightly", "ci-nofail", "run-ci-fsdp")))
    assert policy.cadence == "nightly"
    assert policy.bypass_fastfail
    assert "megatron" in policy.requested_labels
    assert not policy.authorized  # only ok-to-test authorizes here
    assert any("run-ci-fsdp" in w for w in warnings)
    policy, _ = resolve_policy(config, Trigger(event=PR, fork=True, labels=("ok-to-test",)))
    assert policy.authorized
    policy, _ = resolve_policy(config, Trigger(event=PR, labels=("ci:everything",)))
    assert set(policy.include_labels) == ALL


def test_unknown_cron_lists_known_schedules() -> None:
    with pytest.raises(UsageError) as info:
        resolve_policy(make_config(), Trigger(event="schedule", schedule="* * * * *"))
    assert "'0 15 * * 6'" in str(info.value)


def test_policy_json_round_trip() -> None:
    from testfleet.planning.policy import Policy

    policy, _ = resolve_policy(make_config(), Trigger(event=PR, labels=("run-ci-all", "nightly")))
    assert Policy.from_json(policy.to_json()) == policy


def test_nightly_label_without_nightly_cadence_warns() -> None:
    config = make_config(policy={"cadences": {"regular": {}, "weekly": {"include": "all"}}})
    policy, warnings = resolve_policy(config, Trigger(event=PR, labels=("nightly",)))
    assert policy.cadence == "regular"
    assert any("no 'nightly' cadence" in w for w in warnings)
