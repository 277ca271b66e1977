"""History-bundle fixtures: the store's project and per-engine databases, seeded records."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.store.conftest import MINIMAL_CONFIG, engine_name, project, store_url

from testfleet.config import Project

__all__ = ["MINIMAL_CONFIG", "engine_name", "project", "seed", "store_url"]


def seed_records(project: Project, url: str | None, *, ci_run_id: str = "100", files: int = 3,
                 t0: float = 1000.0) -> None:
    """Executions of ``files`` files in one CI run with two testcases each (as the runner
    records them: same file, stage, attempt, run and time), the failed file and test with
    their failure signatures, and a trusted and an untrusted gate run."""
    from testfleet.failures.signature import failure_signature
    from testfleet.store import open_store
    from testfleet.store.durations import Execution
    from testfleet.store.metric_store import MetricStore
    from testfleet.store.metrics import GateRun, StoredValue
    from testfleet.store.testcases import CaseRow

    file_sig = failure_signature("E   KeyError: 'max_new_tokens'\n")
    case_sig = failure_signature("E   assert 3 == 4\ntests/test_0.py:9: AssertionError\n")
    with open_store(project, url) as store:
        store.record_executions([
            Execution(f"tests/test_{i}.py", "stage-a-cpu", "cpu", 1.5 + i, commit="abc123",
                      ci_run_id=ci_run_id, timestamp=t0 + i, outcome="PASSED" if i else "FAILED",
                      signature=None if i else file_sig.digest)
            for i in range(files)], [file_sig, case_sig])
        store.record_testcases([
            CaseRow(f"tests/test_{i}.py", "stage-a-cpu", "cpu", f"test_{name}",
                    "FAILED" if (i, name) == (0, "b") else "PASSED", 0.25 * i, 1, "abc123",
                    ci_run_id, t0 + i,
                    signature=case_sig.digest if (i, name) == (0, "b") else None)
            for i in range(files) for name in ("a", "b")])
        ms = MetricStore(store)
        for n, trusted in ((1, True), (2, False)):
            ms.write_run(GateRun(f"{ci_run_id}.1-job{n}", "tests/test_1.py", "cuda", "stage-c-h200",
                                 env_key="torch=2", ci_run_id=ci_run_id, commit="ABC123",
                                 recorded_at=t0 + 10 * n),
                         [StoredValue("train/loss", "all", "lt:2", s, 0.1 * s + n, s + 1)
                          for s in range(3)], trusted=trusted)


@pytest.fixture
def seed() -> Callable[..., None]:
    return seed_records
