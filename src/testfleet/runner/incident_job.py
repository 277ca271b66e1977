"""Signatures and incidents of one finished (or running) job, for history and the
step summary.

Each failed attempt's signature is computed once and kept on the attempt, so what the
history records and what the summary shows cannot differ (a configured pattern that
timed out is switched off after its first timeout: a second computation could choose
another line). The matcher is the job's backend's: built-in defaults (unless
``infra_defaults = false``) and ``[backends.<name>] infra_patterns``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from testfleet.failures.patterns import InfraMatcher, matcher_for
from testfleet.failures.signature import Signature, failure_signature, make
from testfleet.incidents.group import Failure, Incident, group
from testfleet.runner.model import Attempt, FileResult, JobResult, JobSpec, Outcome

if TYPE_CHECKING:
    from testfleet.runner.testcases import CaseResult


def matcher_of(spec: JobSpec) -> InfraMatcher:
    options = spec.options
    return matcher_for(spec.settings.backend, options.infra_patterns, options.infra_defaults)


def history_outcome(outcome: Outcome) -> str:
    if outcome is Outcome.TIMEOUT:
        return "TIMEOUT"
    return "ERROR" if outcome in (Outcome.ERROR, Outcome.INTERRUPTED) else "FAILED"


def attempt_signature(spec: JobSpec, attempt: Attempt) -> Signature | None:
    """The signature of a failed attempt (None for one that passed), computed once."""
    if attempt.outcome.ok or attempt.outcome is Outcome.NOT_RUN:
        return None
    if attempt.signature is None:
        attempt.signature = failure_signature(attempt.tail, outcome=history_outcome(attempt.outcome),
                                              reason=attempt.reason, matcher=matcher_of(spec))
    return attempt.signature


def case_signatures(spec: JobSpec, attempt: Attempt) -> dict[str, Signature]:
    """Node id -> signature of each failing test of the attempt, computed once."""
    if attempt.case_signatures is None:
        matcher = matcher_of(spec)
        attempt.case_signatures = {
            c.nodeid: failure_signature(c.message, outcome="FAILED", reason=f"{c.outcome} in {c.phase}",
                                        matcher=matcher)
            for c in attempt.cases or [] if c.failing}
    return attempt.case_signatures


def file_signature(spec: JobSpec, result: FileResult) -> Signature | None:
    """The signature of a file's final verdict: its last attempt's, or, when the attempt
    passed and the metric gate failed it, the gate's message."""
    if result.outcome.ok or not result.attempts:
        return None
    found = attempt_signature(spec, result.attempts[-1])
    if found is not None:
        return found
    from testfleet.failures.normalize import normalize

    return make("exit", normalize(result.message or "failed after its last attempt passed"),
                "metric gate" if result.gate_failed else "")


def failing_cases(spec: JobSpec, result: FileResult) -> list[tuple[CaseResult, Signature]]:
    if not result.attempts or result.outcome.ok:
        return []
    attempt = result.attempts[-1]
    sigs = case_signatures(spec, attempt)
    return [(c, sigs[c.nodeid]) for c in attempt.cases or [] if c.nodeid in sigs]


def job_incidents(job: JobResult) -> list[Incident]:
    """The job's failures as incidents: per failing test where pytest reported tests,
    else per file; "ran" is every file that has an attempt."""
    spec = job.spec
    lane, backend, run = spec.settings.stage, spec.settings.backend, spec.job_id
    failures: list[Failure] = []
    signatures: dict[str, Signature] = {}
    for result in job.results:
        sig = file_signature(spec, result)
        if sig is None:
            continue
        cases = failing_cases(spec, result)
        outcome = history_outcome(result.outcome)
        if cases:
            for case, case_sig in cases:
                signatures[case_sig.digest] = case_sig
                failures.append(Failure(run, lane, backend, result.item.file, case_sig.digest,
                                        outcome, case.name))
        else:
            signatures[sig.digest] = sig
            failures.append(Failure(run, lane, backend, result.item.file, sig.digest, outcome))
    ran = sum(1 for r in job.results if r.attempts)
    return group(failures, signatures, {(run, lane): ran})
