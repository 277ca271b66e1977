"""The job loop: files in plan order (or in pytest sessions), fast-fail, NOT RUN for what
did not run.

It never invents a green result: a file it did not execute is NOT RUN with the reason.
Each file's verdict comes from ``runner/executor.py``; ``runner/session.py`` runs a
batch stage's files in pytest sessions with the same guarantees.
"""

from __future__ import annotations

import time

from testfleet.runner.capture import compile_patterns, dropped_notes
from testfleet.runner.executor import Hooks, NoHooks, _run_file, _signame, partial_result
from testfleet.runner.interrupt import Interrupt
from testfleet.runner.model import FileResult, JobResult, JobSpec, Outcome
from testfleet.runner.reporting import Reporter
from testfleet.runner.session import run_batched
from testfleet.runner.tree import subreaper


def execute(
    spec: JobSpec,
    *,
    reporter: Reporter,
    interrupt: Interrupt | None = None,
    hooks: Hooks | None = None,
    use_subreaper: bool = True,
) -> JobResult:
    """Run every file of ``spec`` and return the job's verdict (never raises for a test)."""
    hooks = hooks or NoHooks()
    started = time.time()
    t0 = time.monotonic()
    results: list[FileResult] = []
    stop_reason = ""
    retriable = compile_patterns(spec.options.retriable_patterns)
    fatal = compile_patterns(spec.options.fatal_patterns)
    reporter.job_started(spec)
    with subreaper(use_subreaper) as reaping:
        if spec.settings.batch:  # session mode: runner.session keeps the same guarantees
            stop_reason = run_batched(
                spec, results, reporter, interrupt, hooks, reaping, retriable, fatal,
                lambda: hooks.checkpoint(lambda: partial_result(spec, results, started, t0)))
            for note in dropped_notes((*retriable, *fatal)):
                reporter.warning(note)
        for index, item in enumerate(() if spec.settings.batch else spec.items):
            if interrupt is not None and interrupt.signum is not None:
                stop_reason = f"runner received {_signame(interrupt.signum)}"
                break
            result = _run_file(spec, index, item, reporter, interrupt, hooks, reaping,
                               retriable, fatal)
            for note in dropped_notes((*retriable, *fatal)):
                reporter.warning(note)
            results.append(result)
            reporter.file_finished(index, result)
            if result.outcome is Outcome.INTERRUPTED:
                stop_reason = f"runner received {_signame(interrupt.signum or 0)}" if interrupt else "interrupted"
                break
            if (not result.blocks_nothing and spec.options.fast_fail
                    and index + 1 < len(spec.items)):
                stop_reason = f"fast-fail: {item.file} {result.outcome.label}"
                break
            hooks.checkpoint(lambda: partial_result(spec, results, started, t0))
    for item in spec.items[len(results):]:
        results.append(FileResult(item, spec.settings.timeout_for(item.estimate), Outcome.NOT_RUN,
                                  message=f"not run ({stop_reason})"))
    job = JobResult(spec, results, started, time.monotonic() - t0,
                    interrupt.signum if interrupt is not None else None)
    reporter.job_finished(job)
    return job
