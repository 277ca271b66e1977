"""Which files the plan quarantines: flaky ones, read from history at plan time.

Fail-soft like estimates: a history database that is missing or unreadable means no
quarantine (every file's failure blocks, as without the feature) and one warning —
never a plan that fails, and never a quarantine invented without evidence.
"""

from __future__ import annotations

from typing import Any

from testfleet.results.flaky import FlakyVerdict


def blocks(passed: bool, quarantined: bool, ran: bool) -> bool:
    """Whether one file's verdict fails its job: the one rule ``testfleet run`` and the
    pytest plugin both apply. A pass never blocks; a quarantined file that ran and failed
    does not (its failure is recorded, and counts against its flakiness, never hidden
    there); a quarantined file that never ran does (nothing proved it runs)."""
    return not (passed or (quarantined and ran))


def describe(v: FlakyVerdict) -> str:
    """The plan's one-line reason for a quarantined file."""
    parts = []
    if v.retry_passes:
        parts.append(f"{v.retry_passes} pass(es) on retry")
    if v.split_commits:
        parts.append(f"failed and passed on {len(v.split_commits)} commit(s)")
    return (f"flaky in {v.evidence_runs}/{v.runs} recent runs ({', '.join(parts)}); lifts after "
            f"clean passes in a row (now {v.clean_streak})")


def quarantine_for(project: Any, url: str | None = None,
                   stages: list[str] | None = None) -> tuple[dict[tuple[str, str], str], list[str]]:
    """((stage, file) -> reason, warnings); empty unless ``[tool.testfleet.flaky] quarantine``."""
    cfg = project.config.flaky
    if not cfg.quarantine:
        return {}, []
    from testfleet.results.flaky import classify_all, quarantined_files
    from testfleet.results.query import file_results
    from testfleet.results.settings import flaky_policy
    from testfleet.store import open_store
    from testfleet.store.errors import StoreError, StoreMissing

    policy = flaky_policy(project.config)
    try:
        with open_store(project, url, readonly=True) as store:
            rows = []
            for stage in (stages if stages else [None]):
                rows += file_results(store, runs=policy.window, stage=stage)
    except StoreMissing:
        return {}, []
    except StoreError as exc:
        return {}, [f"flaky quarantine off for this plan: {exc}"]
    except Exception as exc:  # an older schema without results columns, a driver error
        return {}, [f"flaky quarantine off for this plan: history unreadable "
                    f"({type(exc).__name__}: {exc})"]
    quarantined = quarantined_files(classify_all(rows, policy))
    return {key: describe(v) for key, v in quarantined.items()}, []
