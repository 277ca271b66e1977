"""``testfleet report`` end to end on a copy of the example project."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testfleet.report.model import SCHEMA

DORMANT = "stage-c-4-gpu-mi300x"
REASON = "MI300X runners fail at start-up; restore when #2230's follow-up closes"


def tf(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "testfleet.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def _dormant_line(root: Path) -> int:
    lines = (root / "pyproject.toml").read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.startswith('disabled = "MI300X'))


@pytest.fixture
def plan_file(example_project: Path) -> Path:
    out = example_project / "plan.json"
    r = tf("plan", "--cadence", "nightly", "--format", "json", "--output", str(out),
           cwd=example_project)
    assert r.returncode == 0, r.stderr
    return out


def test_text_report(example_project: Path) -> None:
    r = tf("report", "--width", "160", cwd=example_project)
    assert r.returncode == 0, r.stderr
    assert "COVERAGE HOLES (2)" in r.stdout
    assert DORMANT in r.stdout and "#2230" in r.stdout
    assert "Disable due to failure" in r.stdout
    assert "ages unknown" in r.stdout  # a copy outside git
    assert "\x1b[" not in r.stdout


def test_json_report_with_plan(example_project: Path, plan_file: Path) -> None:
    out = example_project / "report.json"
    r = tf("report", "--format", "json", "--plan", "plan.json", "--output", "report.json",
           cwd=example_project)
    assert r.returncode == 0, r.stderr
    assert "testfleet: note: wrote the json report to report.json" in r.stderr and r.stdout == ""
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["schema"] == SCHEMA
    from importlib import resources

    import jsonschema

    schema = json.loads(resources.files("testfleet.report").joinpath(
        "schema/report-1.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(data, schema)
    assert data["config_file"] == "pyproject.toml"
    assert {s["name"]: s["config_line"] for s in data["stages"]}[DORMANT] == _dormant_line(
        example_project)
    assert [h["name"] for h in data["holes"]] == ["rocm", DORMANT]
    assert data["dormant"] == [{
        "name": DORMANT, "backend": "rocm", "reason": REASON,
        "references": [{"kind": "issue", "number": 2230, "repo": None, "text": "#2230", "url": None}],
        "registrations": 9, "would_run": 1}]
    ledger = {e["file"]: e for e in data["ledger"] if e["backend"] == "rocm"}
    amd = ledger["tests/e2e/megatron/amd/test_amd_r3_mtp.py"]
    assert amd["references"] == [] and amd["age"]["days"] is None
    offload = ledger["tests/e2e/megatron/test_qwen3_4B_offload_disk_stream.py"]
    assert offload["expiry"]["date"] == "2026-09-01" and offload["reason_line"] == 8
    stages = {s["stage"]: s for s in data["plan"]["stages"]}
    assert stages[DORMANT]["status"] == "dormant" and stages[DORMANT]["shards"] == []
    h200 = stages["stage-c-4-gpu-h200"]
    assert h200["shards"] and h200["makespan"] >= h200["lower_bound"] > 0
    planned = {t["file"] for s in data["plan"]["stages"] for b in s["shards"] for t in b["tests"]}
    assert "tests/fast/test_topk.py" in planned
    assert data["history"]["available"] is False


def test_markdown_and_html_to_stdout(example_project: Path) -> None:
    md = tf("report", "--format", "markdown", cwd=example_project)
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith("## testfleet report")
    assert f"`pyproject.toml:{_dormant_line(example_project)}`" in md.stdout
    assert "🚨 Coverage holes (2)" in md.stdout and DORMANT in md.stdout
    html = tf("report", "--format", "html", "--output", "-", cwd=example_project)
    assert html.returncode == 0 and html.stdout.startswith("<!DOCTYPE html>")
    line = _dormant_line(example_project)
    assert ('restore: remove <span class="mono">disabled</span> at <span class="mono">'
            f"pyproject.toml:{line}<") in html.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--plan", "missing.json"], "does not exist"),
        (["--plan", "bad.json"], "not valid JSON"),
        (["--plan", "foreign.json"], "plan"),
        (["--output", "no/such/dir/r.html"], "does not exist"),
        (["--output", "tests"], "is a directory"),
        (["--format", "pdf"], "pdf"),
    ],
)
def test_bad_arguments_are_clear_errors(example_project: Path, args: list[str], message: str) -> None:
    (example_project / "bad.json").write_text("{not json", encoding="utf-8")
    (example_project / "foreign.json").write_text('{"schema": "other/1"}', encoding="utf-8")
    r = tf("report", *args, cwd=example_project)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr and "Traceback" not in r.stderr


def test_tampered_plan_is_refused(example_project: Path, plan_file: Path) -> None:
    data = json.loads(plan_file.read_text(encoding="utf-8"))
    data["jobs"][0]["estimate"] = 1
    plan_file.write_text(json.dumps(data), encoding="utf-8")
    r = tf("report", "--plan", str(plan_file), cwd=example_project)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_check_enforces_report_rules(example_project: Path) -> None:
    r = tf("check", cwd=example_project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "coverage-hole" in r.stdout and "disabled-expired" in r.stdout
    cfg = example_project / "pyproject.toml"
    cfg.write_text(cfg.read_text(encoding="utf-8") + (
        "\n[tool.testfleet.check]\ndisabled_requires_reference = true\n"
        'coverage_holes = "error"\nmax_disabled_days = 30\n'), encoding="utf-8")
    r = tf("check", "--format", "json", cwd=example_project)
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    codes = {(f["code"], f["file"], f["line"]) for f in doc["findings"]}
    assert ("disabled-no-reference", "tests/e2e/megatron/amd/test_amd_r3_mtp.py", 3) in codes
    assert ("disabled-no-reference", "tests/e2e/megatron/test_qwen3_4B_offload_disk_stream.py", 8) in codes
    assert any(c[0] == "coverage-hole" for c in codes)
    assert any(c[0] == "disabled-age-unknown" for c in codes)  # not a git repository
    holes = [f for f in doc["findings"] if f["code"] == "coverage-hole"]
    assert {f["severity"] for f in holes} == {"error"}


def test_ages_from_git_history(example_project: Path) -> None:
    """The example committed in a repository with dated commits: real ages, oldest first."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@e", GIT_CONFIG_NOSYSTEM="1")

    def git(*args: str, date: str | None = None) -> None:
        e = dict(env, **({"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else {}))
        subprocess.run(["git", *args], cwd=example_project, env=e, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "import", date="2025-01-15T10:00:00+00:00")
    amd = example_project / "tests/e2e/megatron/amd/test_amd_r3_mtp.py"
    amd.write_text(amd.read_text(encoding="utf-8").replace(
        "Disable due to failure", "R3 MTP diverges on ROCm, see #2237"), encoding="utf-8")
    git("commit", "-q", "-am", "re-justify", date="2026-11-20T10:00:00+00:00")
    r = tf("report", "--format", "json", cwd=example_project)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["git"] == "full history"
    ledger = {e["file"]: e for e in data["ledger"]}
    fresh = ledger["tests/e2e/megatron/amd/test_amd_r3_mtp.py"]
    old = ledger["tests/e2e/fsdp/test_fsdp2_mixed_precision.py"]
    assert fresh["age"]["changed"] == "2026-11-20" and fresh["references"][0]["text"] == "#2237"
    assert old["age"]["changed"] == "2025-01-15" and old["age"]["status"] == "committed"
    assert old["age"]["days"] > fresh["age"]["days"]
    ages = [e["age"]["days"] for e in data["ledger"] if not (e["expiry"] or {}).get("expired")]
    assert ages == sorted(ages, reverse=True)


def test_registry_errors_are_a_note_not_a_crash(example_project: Path) -> None:
    bad = example_project / "tests/unit/test_broken_marker.py"
    bad.write_text('from testfleet import register_cpu_ci\n\nregister_cpu_ci(est_time="x", suite=1)\n',
                   encoding="utf-8")
    r = tf("report", "--format", "json", cwd=example_project)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert any("testfleet check" in n for n in data["notes"])
    assert data["holes"][0]["name"] == "rocm"


def test_non_utf8_terminal_gets_replacement_characters_not_a_traceback(example_project: Path) -> None:
    import os

    r = subprocess.run([sys.executable, "-m", "testfleet.cli.main", "report"], cwd=example_project,
                       capture_output=True, timeout=120, env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert r.returncode == 0, r.stderr.decode()
    assert b"COVERAGE HOLES (2)" in r.stdout and b"Traceback" not in r.stderr


def test_source_date_epoch_makes_reports_reproducible(example_project: Path) -> None:
    import os

    env = {**os.environ, "SOURCE_DATE_EPOCH": "1780000000"}
    outs = [subprocess.run([sys.executable, "-m", "testfleet.cli.main", "report", "--format", fmt],
                           cwd=example_project, capture_output=True, text=True, timeout=120, env=env)
            for fmt in ("json", "json", "html", "html")]
    assert all(o.returncode == 0 for o in outs), [o.stderr for o in outs]
    assert outs[0].stdout == outs[1].stdout and outs[2].stdout == outs[3].stdout
    assert json.loads(outs[0].stdout)["generated"] == "2026-05-28T20:26:40Z"
    bad = subprocess.run([sys.executable, "-m", "testfleet.cli.main", "report"], cwd=example_project,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "SOURCE_DATE_EPOCH": "yesterday"})
    assert bad.returncode == 2 and "SOURCE_DATE_EPOCH" in bad.stderr


def test_relative_paths_follow_dash_c(example_project: Path, plan_file: Path,
                                      tmp_path: Path) -> None:
    """`-C DIR` runs as if started in DIR (as plan and run do): --plan and --output
    relative paths are DIR's, not the shell's directory."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = tf("-C", str(example_project), "report", "--plan", plan_file.name,
           "--format", "json", "--output", "r.json", cwd=elsewhere)
    assert r.returncode == 0, r.stderr
    assert json.loads((example_project / "r.json").read_text())["plan"] is not None
    assert not (elsewhere / "r.json").exists()


def test_absurd_terminal_width_is_clamped(example_project: Path) -> None:
    """COLUMNS far beyond --width's range (400) kept rich rendering for minutes."""
    import os

    r = subprocess.run([sys.executable, "-m", "testfleet.cli.main", "report"], cwd=example_project,
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "COLUMNS": "99999999"})
    assert r.returncode == 0, r.stderr
    assert max(len(line) for line in r.stdout.splitlines()) <= 400
