"""The write rule (pure): which bundles merge, and whose gate runs stay trusted."""

from __future__ import annotations

import pytest

from testfleet.history.bundle import Source
from testfleet.history.trust import admit, source_from_env


@pytest.mark.parametrize("event", ["push", "schedule", "workflow_dispatch", "workflow_call", None])
def test_default_branch_events_and_local_exports_write(event: str | None) -> None:
    verdict = admit(Source(event=event, write_baseline=True))
    assert verdict.refused is None and verdict.baselines_trusted


@pytest.mark.parametrize("event", ["pull_request", "pull_request_target", "merge_group",
                                   "issue_comment"])
def test_every_other_event_is_refused_or_untrusted(event: str) -> None:
    verdict = admit(Source(event=event, write_baseline=True))
    assert verdict.refused and f"{event!r} run" in verdict.refused
    forced = admit(Source(event=event, write_baseline=True), allow_untrusted=True)
    assert forced.refused is None and not forced.baselines_trusted


def test_required_ref() -> None:
    main = "refs/heads/main"
    assert admit(Source(event="push", ref=main), require_ref=main).refused is None
    assert "refs/heads/x" in str(admit(Source(event="push", ref="refs/heads/x"),
                                       require_ref=main).refused)
    assert admit(Source(event="push"), require_ref=main).refused  # unknown ref is not main


def test_cadences_without_baselines_keep_executions_but_not_trust() -> None:
    verdict = admit(Source(event="push", cadence="regular", write_baseline=False))
    assert verdict.refused is None and not verdict.baselines_trusted
    assert "cadence regular does not write metric baselines" in str(verdict.note)


def test_source_from_github_and_buildkite_variables() -> None:
    gh = source_from_env({"GITHUB_EVENT_NAME": "schedule", "GITHUB_REF": "refs/heads/main",
                          "GITHUB_RUN_ID": "77", "GITHUB_REPOSITORY": "o/r"}, cadence="nightly")
    assert (gh.event, gh.ref, gh.ci_run_id, gh.repository, gh.cadence) == (
        "schedule", "refs/heads/main", "77", "o/r", "nightly")
    assert source_from_env({"GITHUB_EVENT_NAME": "push"}, event="pull_request").event == \
        "pull_request"  # an explicit value wins
    bk_pr = source_from_env({"BUILDKITE": "true", "BUILDKITE_PULL_REQUEST": "12",
                             "BUILDKITE_BRANCH": "feature"})
    assert (bk_pr.event, bk_pr.ref) == ("pull_request", "refs/heads/feature")
    bk = source_from_env({"BUILDKITE": "true", "BUILDKITE_PULL_REQUEST": "false",
                          "BUILDKITE_SOURCE": "schedule", "BUILDKITE_BRANCH": "main"})
    assert (bk.event, bk.ref) == ("schedule", "refs/heads/main")
    assert source_from_env({}) == Source()
