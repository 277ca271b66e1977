"""When a stage or one variant runs beyond cadences and labels (testfleet.config.triggers):
per-event stage sets, changed-path triggers, a variant's own cadences, the nightly split
per stage, per-event needs, path-only files run by a stage, and a registration disabled
on one runner class. Each rule positive and negative, with the fate every registration
gets and the config errors that name their key."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from testfleet.config import validate_config
from testfleet.errors import ConfigError
from testfleet.planning import make_plan
from testfleet.planning.changes import ChangeSet
from testfleet.planning.model import Plan
from testfleet.planning.planner import stage_waves
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest
from testfleet.registry.model import Registration

from .conftest import make_project

SCHEDULES = {"0 15 * * *": "nightly", "0 11 * * *": "regular"}


def config(stages: dict[str, Any], **extra: Any) -> Any:
    return validate_config({"stages": stages, "backends": {"cuda": {
        "markers": ["register_cuda_ci"], "labels_required": False}},
        "policy": {"schedules": SCHEDULES}, **extra})


def reg(file: str, suite: str, *, backend: str = "cuda", nightly: bool = False,
        disabled: str | None = None, disabled_on: tuple[str, ...] = ()) -> Registration:
    return Registration(file=file, backend=backend, suite=suite, est_time=60, nightly=nightly,
                        disabled=disabled, disabled_on=disabled_on)


def plan(stages: dict[str, Any], regs: list[Registration], trigger: Trigger,
         changed: tuple[str, ...] | None = None) -> Plan:
    changes = ChangeSet(paths=changed, source="test") if changed is not None else None
    return make_plan(make_project(config(stages)), regs,
                     PlanRequest(trigger=trigger, changes=changes))


def fates(p: Plan) -> dict[tuple[str, str], str]:
    out = {(s.file, s.variant): s.reason for s in p.skipped}
    out.update({(t.file, j.variant): "job" for j in p.jobs for t in j.tests})
    return out


PUSH, PR = Trigger(event="push"), Trigger(event="pull_request")
NIGHTLY = Trigger(event="schedule", schedule="0 15 * * *")
DISPATCH = Trigger(event="workflow_dispatch")


# -- events ----------------------------------------------------------------------------

def test_a_stage_runs_only_on_its_events() -> None:
    stages = {"pr-only": {"backend": "cuda", "events": ["pull_request", "schedule"]}}
    regs = [reg("t/test_a.py", "pr-only")]
    assert fates(plan(stages, regs, PR))[("t/test_a.py", "")] == "job"
    p = plan(stages, regs, PUSH)
    assert fates(p)[("t/test_a.py", "")] == "event-excluded"
    summary = p.stages[0]
    assert summary.status == "excluded" and not summary.hole
    assert "pull_request, schedule" in summary.reason and "push" in summary.reason


def test_run_on_changes_adds_a_trigger_only_when_a_changed_path_matches() -> None:
    """The nightly suite that also runs on pushes touching version.py."""
    stages = {"nightly-1-gpu": {
        "backend": "cuda", "cadences": ["nightly"], "registrations": "nightly",
        "run_on_changes": [{"event": "push", "paths": ["python/pkg/version.py"]}]}}
    regs = [reg("t/test_n.py", "nightly-1-gpu", nightly=True)]
    assert fates(plan(stages, regs, PUSH, changed=("python/pkg/version.py",))) == {
        ("t/test_n.py", ""): "job"}
    assert fates(plan(stages, regs, PUSH, changed=("python/pkg/other.py",))) == {
        ("t/test_n.py", ""): "cadence-excluded"}
    assert fates(plan(stages, regs, PUSH)) == {("t/test_n.py", ""): "cadence-excluded"}  # no diff
    # the entry is for pushes: a pull request touching the file gains nothing
    assert fates(plan(stages, regs, PR, changed=("python/pkg/version.py",))) == {
        ("t/test_n.py", ""): "cadence-excluded"}
    assert fates(plan(stages, regs, NIGHTLY)) == {("t/test_n.py", ""): "job"}


def test_no_event_of_its_own_runs_only_on_matching_changes() -> None:
    """``events = []``: a workflow that runs only on pushes touching some paths."""
    stages = {"gateway": {"backend": "cuda", "events": [],
                          "run_on_changes": [{"event": "push", "paths": ["sgl-model-gateway/**"]}]}}
    regs = [reg("t/test_g.py", "gateway")]
    assert fates(plan(stages, regs, PUSH, changed=("sgl-model-gateway/src/main.rs",))) == {
        ("t/test_g.py", ""): "job"}
    for trigger in (PUSH, PR, NIGHTLY, DISPATCH):
        assert fates(plan(stages, regs, trigger)) == {("t/test_g.py", ""): "event-excluded"}


# -- a variant's own triggers ------------------------------------------------------------

IMAGES = {"stage-b-amd": {"backend": "cuda", "variants": {
    "rocm700": {"runs_on": ["linux-mi325"]},
    "rocm720": {"runs_on": ["linux-mi325"], "events": ["schedule", "workflow_dispatch"]}}}}


def test_a_variant_on_a_cron_only_is_left_out_of_pull_requests() -> None:
    regs = [reg("t/test_b.py", "stage-b-amd")]
    p = plan(IMAGES, regs, PR)
    assert fates(p) == {("t/test_b.py", "rocm700"): "job",
                        ("t/test_b.py", "rocm720"): "event-excluded"}
    lanes = {s.variant: s for s in p.stages}
    assert lanes["rocm720"].status == "excluded" and not lanes["rocm720"].hole
    assert "variant rocm720 runs only on schedule, workflow_dispatch" in lanes["rocm720"].reason
    assert fates(plan(IMAGES, regs, NIGHTLY)) == {("t/test_b.py", "rocm700"): "job",
                                                  ("t/test_b.py", "rocm720"): "job"}


def test_a_variant_can_run_where_its_stage_does_not() -> None:
    stages = {"s": {"backend": "cuda", "cadences": ["nightly"], "variants": {
        "nightly-image": {}, "pr-image": {"cadences": ["regular"]}}}}
    regs = [reg("t/test_s.py", "s")]
    assert fates(plan(stages, regs, PR)) == {("t/test_s.py", "nightly-image"): "cadence-excluded",
                                             ("t/test_s.py", "pr-image"): "job"}
    assert fates(plan(stages, regs, NIGHTLY)) == {("t/test_s.py", "nightly-image"): "job",
                                                  ("t/test_s.py", "pr-image"): "cadence-excluded"}


# -- the nightly split per stage ----------------------------------------------------------

SPLIT = {"per-commit": {"backend": "cuda", "registrations": "per-commit"},
         "nightly-suite": {"backend": "cuda", "registrations": "nightly"},
         "cadence-decides": {"backend": "cuda"}}
SPLIT_REGS = [reg("t/test_pc.py", "per-commit"), reg("t/test_pc_n.py", "per-commit", nightly=True),
              reg("t/test_ns.py", "nightly-suite", nightly=True),
              reg("t/test_ns_pc.py", "nightly-suite"),
              reg("t/test_cd.py", "cadence-decides"),
              reg("t/test_cd_n.py", "cadence-decides", nightly=True)]


@pytest.mark.parametrize("trigger", [PUSH, NIGHTLY, DISPATCH], ids=["push", "nightly", "dispatch"])
def test_a_stage_pinned_to_one_side_keeps_it_on_every_trigger(trigger: Trigger) -> None:
    got = fates(plan(SPLIT, SPLIT_REGS, trigger))
    assert got[("t/test_pc.py", "")] == "job"
    assert got[("t/test_pc_n.py", "")] == "nightly-only"
    assert got[("t/test_ns.py", "")] == "job"
    assert got[("t/test_ns_pc.py", "")] == "per-commit-only"
    # without the key the cadence decides, as before
    nightly = trigger is NIGHTLY
    assert got[("t/test_cd_n.py", "")] == ("job" if nightly else "nightly-only")
    assert got[("t/test_cd.py", "")] == "job"


def test_the_fate_names_the_stage_key() -> None:
    p = plan(SPLIT, SPLIT_REGS, PUSH)
    detail = next(s.detail for s in p.skipped if s.file == "t/test_ns_pc.py")
    assert 'registrations = "nightly"' in detail and "nightly-suite" in detail


# -- per-event needs ------------------------------------------------------------------------

def test_needs_on_applies_to_its_event_only() -> None:
    stages = {"a": {"backend": "cuda"},
              "b": {"backend": "cuda", "needs_on": {"pull_request": ["a"]}}}
    regs = [reg("t/test_a.py", "a"), reg("t/test_b.py", "b")]
    cfg = config(stages)
    assert stage_waves(cfg, "pull_request") == {"a": 0, "b": 1}
    assert stage_waves(cfg, "schedule") == {"a": 0, "b": 0}
    assert stage_waves(cfg) == {"a": 0, "b": 1}  # a workflow written once orders for any event
    job_b = next(j for j in plan(stages, regs, PR).jobs if j.stage == "b")
    assert (job_b.needs, job_b.wave) == (("a",), 1)
    job_b = next(j for j in plan(stages, regs, NIGHTLY).jobs if j.stage == "b")
    assert (job_b.needs, job_b.wave) == ((), 0)


def test_needs_on_replaces_needs_for_its_event() -> None:
    stages = {"a": {"backend": "cuda"}, "c": {"backend": "cuda"},
              "b": {"backend": "cuda", "needs": ["c"], "needs_on": {"schedule": []}}}
    cfg = config(stages)
    assert stage_waves(cfg, "push")["b"] == 1 and stage_waves(cfg, "schedule")["b"] == 0


# -- path-only files run by a stage ------------------------------------------------------------

def test_a_stage_runs_the_path_only_files_it_names_on_its_cadence() -> None:
    stages = {"npu-by-path": {"backend": "npu", "cadences": ["nightly"],
                              "files": ["test/ascend/**/test_*.py"]}}
    extra = {"backends": {"npu": {"markers": ["register_npu_ci"], "labels_required": False}}}
    cfg = validate_config({"stages": stages, "policy": {"schedules": SCHEDULES}, **extra})
    regs = [reg("test/ascend/acc/test_a.py", "", backend="npu"),
            reg("test/other/test_b.py", "", backend="npu")]
    nightly = make_plan(make_project(cfg), regs, PlanRequest(trigger=NIGHTLY))
    assert fates(nightly) == {("test/ascend/acc/test_a.py", ""): "job",
                              ("test/other/test_b.py", ""): "path-only"}
    push = make_plan(make_project(cfg), regs, PlanRequest(trigger=PUSH))
    assert fates(push) == {("test/ascend/acc/test_a.py", ""): "cadence-excluded",
                           ("test/other/test_b.py", ""): "path-only"}


# -- disabled on one runner class -------------------------------------------------------------

def test_a_registration_disabled_on_one_runner_class_runs_on_the_others() -> None:
    stages = {"stage-b-amd": {"backend": "cuda", "variants": {
        "mi325": {"runs_on": ["linux-mi325-gpu-1"]},
        "mi35x": {"runs_on": ["linux-mi35x-gpu-1"]}}}}
    regs = [reg("t/test_oom.py", "stage-b-amd", disabled="OOM on MI35x, #2301",
                disabled_on=("*mi35*",)),
            reg("t/test_ok.py", "stage-b-amd")]
    p = plan(stages, regs, PUSH)
    assert fates(p) == {("t/test_oom.py", "mi325"): "job", ("t/test_oom.py", "mi35x"): "disabled",
                        ("t/test_ok.py", "mi325"): "job", ("t/test_ok.py", "mi35x"): "job"}
    detail = next(s.detail for s in p.skipped if s.file == "t/test_oom.py")
    assert "OOM on MI35x, #2301" in detail and "linux-mi35x-gpu-1" in detail
    counts = {s.variant: s.counts for s in p.stages}
    assert (counts["mi325"]["enabled"], counts["mi35x"]["enabled"]) == (2, 1)


def test_a_stage_whose_runners_match_disables_it_there_only() -> None:
    stages = {"mi35x": {"backend": "cuda", "runs_on": ["linux-mi35x"]},
              "mi325": {"backend": "cuda", "runs_on": ["linux-mi325"]}}
    regs = [reg("t/test_x.py", "mi35x", disabled="flaky", disabled_on=("*mi35*",)),
            reg("t/test_x.py", "mi325", disabled="flaky", disabled_on=("*mi35*",))]
    p = plan(stages, regs, PUSH)
    assert {(s.file, s.suite): s.reason for s in p.skipped} == {("t/test_x.py", "mi35x"): "disabled"}
    assert [j.stage for j in p.jobs] == ["mi325"]
    hole = next(s for s in p.stages if s.name == "mi35x")
    assert hole.status == "empty" and hole.hole
    # a registration disabled everywhere stays disabled everywhere
    everywhere = [replace(r, disabled_on=()) for r in regs]
    assert not plan(stages, everywhere, PUSH).jobs


# -- validation -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("stage", "key", "words"), [
    ({"events": ["pushh"]}, "stages.s.events.0", "Input should be"),
    ({"events": ["push", "push"]}, "stages.s.events", "more than once"),
    ({"run_on_changes": [{"event": "push", "paths": ["../x.py"]}]},
     "stages.s.run_on_changes.0.paths", "relative path"),
    ({"run_on_changes": [{"event": "push", "paths": []}]}, "stages.s.run_on_changes.0.paths",
     "at least 1"),
    ({"registrations": "sometimes"}, "stages.s.registrations", "Input should be"),
    ({"needs_on": {"push": ["nope"]}}, "stages.s.needs_on.push", "unknown stage 'nope'"),
    ({"needs_on": {"push": ["s"]}}, "stages.s.needs_on.push", "cannot need itself"),
    ({"needs_on": {"tuesday": []}}, "stages.s.needs_on.tuesday.[key]", "Input should be"),
    ({"files": ["/etc/passwd"]}, "stages.s.files", "relative path"),
    ({"variants": {"v": {"cadences": ["nightlyy"]}}}, "stages.s.variants.v.cadences",
     "did you mean 'nightly'"),
    ({"variants": {"v": {"needs_on": {}}}}, "stages.s.variants.v.needs_on", "unknown key"),
])
def test_bad_trigger_keys_name_their_key(stage: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as exc:
        config({"s": {"backend": "cuda", **stage}, "t": {"backend": "cuda"}})
    assert any(f.key == key and words in f.message for f in exc.value.findings), exc.value.findings


def test_a_cycle_closed_by_needs_on_is_reported() -> None:
    with pytest.raises(ConfigError) as exc:
        config({"a": {"backend": "cuda", "needs": ["b"]},
                "b": {"backend": "cuda", "needs_on": {"schedule": ["a"]}}})
    assert any("on schedule, 'needs_on' forms a cycle" in f.message for f in exc.value.findings)


def test_disabled_on_runners_must_name_a_declared_list_keyword() -> None:
    with pytest.raises(ConfigError) as exc:
        config({"s": {"backend": "cuda"}}, markers={"*": {
            "keywords": {"disabled_on_runners": "str"}, "disabled_on_runners": "disabled_on_runners"}})
    assert any(f.key == "markers.*" and 'declared as "list[str]"' in f.message
               for f in exc.value.findings)


# -- dormant stages in plan output ------------------------------------------------------------

def test_dormant_stages_are_printed_once_per_reason() -> None:
    """A tree adopted with many stages no job runs: the table and Markdown name each reason
    once with its stages, the warnings too; every dormant stage is still named."""
    from testfleet.integrations.plan_formats import render_markdown, render_table

    reason = "no job of the existing CI (pr-test.yml) runs this stage; remove this line to schedule it"
    stages = {f"nightly-{i}": {"backend": "cuda", "disabled": reason} for i in range(12)}
    stages["live"] = {"backend": "cuda"}
    regs = [reg(f"t/test_{i}.py", f"nightly-{i}") for i in range(12)] + [reg("t/test_l.py", "live")]
    p = plan(stages, regs, PUSH)
    table = render_table(p, width=120)
    assert table.count("remove this line to schedule it") == 1
    assert "dormant (12, nothing scheduled, each a coverage hole): nightly-0, nightly-1," in table
    assert all(f"nightly-{i}" in table for i in range(12))
    markdown = render_markdown(p)  # once with the holes, once in the warnings
    assert markdown.count("remove this line to schedule it") == 2
    assert [w for w in p.warnings if "dormant" in w] == [
        "coverage hole: 12 dormant stages have no enabled registrations ("
        + ", ".join(sorted(f"nightly-{i} (cuda)" for i in range(12))) + f"): each is dormant: {reason}"]
    assert len(table.splitlines()) < 20
