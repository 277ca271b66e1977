"""Check rules from [tool.testfleet.check] over the report model."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from report_helpers import NOW, config, fleet, reg

from testfleet.app.check import check_rules
from testfleet.config import Project, validate_config
from testfleet.registry.model import Registry
from testfleet.report.ages import LineAge
from testfleet.report.collect import build_report
from testfleet.report.rules import config_line, evaluate_rules

TOML = """[tool.testfleet]
roots = ["tests"]

[tool.testfleet.stages.cpu-a]
backend = "cpu"

[tool.testfleet.stages.gpu-h200]
backend = "cuda"

[tool.testfleet.stages."gpu-mi300x"]
backend = "rocm"
trusted_only = true
disabled = "Disable due to failure"
"""


def _codes(findings):
    return sorted((f.code, f.severity, f.file, f.line) for f in findings)


def test_default_rules_warn_on_holes_and_expired_only() -> None:
    cfg = config()
    regs = [*fleet(), reg("tests/t.py", disabled="until 2026-01-01")]
    r = build_report(project="p", config=cfg, registrations=regs, now=NOW)
    codes = _codes(evaluate_rules(r, cfg, "pyproject.toml", TOML))
    assert codes == [
        ("coverage-hole", "warning", "pyproject.toml", 0),
        ("coverage-hole", "warning", "pyproject.toml", 10),
        ("disabled-expired", "warning", "tests/t.py", 3),
    ]


def test_all_rules_on() -> None:
    cfg = config(
        stages={"cpu-a": {"backend": "cpu"}, "gpu-h200": {"backend": "cuda"},
                "gpu-mi300x": {"backend": "rocm", "disabled": "Disable due to failure"}},
        check={"disabled_requires_reference": True, "max_disabled_days": 30,
               "dormant_requires_reference": True, "coverage_holes": "error",
               "disabled_expiry": "error"})
    regs = [*fleet(), reg("tests/t.py", disabled="until 2026-02-30, see #4")]
    old = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    ages = {regs[3]: LineAge("committed", old, "a" * 40, line=9),
            regs[4]: LineAge("committed", NOW - dt.timedelta(days=30), "b" * 40, line=4)}
    r = build_report(project="p", config=cfg, registrations=regs, now=NOW, ages=ages)
    findings = evaluate_rules(r, cfg, "pyproject.toml", TOML)
    codes = _codes(findings)
    assert ("disabled-no-reference", "error", "tests/e2e/test_x.py", 9) in codes
    assert ("disabled-no-reference", "error", "tests/e2e/test_m.py", 4) in codes
    assert ("disabled-too-old", "error", "tests/e2e/test_x.py", 9) in codes
    # exactly 30 days is within the limit
    assert not any(c[0] == "disabled-too-old" and c[2] == "tests/e2e/test_m.py" for c in codes)
    assert ("disabled-expiry-invalid", "error", "tests/t.py", 3) in codes
    assert ("dormant-no-reference", "error", "pyproject.toml", 13) in codes
    assert [c for c in codes if c[0] == "coverage-hole"] == [
        ("coverage-hole", "error", "pyproject.toml", 0),
        ("coverage-hole", "error", "pyproject.toml", 10)]
    dormant = next(f for f in findings if f.code == "dormant-no-reference")
    assert dormant.key == "tool.testfleet.stages.gpu-mi300x.disabled"
    too_old = next(f for f in findings if f.code == "disabled-too-old")
    assert "151 days since 2026-01-01" in too_old.message


def test_rules_off() -> None:
    cfg = config(check={"coverage_holes": "off", "disabled_expiry": "off"})
    regs = [*fleet(), reg("tests/t.py", disabled="until 2026-01-01")]
    r = build_report(project="p", config=cfg, registrations=regs, now=NOW)
    assert evaluate_rules(r, cfg) == []


def test_config_line() -> None:
    assert config_line(TOML, "cpu-a") == 4
    assert config_line(TOML, "gpu-mi300x") == 10
    assert config_line(TOML, "gpu-mi300x", "disabled") == 13
    assert config_line(TOML, "gpu-h200", "disabled") == 7  # key absent: the header
    assert config_line(TOML, "missing") == 0
    assert config_line("[stages.x]\ndisabled = 'y'\n", "x", "disabled") == 2


def _project(root: Path, check: str = "") -> Project:
    text = TOML + check
    (root / "pyproject.toml").write_text(text, encoding="utf-8")
    from testfleet.configfile import parse_toml  # tomllib, or tomli on Python 3.10

    parsed = parse_toml(text)
    assert parsed is not None
    data = parsed["tool"]["testfleet"]
    return Project(root, root / "pyproject.toml", validate_config(data), text)


def test_check_rules_uses_git_and_warns_when_ages_unknown(tmp_path: Path, git_repo) -> None:
    src = 'from testfleet import register_cuda_ci\n\nregister_cuda_ci(10, "gpu-h200", labels=["m"], disabled="x #1")\n'
    root = git_repo({"tests/test_x.py": src}, "2025-01-01T00:00:00+00:00")
    project = _project(root, "\n[tool.testfleet.check]\nmax_disabled_days = 90\n")
    registry = Registry([reg("tests/test_x.py", "gpu-h200", "cuda", labels=("m",), disabled="x #1")])
    findings = check_rules(project, registry, now=NOW)
    assert ("disabled-too-old", "error", "tests/test_x.py", 3) in _codes(findings)

    plain = tmp_path / "plain"
    (plain / "tests").mkdir(parents=True)
    (plain / "tests/test_x.py").write_text(src, encoding="utf-8")
    findings = check_rules(_project(plain, "\n[tool.testfleet.check]\nmax_disabled_days = 90\n"),
                           registry, now=NOW)
    unknown = [f for f in findings if f.code == "disabled-age-unknown"]
    assert len(unknown) == 1 and unknown[0].severity == "warning"
    assert not any(f.code == "disabled-too-old" for f in findings)
