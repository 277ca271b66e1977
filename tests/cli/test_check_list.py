"""``testfleet check`` and ``testfleet list`` through the real entry point."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from testfleet.cli.main import main as cli_main

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "fleet"

CONFIG = """\
roots = ["tests"]

[labels]
megatron = "Megatron"
amd = "AMD"

[stages.stage-a-cpu]
backend = "cpu"

[stages.stage-c-gpu]
backend = "cuda"

[stages.stage-r]
backend = "rocm"
disabled = "runners down"
"""

FILES = {
    "tests/test_a.py": "from testfleet import register_cpu_ci\nregister_cpu_ci(5, 'stage-a-cpu')\n",
    "tests/test_b.py": "from testfleet import register_cuda_ci, register_rocm_ci\n"
                       "register_cuda_ci(100, 'stage-c-gpu', labels=['megatron'], nightly=True)\n"
                       "register_rocm_ci(100, 'stage-r', labels=['amd', 'megatron'], disabled='=HYPERLINK(\"x\")')\n",
}
BROKEN = {"tests/test_c.py": "from testfleet import register_cpu_ci\nregister_cpu_ci(5, 'stage-a-cpux')\n"}


@pytest.fixture
def project(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    def make(extra: dict[str, str] | None = None, config: str = CONFIG) -> Path:
        root = tmp_path / "p"
        root.mkdir(exist_ok=True)
        (root / "testfleet.toml").write_text(config)
        for rel, text in {**FILES, **(extra or {})}.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        return root

    return make


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[int, str, str]]:
    def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
        monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        capsys.readouterr()
        try:
            cli_main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


@pytest.fixture
def only_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Format tests look at collection findings only, not at other areas' producers."""
    from testfleet.cli import check

    monkeypatch.setattr(check, "PRODUCERS", [])


def test_check_clean_tree_exits_zero(project, run) -> None:
    code, out, _ = run("-C", str(project()), "check")
    assert code == 0
    assert "testfleet check: ok: 0 errors," in out and "(2 files, 3 registrations, 0 gates)" in out


def test_check_summary_line(project, run, only_collection) -> None:
    code, out, _ = run("-C", str(project()), "check")
    assert (code, out) == (0, "testfleet check: ok: 0 errors, 0 warnings (2 files, 3 registrations, 0 gates)\n")


def test_check_groups_findings_by_file_and_exits_one(project, run, only_collection) -> None:
    root = project({**BROKEN, "tests/test_d.py": "x = 1\n"})
    code, out, _ = run("-C", str(root), "check")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "tests/test_c.py"
    assert lines[1].split() == ["2:20", "error", "suite", "'stage-a-cpux'", *lines[1].split()[4:]]
    assert "did you mean 'stage-a-cpu'?" in lines[1]
    assert lines[2] == "tests/test_d.py"
    assert "unregistered" in lines[3]
    assert lines[-1].startswith("testfleet check: FAILED: 2 errors, 0 warnings")


def test_check_json_document(project, run, only_collection) -> None:
    code, out, _ = run("-C", str(project(BROKEN)), "check", "--format", "json")
    doc = json.loads(out)
    assert code == 1
    assert (doc["schema"], doc["ok"], doc["errors"], doc["warnings"]) == ("testfleet.check/1", False, 1, 0)
    (f,) = doc["findings"]
    assert (f["file"], f["line"], f["col"], f["severity"], f["code"]) == ("tests/test_c.py", 2, 20, "error",
                                                                           "unknown-suite")


def test_check_github_annotations(project, run, tmp_path: Path, only_collection) -> None:
    root = project(BROKEN)
    code, out, _ = run("-C", str(root), "check", env={"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(tmp_path)})
    assert code == 1
    (ann,) = [ln for ln in out.splitlines() if ln.startswith("::")]
    assert ann.startswith("::error file=p/tests/test_c.py,line=2,col=20,title=testfleet unknown-suite::suite ")
    # each finding once: the annotation, not also a text line; the summary still counts it
    assert out.count("is not a configured stage") == 1
    assert "testfleet check: FAILED: 1 error" in out
    # In JSON mode stdout stays a JSON document; annotations go to stderr.
    code, out, err = run("-C", str(root), "check", "--format", "json", env={"GITHUB_ACTIONS": "true"})
    json.loads(out)
    assert err.startswith("::error file=tests/test_c.py,line=2,col=20")


def test_check_reports_config_errors_as_findings(project, run) -> None:
    root = project(config=CONFIG + "[stages.bad]\nbackend = 'cpu'\ncommand = 'bash'\nshards = -1\n")
    code, out, _ = run("-C", str(root), "check")
    assert code == 1
    assert out.splitlines()[0] == "testfleet.toml"
    assert "[stages.bad.command]" in out and "[stages.bad.shards]" in out  # both, in one pass


def test_check_without_config_is_a_usage_error(tmp_path: Path, run) -> None:
    code, _, err = run("-C", str(tmp_path), "check")
    assert code == 2 and "no testfleet configuration found" in err


def test_check_bad_option_is_a_usage_error(project, run) -> None:
    code, _, err = run("-C", str(project()), "check", "--format", "xml")
    assert code == 2 and "xml" in err


def test_check_merges_extra_producers(project, run, monkeypatch: pytest.MonkeyPatch) -> None:
    from testfleet.cli import check
    from testfleet.findings import Finding

    def extra(project, registry, scope):  # type: ignore[no-untyped-def]
        return [Finding("tests/test_a.py", 1, 1, "warning", "extra", f"{len(registry.registrations)} seen")]

    def broken(project, registry, scope):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")

    monkeypatch.setattr(check, "PRODUCERS", [extra, broken])
    code, out, _ = run("-C", str(project()), "check", "--format", "json")
    doc = json.loads(out)
    assert code == 1
    assert {(f["code"], f["message"]) for f in doc["findings"]} >= {("extra", "3 seen")}
    assert any(f["code"] == "internal" and "boom" in f["message"] for f in doc["findings"])


def test_list_json_rows(project, run) -> None:
    code, out, _ = run("-C", str(project()), "list", "--format", "json")
    assert code == 0
    rows = json.loads(out)["registrations"]
    assert [(r["file"], r["backend"]) for r in rows] == [("tests/test_a.py", "cpu"), ("tests/test_b.py", "cuda"),
                                                        ("tests/test_b.py", "rocm")]
    assert rows[1] == {"file": "tests/test_b.py", "line": 2, "backend": "cuda", "suite": "stage-c-gpu",
                       "est_time": 100.0, "labels": ["megatron"], "nightly": True, "disabled": None,
                       "implicit": False}
    assert out.count("\n") == len(rows) + 2  # one object per line


@pytest.mark.parametrize(("args", "expected"), [
    (["--stage", "stage-r"], [("tests/test_b.py", "rocm")]),
    (["--backend", "cuda", "--backend", "cpu"], [("tests/test_a.py", "cpu"), ("tests/test_b.py", "cuda")]),
    (["--label", "megatron"], [("tests/test_b.py", "cuda"), ("tests/test_b.py", "rocm")]),
    (["--label", "amd", "--backend", "cuda"], []),
    (["--disabled"], [("tests/test_b.py", "rocm")]),
])
def test_list_filters(args: list[str], expected: list[tuple[str, str]], project, run) -> None:
    code, out, _ = run("-C", str(project()), "list", "--format", "json", *args)
    assert code == 0
    assert [(r["file"], r["backend"]) for r in json.loads(out)["registrations"]] == expected


def test_list_unknown_filter_value_is_a_usage_error(project, run) -> None:
    code, _, err = run("-C", str(project()), "list", "--label", "megatorn")
    assert code == 2 and "did you mean 'megatron'?" in err


def test_list_csv_is_spreadsheet_safe(project, run) -> None:
    code, out, _ = run("-C", str(project()), "list", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and len(rows) == 3
    rocm = rows[2]
    assert rocm["labels"] == "amd;megatron" and rocm["disabled"] == "'=HYPERLINK(\"x\")"
    assert rows[1]["nightly"] == "true" and rows[0]["est_time"] == "5.0"


def test_list_table(project, run) -> None:
    code, out, _ = run("-C", str(project()), "list")
    assert code == 0
    assert "tests/test_b.py:3" in out and "disabled: =HYPERLINK" in out and "3 of 3 registrations" in out


def test_list_with_errors_prints_what_it_has_and_exits_one(project, run) -> None:
    code, out, err = run("-C", str(project(BROKEN)), "list", "--format", "json")
    assert code == 1
    assert len(json.loads(out)["registrations"]) == 3
    assert "tests/test_c.py:2:20: error: suite 'stage-a-cpux'" in err
    assert "run 'testfleet check'" in err


def test_hostile_names_do_not_reach_the_terminal_raw(project, run) -> None:
    root = project({"tests/test_e.py": "from testfleet import register_cpu_ci\n"
                    "register_cpu_ci(5, 'stage-a-cpu', disabled='[bold]x\\x1b[2J')\n"})
    code, out, _ = run("-C", str(root), "list")
    assert code == 0 and "\x1b[2J" not in out and "[bold]x" in out


def test_example_project_check_and_list() -> None:
    """The showcase passes ``check`` and ``list`` shows every registration (a real subprocess)."""
    env_cmd = [sys.executable, "-m", "testfleet.cli.main", "-C", str(EXAMPLE)]
    check = subprocess.run([*env_cmd, "check", "--no-cache"], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    listed = subprocess.run([*env_cmd, "list", "--format", "json", "--no-cache"], capture_output=True, text=True,
                            timeout=120)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["registrations"]
    files = {p.relative_to(EXAMPLE).as_posix() for p in (EXAMPLE / "tests").rglob("test_*.py")
             if "manual" not in p.parts}
    assert {r["file"] for r in rows} == files
    assert {r["backend"] for r in rows} == {"cpu", "cuda", "rocm"}
    assert any(r["implicit"] for r in rows) and any(r["disabled"] for r in rows) and any(r["nightly"] for r in rows)


def test_check_strict_fails_on_warnings(project, run, only_collection) -> None:
    root = project({"tests/test_c.py": "from testfleet import register_cpu_ci\n"
                    "register_cpu_ci(5, 'stage-a-cpu', labels=['amd', 'amd'])\n"})
    assert run("-C", str(root), "check")[0] == 0
    assert run("-C", str(root), "check", "--strict")[0] == 1


def test_list_table_on_a_terminal_uses_rich(project, run, monkeypatch: pytest.MonkeyPatch) -> None:
    root = project({"tests/test_e.py": "from testfleet import register_cpu_ci\n"
                    "register_cpu_ci(5, 'stage-a-cpu', disabled='[bold]x\\x1b[2J')\n"})
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    code, out, _ = run("-C", str(root), "list")
    assert code == 0
    assert "┃" in out or "│" in out  # rich's table
    assert "[bold]x" in out and "\x1b[2J" not in out
    assert "4 of 4 registrations" in out


@pytest.mark.parametrize("no_color", [False, True])
def test_check_text_honours_no_color_on_a_terminal(project, run, only_collection,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   no_color: bool) -> None:
    root = project(BROKEN)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    code, out, _ = run("-C", str(root), "check", env={"NO_COLOR": "1"} if no_color else None)
    assert code == 1
    assert "tests/test_c.py" in out and "error" in out
    assert ("\x1b[" in out) is not no_color


def test_closed_stdout_is_not_a_finding(project) -> None:
    """`testfleet check | head` with the reader gone before anything is written: no
    traceback, and not exit 1 (which means findings) but 141, as for SIGPIPE."""
    import os

    root = project(BROKEN)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "testfleet.cli.main", "-C", str(root), "check"],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr
