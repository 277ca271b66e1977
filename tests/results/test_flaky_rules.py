"""Flaky classification rules on small hand-made histories (newest first)."""

from __future__ import annotations

from testfleet.results.flaky import FlakyPolicy, classify, classify_all, quarantined_files
from testfleet.results.model import RunResult

POLICY = FlakyPolicy(window=10, threshold=0.1, min_runs=3, quarantine=True, restore_after=3)


def runs(spec: str, *, commits: str | None = None, file: str = "t.py") -> list[RunResult]:
    """``spec``: one letter per run, newest first: P passed, F failed, R pass on retry,
    T timeout; ``commits``: one letter per run (same order), default a new commit each."""
    names = {"P": "PASSED", "F": "FAILED", "R": "FLAKY", "T": "TIMEOUT", "N": "NOT_RUN"}
    out = []
    for i, ch in enumerate(spec):
        commit = commits[i] if commits else f"c{i}"
        out.append(RunResult(file, "s", names[ch], ts=1000.0 - i, commit=commit,
                             ci_run_id=str(100 - i)))
    return out


def test_pass_on_retry_is_flaky_and_quarantined() -> None:
    v = classify(runs("PPRPPPRPPP"), POLICY)
    assert v is not None and v.state == "flaky" and v.quarantined
    assert (v.retry_passes, v.evidence_runs, v.runs, v.clean_streak) == (2, 2, 10, 2)
    assert v.rate == 0.2


def test_fail_and_pass_on_the_same_commit_is_flaky() -> None:
    v = classify(runs("PFPPPP", commits="aabcde"), POLICY)
    assert v is not None and v.state == "flaky" and v.split_commits == ("a",)
    assert v.evidence_runs == 1 and v.failures == 1


def test_always_failing_is_broken_never_quarantined() -> None:
    v = classify(runs("FFFFTF", commits="aaaaaa"), POLICY)
    assert v is not None and v.state == "broken" and not v.quarantined


def test_regression_that_keeps_failing_is_not_flaky() -> None:
    v = classify(runs("FFFPPPPP"), POLICY)
    assert v is not None and v.state == "healthy" and v.evidence_runs == 0


def test_quarantine_lifts_after_restore_after_clean_passes() -> None:
    assert classify(runs("PPRPP"), POLICY).state == "flaky"  # type: ignore[union-attr]
    lifted = classify(runs("PPPRPP"), POLICY)
    assert lifted is not None and lifted.state == "recovered" and not lifted.quarantined
    # a pass on a retry is not a clean pass: the streak starts again
    assert classify(runs("RPPPRPP"), POLICY).state == "flaky"  # type: ignore[union-attr]


def test_threshold_min_runs_and_window() -> None:
    assert classify(runs("RP"), POLICY).state == "healthy"  # type: ignore[union-attr]  # 2 < min_runs
    rare = classify(runs("P" * 9 + "R" + "P" * 10), FlakyPolicy(window=20, threshold=0.1))
    assert rare is not None and rare.state == "healthy" and rare.rate == 0.05
    old = classify(runs("PPPPPPPPPPR"), POLICY)  # the retry is outside the 10-run window
    assert old is not None and old.state == "healthy" and old.runs == 10


def test_not_run_is_not_a_result_and_no_runs_is_none() -> None:
    assert classify(runs("NN"), POLICY) is None
    assert classify(runs("NPPRP"), POLICY).runs == 4  # type: ignore[union-attr]


def test_without_quarantine_flaky_is_reported_only() -> None:
    v = classify(runs("PRPR"), FlakyPolicy(quarantine=False))
    assert v is not None and v.state == "flaky" and not v.quarantined


def test_classify_all_keys_by_stage_file_and_test() -> None:
    rows = runs("PRPR", file="a.py") + runs("PPPP", file="b.py")
    rows += [RunResult("a.py", "other", "PASSED", ts=1.0)]
    verdicts = classify_all(list(reversed(rows)), POLICY)
    assert [(v.stage, v.file, v.state) for v in verdicts] == [
        ("other", "a.py", "healthy"), ("s", "a.py", "flaky"), ("s", "b.py", "healthy")]
    assert list(quarantined_files(verdicts)) == [("s", "a.py")]


def test_executions_of_one_run_are_one_run_never_evidence() -> None:
    """#26: with ``pytest -n 2`` each worker recorded its half of a file, so one session of
    an always-failing file stored PASSED and FAILED on one commit: classified flaky 6/10
    and quarantined. Executions of one CI run fold into one run, its worst verdict."""
    halves = []
    for i in range(5):  # five CI runs on one commit, each storing a passing and a failing half
        for outcome in ("PASSED", "FAILED"):
            halves.append(RunResult("t.py", "s", outcome, ts=1000.0 - i, commit="a",
                                    ci_run_id=str(100 - i)))
    v = classify(halves, POLICY)
    assert v is not None and v.state == "broken" and not v.quarantined
    assert (v.runs, v.failures, v.evidence_runs) == (5, 5, 0)


def test_a_file_run_twice_in_one_run_counts_once_at_its_worst() -> None:
    passed, failed = (RunResult("t.py", "s", o, ts=t, commit="a", ci_run_id="7")
                      for o, t in (("PASSED", 10.0), ("FAILED", 9.0)))
    later = [RunResult("t.py", "s", "PASSED", ts=20.0 + i, commit="b", ci_run_id=str(8 + i))
             for i in range(3)]
    v = classify([*reversed(later), passed, failed], POLICY)
    assert v is not None and v.runs == 4 and v.failures == 1 and v.split_commits == ()
    assert v.state == "healthy"


def test_local_runs_without_a_ci_run_id_stay_separate() -> None:
    local = [RunResult("t.py", "s", o, ts=100.0 - i, commit="a")
             for i, o in enumerate(["PASSED", "FAILED", "PASSED", "PASSED"])]
    v = classify(local, POLICY)
    assert v is not None and v.runs == 4 and v.state == "flaky"
