"""The comparison itself, on hand-made statuses of a real (in-memory) plan."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from testfleet.config import Project, validate_config
from testfleet.planning import make_plan
from testfleet.planning.model import Plan
from testfleet.planning.request import PlanRequest
from testfleet.reconcile.compare import reconcile
from testfleet.reconcile.render import render_markdown, render_text, to_json
from testfleet.reconcile.status import FileStatus, JobStatus
from testfleet.registry.model import Registration
from testfleet.schemas.outputs import validate_output


def _plan(files: int = 5, shards: int = 2) -> Plan:
    config = validate_config({"stages": {"s": {"backend": "cpu", "shards": shards},
                                         "t": {"backend": "cpu"}}})
    project = Project(root=Path("/nonexistent"), config_path=Path("testfleet.toml"),
                      config=config, raw_config_text="")
    regs = [Registration(f"tests/test_{i}.py", "cpu", "s", 10 + i) for i in range(files)]
    regs.append(Registration("tests/test_t.py", "cpu", "t", 5))
    return make_plan(project, regs, PlanRequest())


def _status(plan: Plan, job_id: str, **changes: object) -> JobStatus:
    job = plan.job(job_id)
    base = JobStatus(plan_digest=plan.digest, job_id=job.id, stage=job.stage, variant="",
                     shard=job.shard, shards=job.shards, run_id=f"r-{job.id}", ci_run_id="1",
                     empty=False, complete=True, exit_status=0,
                     files=tuple(FileStatus(t.file, job.lane, "PASSED", 1) for t in job.tests),
                     jobs=(job.id,), source=f"{job.id}.json")
    return replace(base, **changes)  # type: ignore[arg-type]


def _all(plan: Plan) -> list[JobStatus]:
    return [_status(plan, j.id) for j in plan.jobs]


def test_every_job_and_file_once_is_ok_and_validates() -> None:
    plan = _plan()
    r = reconcile(plan, _all(plan))
    assert r.ok and r.executed == r.planned_files == 6 and r.outcomes == {"PASSED": 6}
    validate_output("reconcile", to_json(r))
    assert "exactly once" in render_text(r) and "✅" in render_markdown(r)


def test_a_job_that_never_reports_is_named_with_its_files() -> None:
    plan = _plan()
    gone = plan.jobs[1]
    r = reconcile(plan, [s for s in _all(plan) if s.job_id != gone.id])
    assert not r.ok
    assert [p.job_id for p in r.missing_jobs] == [gone.id]
    assert {p.file for p in r.missing} == {t.file for t in gone.tests}
    text = render_text(r)
    assert gone.id in text and "never reported" in text
    doc = to_json(r)
    validate_output("reconcile", doc)
    assert doc["ok"] is False and doc["missing_jobs"][0]["job_id"] == gone.id


def test_a_file_run_by_two_jobs_is_duplicated_and_moved() -> None:
    plan = _plan()
    first, second = plan.jobs[0], plan.jobs[1]
    stolen = FileStatus(first.tests[0].file, "s", "PASSED", 1)
    statuses = [_status(plan, first.id),
                _status(plan, second.id, files=(*_status(plan, second.id).files, stolen)),
                *[_status(plan, j.id) for j in plan.jobs[2:]]]
    r = reconcile(plan, statuses)
    assert [(p.file, p.jobs) for p in r.duplicated] == [(stolen.file, (first.id, second.id))]
    assert [(p.file, p.planned_job) for p in r.moved] == [(stolen.file, first.id)]
    assert not r.ok


def test_one_job_reported_twice_in_one_attempt_runs_its_files_twice() -> None:
    plan = _plan()
    twice = _status(plan, plan.jobs[0].id)
    r = reconcile(plan, [*_all(plan), replace(twice, run_id="again", source="again.json")])
    assert {p.file for p in r.duplicated} == {t.file for t in plan.jobs[0].tests}


def test_a_ci_retry_supersedes_the_failed_attempt() -> None:
    plan = _plan()
    job = plan.jobs[0]
    failed = _status(plan, job.id, ci_attempt=1, exit_status=1,
                     files=tuple(replace(f, outcome="FAILED") for f in _status(plan, job.id).files))
    retried = _status(plan, job.id, ci_attempt=2)
    r = reconcile(plan, [failed, retried, *[_status(plan, j.id) for j in plan.jobs[1:]]])
    assert r.ok and [p.job_id for p in r.superseded] == [job.id]
    assert r.outcomes == {"PASSED": 6}


def test_unplanned_other_plan_incomplete_and_not_run() -> None:
    plan = _plan()
    job = plan.jobs[0]
    files = _status(plan, job.id).files
    cut = _status(plan, job.id, complete=False, exit_status=1, reason="fast-fail",
                  files=(files[0], *(replace(f, outcome="NOT_RUN", attempts=0) for f in files[1:])))
    stranger = _status(plan, plan.jobs[1].id, plan_digest="sha256:" + "0" * 64,
                       files=(*_status(plan, plan.jobs[1].id).files,
                              FileStatus("tests/test_new.py", "s", "FAILED", 1)))
    r = reconcile(plan, [cut, stranger, *[_status(plan, j.id) for j in plan.jobs[2:]]])
    assert [p.job_id for p in r.incomplete] == [job.id]
    assert {p.file for p in r.not_run} == {f.file for f in files[1:]}
    assert [p.job_id for p in r.other_plan] == [plan.jobs[1].id]
    assert [p.file for p in r.unplanned] == ["tests/test_new.py"]
    validate_output("reconcile", to_json(r))


def test_an_empty_shard_is_accepted_only_where_the_plan_has_one() -> None:
    plan = _plan(files=2, shards=4)
    assert {j.shards for j in plan.jobs if j.stage == "s"} == {4}
    empty = JobStatus(plan_digest=plan.digest, job_id="s-4-of-4", stage="s", variant="", shard=4,
                      shards=4, run_id="r", ci_run_id=None, empty=True, complete=True,
                      exit_status=0, source="4.json")
    r = reconcile(plan, [*_all(plan), empty, replace(empty, job_id="s-3-of-4", shard=3)])
    assert r.ok and [p.job_id for p in r.empty_shards] == ["s-4-of-4", "s-3-of-4"]
    wrong = replace(empty, job_id="s-1-of-4", shard=1)  # shard 1 has files
    r = reconcile(plan, [*_all(plan), wrong])
    assert not r.ok and [p.job_id for p in r.unplanned_jobs] == ["s-1-of-4"]


@pytest.mark.parametrize("with_jobs", [True, False])
def test_never_green_on_zero(with_jobs: bool) -> None:
    plan = _plan()
    if with_jobs:  # planned tests, and every status says it ran nothing: red
        r = reconcile(plan, [_status(plan, j.id, files=()) for j in plan.jobs])
        assert not r.ok and len(r.missing) == 6 and r.executed == 0
        assert not reconcile(plan, []).ok
    else:  # nothing planned on purpose: green only when nothing ran either
        nothing = replace(plan, jobs=())
        assert reconcile(nothing, []).ok
        stray = _status(plan, plan.jobs[0].id)
        assert not reconcile(nothing, [stray]).ok


def test_hostile_names_stay_one_line_in_every_form() -> None:
    plan = _plan()
    evil = FileStatus("tests/x.py\n::error::pwned|<img src=x>", "s", "FAILED", 1)
    statuses = [*_all(plan)]
    statuses[0] = replace(statuses[0], files=(*statuses[0].files, evil))
    r = reconcile(plan, statuses)
    text = render_text(r)
    assert "\n::error::pwned" not in text and "\\n::error::pwned" in text
    md = render_markdown(r)
    assert "<img" not in md.replace("\\<img", "") and "\n::error" not in md
    from testfleet.reconcile.render import github_annotations

    for line in github_annotations(r):
        assert "\n" not in line and line.startswith("::error title=testfleet reconcile::")


def _impossible(plan: Plan, forged: JobStatus) -> list[str]:
    """The details of the ``impossible`` problems when ``forged`` replaces its job's status;
    every other job reports correctly."""
    r = reconcile(plan, [forged, *[_status(plan, j.id) for j in plan.jobs if j.id != forged.job_id]])
    assert not r.ok and [p.job_id for p in r.impossible] == [forged.job_id]
    validate_output("reconcile", to_json(r))
    return [p.detail for p in r.impossible]


@pytest.mark.parametrize(("change", "detail"), [
    ({"stage": "s"}, "stage 's', but job t-1-of-1 is of 't'"),
    ({"variant": "gpu"}, "stage 't.gpu', but job t-1-of-1 is of 't'"),
    ({"shard": 2, "shards": 2}, "shard 2/2, but job t-1-of-1 is shard 1 of 1"),
    ({"shard": 0}, "shard 0/1, but job t-1-of-1 is shard 1 of 1"),
    ({"jobs": ("s-1-of-2",)}, "job id 't-1-of-1', but it accounts for job 's-1-of-2'"),
    ({"complete": True, "exit_status": -1}, "complete, with the placeholder's exit status -1"),
    ({"started_at": 10.0, "finished_at": 5.0}, "finished before it started"),
])
def test_a_status_field_its_job_cannot_have_is_impossible(change: dict[str, object],
                                                          detail: str) -> None:
    plan = _plan()
    assert any(detail in d for d in _impossible(plan, _status(plan, "t-1-of-1", **change)))


@pytest.mark.parametrize(("outcome", "attempts", "runner", "detail"), [
    ("PASSED", 0, "testfleet run", "tests/test_t.py: PASSED after 0 attempt(s)"),
    ("FAILED", 0, "pytest", "tests/test_t.py: FAILED after 0 attempt(s)"),
    ("FLAKY", 1, "testfleet run", "FLAKY (passed on a retry) after 1 attempt(s)"),
    ("FAILED", 11, "testfleet run", "11 attempts; no run makes more than 10"),
    ("PASSED", 2, "pytest", "2 attempts under pytest, which makes one"),
    ("NOT_RUN", 0, "testfleet run", "NOT_RUN in a status that says it is complete"),
])
def test_a_file_entry_no_run_writes_is_impossible(outcome: str, attempts: int, runner: str,
                                                  detail: str) -> None:
    plan = _plan()
    forged = _status(plan, "t-1-of-1", runner=runner,
                     files=(FileStatus("tests/test_t.py", "t", outcome, attempts),))  # type: ignore[arg-type]
    assert any(detail in d for d in _impossible(plan, forged))


def test_a_file_entry_of_another_lane_or_quarantine_is_impossible() -> None:
    plan = _plan()
    lane = _status(plan, "t-1-of-1", files=(FileStatus("tests/test_t.py", "s", "PASSED", 1),))
    assert "tests/test_t.py: reported for lane 's', the status is of 't'" in _impossible(plan, lane)[0]
    quarantined = _status(plan, "t-1-of-1",
                          files=(FileStatus("tests/test_t.py", "t", "FAILED", 1, True),))
    assert "reported quarantined, the plan does not quarantine it" in _impossible(plan, quarantined)[0]


def test_a_whole_stage_status_accounts_for_every_shard_of_one_lane() -> None:
    plan = _plan()
    shards = [j for j in plan.jobs if j.stage == "s"]
    whole = JobStatus(plan_digest=plan.digest, job_id="s-all-2", stage="s", variant="", shard=0,
                      shards=2, run_id="r", ci_run_id=None, empty=False, complete=True,
                      exit_status=0, jobs=tuple(j.id for j in shards), source="all.json",
                      files=tuple(FileStatus(t.file, "s", "PASSED", 1)
                                  for j in shards for t in j.tests))
    t_job = _status(plan, "t-1-of-1")
    assert reconcile(plan, [whole, t_job]).ok
    r = reconcile(plan, [replace(whole, shard=1), t_job])
    assert [p.detail for p in r.impossible] == ["shard 1/2, but job s-1-of-2 is every shard of 2"]
    r = reconcile(plan, [replace(whole, job_id="s-all-3"), t_job])
    assert "a whole-stage status of s is 's-all-2'" in r.impossible[0].detail
    mixed = replace(whole, jobs=(shards[0].id, "t-1-of-1"))
    assert "one status is of one stage" in reconcile(plan, [mixed]).impossible[0].detail


def test_a_status_of_another_plan_is_judged_by_its_state_only() -> None:
    """Its stage and shard describe that plan's jobs (``other_plan`` already fails it), so
    only what no status can say is added: a refused job's status is one problem, not two."""
    plan = _plan()
    refused = _status(plan, "t-1-of-1", plan_digest="", shard=0, shards=0, files=(),
                      complete=False, exit_status=2, reason="refused: x")
    r = reconcile(plan, [refused, *[_status(plan, j.id) for j in plan.jobs[:2]]])
    assert r.other_plan and not r.impossible


def test_a_superseded_attempt_is_checked_too() -> None:
    plan = _plan()
    forged = _status(plan, "t-1-of-1", ci_attempt=1, stage="s")
    r = reconcile(plan, [forged, _status(plan, "t-1-of-1", ci_attempt=2),
                         *[_status(plan, j.id) for j in plan.jobs[:2]]])
    assert r.superseded and [p.source for p in r.impossible] == ["t-1-of-1.json"]


@pytest.mark.parametrize("digits", [21, 5000, 100_000])
def test_a_status_integer_longer_than_any_field_is_refused_before_conversion(digits: int) -> None:
    """Whatever the interpreter's int-string limit (lifted here), the number is refused by
    its length, never converted."""
    import sys

    from testfleet.errors import UsageError
    from testfleet.reconcile.status import decode_status

    limit = getattr(sys, "get_int_max_str_digits", lambda: None)()
    if limit is not None:
        sys.set_int_max_str_digits(0)
    try:
        with pytest.raises(UsageError, match=f"an integer of {digits} digits"):
            decode_status(b'{"shard": -' + b"9" * digits + b"}", "s.json")
    finally:
        if limit is not None:
            sys.set_int_max_str_digits(limit)
    assert decode_status(b'{"shard": ' + b"9" * 20 + b"}", "s.json") == {"shard": 10**20 - 1}
