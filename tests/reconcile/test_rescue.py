"""The rescue wave (#40): which planned files are rescued, the rescue file's boundary, and
the reconcile after the rescue, on hand-made statuses of a real (in-memory) plan."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from testfleet.errors import UsageError
from testfleet.planning.model import Plan
from testfleet.reconcile.compare import reconcile, rescue_covers
from testfleet.reconcile.render import render_text, to_json
from testfleet.reconcile.rescue import (
    SUFFIX,
    Rescue,
    load_rescue,
    require_rescue,
    rescue_bytes,
    rescue_wave,
    stage_matrices,
)
from testfleet.reconcile.status import NOT_FINISHED, FileStatus, JobStatus, RescueRef
from testfleet.schemas.outputs import validate_output

from .test_compare import _all, _plan, _status


def _rescued(plan: Plan, wave: Rescue, origin: str, outcome: str = "PASSED") -> JobStatus:
    job = wave.job(origin + SUFFIX)
    return JobStatus(plan_digest=plan.digest, job_id=job.id, stage=job.stage, variant="",
                     shard=plan.job(origin).shard, shards=plan.job(origin).shards,
                     run_id=f"r-{job.id}", ci_run_id="1", empty=False, complete=outcome == "PASSED",
                     exit_status=0 if outcome == "PASSED" else 1,
                     files=tuple(FileStatus(f, job.lane, outcome, 1) for f in job.files),  # type: ignore[arg-type]
                     rescue=RescueRef(wave.digest, origin), source=f"{job.id}.json")


def test_a_job_that_never_reported_is_rescued_whole_and_the_second_reconcile_names_it() -> None:
    plan = _plan()
    lost = plan.jobs[0]
    found = [s for s in _all(plan) if s.job_id != lost.id]
    wave = rescue_wave(plan, found)
    assert [(j.id, j.origin, j.files) for j in wave.jobs] == [
        (lost.id + SUFFIX, lost.id, tuple(t.file for t in lost.tests))]
    first = reconcile(plan, found)
    assert not first.ok and rescue_covers(first, wave)
    second = reconcile(plan, [*found, _rescued(plan, wave, lost.id)], rescue=wave)
    assert second.ok, render_text(second)
    assert {p.file for p in second.rescued} == {t.file for t in lost.tests}
    assert [p.job_id for p in second.rescued_jobs] == [lost.id]
    assert "from the rescue wave" in render_text(second)
    validate_output("reconcile", to_json(second))
    # the rescue job that never reported: its origin is missing, saying so
    third = reconcile(plan, found, rescue=wave)
    assert not third.ok and "neither did its rescue job" in third.missing_jobs[0].detail


def test_what_is_never_rescued() -> None:
    plan = _plan(files=6, shards=2)
    a, b = plan.jobs[0], plan.jobs[1]
    # a's first file failed, fast-fail left the rest NOT_RUN: the test's failure, not a loss
    files = [FileStatus(t.file, a.lane, "FAILED" if i == 0 else "NOT_RUN", 1 if i == 0 else 0)
             for i, t in enumerate(a.tests)]
    fast_fail = _status(plan, a.id, files=tuple(files), complete=False, exit_status=1,
                        reason=f"{len(files) - 1} file(s) not run: fast-fail")
    # b interrupted by a signal after its first file passed: the rest is rescued
    files_b = [FileStatus(t.file, b.lane, "PASSED" if i == 0 else "NOT_RUN", 1 if i == 0 else 0)
               for i, t in enumerate(b.tests)]
    cancelled = _status(plan, b.id, files=tuple(files_b), complete=False, exit_status=130,
                        reason="interrupted by signal 15")
    others = [_status(plan, j.id) for j in plan.jobs[2:]]
    wave = rescue_wave(plan, [fast_fail, cancelled, *others])
    assert [(j.origin, j.files) for j in wave.jobs] == [(b.id, tuple(t.file for t in b.tests[1:]))]
    # interrupted, but one of its own files failed first: not rescued either
    files_b[0] = FileStatus(b.tests[0].file, b.lane, "FAILED", 1)
    assert not rescue_wave(plan, [fast_fail, replace(cancelled, files=tuple(files_b)),
                                  *others]).jobs
    # refused, another plan's status, a complete job: nothing
    refused = _status(plan, a.id, complete=False, exit_status=2, reason="refused: bad plan",
                      files=())
    assert not rescue_wave(plan, [refused, *[_status(plan, j.id) for j in plan.jobs[1:]]]).jobs
    assert not rescue_wave(plan, _all(plan)).jobs
    other = [replace(s, plan_digest="sha256:other") for s in _all(plan)]
    assert len(rescue_wave(plan, other).jobs) == len(plan.jobs)  # none of them is this plan's
    # a placeholder (killed before its final status): every unexecuted file of it
    placeholder = _status(plan, a.id, complete=False, exit_status=NOT_FINISHED,
                          files=tuple(FileStatus(t.file, a.lane, "NOT_RUN", 0) for t in a.tests),
                          reason="the job started and did not finish")
    wave = rescue_wave(plan, [placeholder, *[_status(plan, j.id) for j in plan.jobs[1:]]])
    assert [j.origin for j in wave.jobs] == [a.id] and "killed" in wave.jobs[0].why


def test_a_late_original_report_counts_once_and_the_rescue_run_is_named_late() -> None:
    plan = _plan()
    lost = plan.jobs[0]
    wave = rescue_wave(plan, [s for s in _all(plan) if s.job_id != lost.id])
    r = reconcile(plan, [*_all(plan), _rescued(plan, wave, lost.id)], rescue=wave)
    assert r.ok and not r.duplicated and not r.rescued
    assert {p.file for p in r.late} == {t.file for t in lost.tests}
    assert r.executed == r.planned_files


def test_after_a_rescue_a_failure_anywhere_fails_the_run() -> None:
    plan = _plan()
    lost = plan.jobs[0]
    found = [s for s in _all(plan) if s.job_id != lost.id]
    wave = rescue_wave(plan, found)
    r = reconcile(plan, [*found, _rescued(plan, wave, lost.id, "FAILED")], rescue=wave)
    assert not r.ok and {p.file for p in r.failed} == {t.file for t in lost.tests}
    # a rescue status without its rescue file counts for nothing
    bare = reconcile(plan, [*found, _rescued(plan, wave, lost.id)])
    assert not bare.ok and bare.unplanned_jobs and bare.missing_jobs


def test_a_rescue_status_that_names_another_file_is_impossible() -> None:
    plan = _plan()
    lost = plan.jobs[0]
    found = [s for s in _all(plan) if s.job_id != lost.id]
    wave = rescue_wave(plan, found)
    forged = _rescued(plan, wave, lost.id)
    forged = replace(forged, files=(*forged.files,
                                    FileStatus(plan.jobs[1].tests[0].file, lost.lane, "PASSED", 1)))
    r = reconcile(plan, [*found, forged], rescue=wave)
    assert not r.ok and "not a file of rescue job" in r.impossible[0].detail


def test_the_rescue_file_boundary(tmp_path: Path) -> None:
    plan = _plan()
    lost = plan.jobs[0]
    wave = rescue_wave(plan, [s for s in _all(plan) if s.job_id != lost.id])
    path = tmp_path / "rescue.json"
    path.write_bytes(rescue_bytes(wave))
    assert load_rescue(path) == wave
    require_rescue(wave, plan, wave.digest, "it")
    doc = json.loads(path.read_text())
    doc["jobs"][0]["files"].append("tests/test_t.py")  # edited: the digest no longer matches
    path.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match="does not match its digest"):
        load_rescue(path)
    path.write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        load_rescue(path)
    path.write_text(json.dumps({"schema": "testfleet.plan/1"}))
    with pytest.raises(UsageError, match="not a rescue file"):
        load_rescue(path)
    with pytest.raises(UsageError, match="not sha256:abc"):
        require_rescue(wave, plan, "sha256:abc", "it")
    with pytest.raises(UsageError, match="not this plan"):
        require_rescue(wave, _plan(files=4), None, "it")
    stray = Rescue(plan.digest, (replace(wave.jobs[0], files=("tests/test_t.py",)),))
    with pytest.raises(UsageError, match="was not planned with"):
        require_rescue(stray, plan, None, "it")
    matrices = stage_matrices(plan, wave)
    (entry,) = matrices[lost.lane]["matrix"]["include"]
    assert entry["id"] == lost.id + SUFFIX and entry["rescue"] == wave.digest
    assert entry["runs_on"] == list(lost.runs_on) and entry["n_tests"] == len(lost.tests)
    assert matrices["t"] == {"has_jobs": False, "matrix": {"include": []}}


def test_lanes_that_share_a_workflow_job_share_its_rescue_matrix() -> None:
    """#39 + #40: a generated job that runs several stages reads one rescue matrix, under
    the key its stage matrix has (the workflow's first stage of the job)."""
    plan = _plan()
    lost = plan.jobs[0]
    wave = rescue_wave(plan, [s for s in _all(plan) if s.job_id != lost.id])
    matrices = stage_matrices(plan, wave, {"s": ["s", "t"]})
    assert set(matrices) == {"s"} and matrices["s"]["has_jobs"] is True
    assert [e["lane"] for e in matrices["s"]["matrix"]["include"]] == [lost.lane]
    assert stage_matrices(plan, wave, {"t": ["t", "s"]})["t"]["matrix"]["include"][0]["id"] \
        == lost.id + SUFFIX
