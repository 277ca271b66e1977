"""One ``disabled=`` reason on many files: a finding that names the incident, and no
noise for a reason shared on purpose."""

from __future__ import annotations

from types import SimpleNamespace

from testfleet.incidents.disabled_check import findings, repeated_reasons


def _reg(file: str, reason: str | None, suite: str = "stage-c-4-gpu-mi300x") -> SimpleNamespace:
    return SimpleNamespace(file=file, line=3, suite=suite, disabled=reason)


def test_reasons_are_compared_without_case_or_spacing() -> None:
    regs = [_reg(f"t{i}.py", r) for i, r in enumerate(
        ["Disable due to failure", "disable due  to failure", "DISABLE DUE TO FAILURE", None, "x"])]
    (group,) = repeated_reasons(regs).values()
    assert [r.file for r in group] == ["t0.py", "t1.py", "t2.py"]


def test_a_failure_reason_on_many_files_is_one_incident_not_a_category(tmp_path) -> None:  # type: ignore[no-untyped-def]
    project = SimpleNamespace(config=SimpleNamespace(database=None, cache_dir=".testfleet"),
                              root=tmp_path)
    regs = [_reg(f"t{i}.py", "Disable due to failure") for i in range(8)] + \
        [_reg(f"p{i}.py", "performance testcase", suite="stage-b") for i in range(31)]
    found = findings(project, SimpleNamespace(registrations=regs))
    assert {f.file for f in found} == {f"t{i}.py" for i in range(8)}
    assert all(f.code == "disabled-reason-repeated" and f.severity == "warning" for f in found)
    assert "is on 8 registrations (stage-c-4-gpu-mi300x)" in found[0].message
    assert "testfleet incident dormant stage-c-4-gpu-mi300x" in found[0].message
