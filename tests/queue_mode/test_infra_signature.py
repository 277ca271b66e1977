"""Which failures queue mode may retry on another runner (#40): those whose signature is an
infrastructure incident's (a backend start-up pattern), never a test's own failure."""

from __future__ import annotations

from pathlib import Path

from testfleet.runner.hooks import infrastructure_failure
from testfleet.runner.model import (
    Attempt,
    FileResult,
    JobSpec,
    Outcome,
    RunItem,
    RunOptions,
    StageSettings,
)


def _spec(backend: str) -> JobSpec:
    settings = StageSettings("s", backend, "python", 60.0, 3.0, 1.0)
    return JobSpec("j", settings, (), Path("."), Path("records"), RunOptions(), "run")


def _result(tail: str, outcome: Outcome = Outcome.FAILED) -> FileResult:
    attempt = Attempt(1, outcome, 1.0, 1, "exit status 1", tail=tail)
    return FileResult(RunItem("tests/test_x.py", 1.0), 60.0, outcome, [attempt],
                      message="exit status 1")


def test_a_start_up_failure_of_the_device_is_infrastructure() -> None:
    tail = "Traceback (most recent call last):\nRuntimeError: cudaErrorNoDevice: no CUDA device\n"
    assert infrastructure_failure(_spec("cuda"), _result(tail))


def test_a_tests_own_failure_is_not() -> None:
    tail = "    assert loss < 0.1\nAssertionError: assert 0.4 < 0.1\n"
    assert not infrastructure_failure(_spec("cuda"), _result(tail))


def test_a_pass_is_not() -> None:
    assert not infrastructure_failure(_spec("cuda"), _result("", Outcome.PASSED))
