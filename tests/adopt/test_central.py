"""Central suite lists (issue #42): SGLang at 6bc306289 keeps 30 suites as ``TestFile``
entries in ``test/srt/run_suite.py`` (five dicts, commented-out entries, a list kept out of
CI) beside a first directory that already registers in-file. ``init --from-existing
--migrate`` writes the registrations; adopting the migrated tree then selects, suite by
suite and event by event, exactly what that ``run_suite.py`` itself selects, run as a
subprocess against a stand-in for ``sglang.test.ci.ci_utils`` (its ``TestFile`` as the
tree declares it, a ``run_unittest_files`` that runs nothing): the script's own sanity
check, suite table and partitioning are the real ones."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support import run_cli
from testfleet.adopt.central import CentralError, find_central_lists, read_central_list
from testfleet.adopt.migrate import Vocabulary, Wanted, migrate_file
from testfleet.config import load_project
from testfleet.planning import make_plan
from testfleet.planning.changes import ChangeSet
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest
from testfleet.registry import collect

FIXTURE = Path(__file__).parents[1] / "fixtures/real_trees/sglang-central"

CI_UTILS = '''
from dataclasses import dataclass


@dataclass
class TestFile:
    name: str
    estimated_time: float = 60


def run_unittest_files(files, timeout_per_file, continue_on_error=False):
    return 0
'''


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "sglang"
    shutil.copytree(FIXTURE, root)
    return root


@pytest.fixture(scope="module")
def stub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("stub")
    pkg = base / "sglang/test/ci"
    pkg.mkdir(parents=True)
    for d in (base / "sglang", base / "sglang/test", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "ci_utils.py").write_text(CI_UTILS)
    return base


def runner_selects(tree: Path, stub: Path, suite: str, size: int | None) -> set[str]:
    """What ``python3 run_suite.py --suite S [--auto-partition-id I --auto-partition-size N]``
    prints it runs, over every partition, as repository paths."""
    out: set[str] = set()
    for part in range(size or 1):
        args = ["--auto-partition-id", str(part), "--auto-partition-size", str(size)] if size else []
        proc = subprocess.run([sys.executable, "run_suite.py", "--suite", suite, *args],
                              cwd=tree / "test/srt", capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(stub)})
        assert proc.returncode == 0, proc.stderr
        line = next(x for x in proc.stdout.splitlines() if x.startswith("The running tests are"))
        out |= {f"test/srt/{n}" for n in ast.literal_eval(line.split("are", 1)[1].strip())}
    return out


_CALL = re.compile(r"run_suite\.py --suite ([\w.-]+)(.*)")
#: the events each workflow that starts test/srt/run_suite.py runs on, from its ``on:``
#: (a paths filter as the list of prefixes it matches; push on main only)
WORKFLOWS = {
    "pr-test.yml": {"push": None, "pull_request": None, "workflow_dispatch": None},
    "pr-test-npu.yml": {"push": None, "pull_request": None, "workflow_dispatch": None},
    "pr-test-xpu.yml": {"push": None, "pull_request": None, "workflow_dispatch": None},
    "pr-test-amd.yml": {"push": "python/", "pull_request": "python/", "workflow_dispatch": None},
    "pr-test-xeon.yml": {"push": "python/", "pull_request": "python/", "workflow_dispatch": None},
    "quantization-test.yml": {"push": "python/", "pull_request": "python/",
                              "workflow_dispatch": None},
    "nightly-test.yml": {"push": "python/sglang/version.py", "schedule": None,
                         "workflow_dispatch": None},
    "nightly-test-nvidia.yml": {"push": "python/sglang/version.py", "schedule": None,
                                "workflow_dispatch": None},
    "nightly-test-amd.yml": {"push": "python/sglang/version.py", "schedule": None,
                             "workflow_dispatch": None},
}
CASES = {  # id -> (trigger, changed paths, the event that delivers it)
    "push": (Trigger(event="push"), ("python/sglang/srt/server_args.py",), "push"),
    "push-version": (Trigger(event="push"), ("python/sglang/version.py",), "push"),
    "pr": (Trigger(event="pull_request", labels=("run-ci",)),
           ("python/sglang/srt/server_args.py",), "pull_request"),
    "pr-unlabelled": (Trigger(event="pull_request"), ("python/sglang/srt/server_args.py",),
                      "pull_request"),
    "nightly": (Trigger(event="schedule", cadence="nightly"), None, "schedule"),
    "manual": (Trigger(event="workflow_dispatch", match_all_labels=True), None,
               "workflow_dispatch"),
}


def existing_ci(tree: Path) -> dict[str, list[tuple[str, int | None]]]:
    """suite -> (workflow, partition count) of every step that starts the central runner
    with ``--suite`` (the registration runner's calls pass ``--hw``)."""
    calls: dict[str, list[tuple[str, int | None]]] = {}
    for wf in WORKFLOWS:
        for line in (tree / ".github/workflows" / wf).read_text().splitlines():
            m = _CALL.search(line)
            if m and "--hw" not in line:
                size = re.search(r"--auto-partition-size (\d+)", m.group(2))
                calls.setdefault(m.group(1), []).append((wf, int(size.group(1)) if size else None))
    return calls


def runs(wf: str, case: str) -> bool:
    _, changed, event = CASES[case]
    on = WORKFLOWS[wf]
    if event not in on:
        return False
    if case == "pr-unlabelled":  # every job waits for the run-ci label (pr-gate / job if:)
        return False
    prefix = on[event]
    return prefix is None or any(p.startswith(prefix) for p in changed or ())


def migrate(tree: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing", "--migrate", *extra)
    return code, out + err


def snapshot(tree: Path) -> dict[str, bytes]:
    return {p.relative_to(tree).as_posix(): p.read_bytes() for p in sorted(tree.rglob("*"))
            if p.is_file()}


def test_sglang_central_lists_migrate_to_what_its_runner_selects(
        tree: Path, stub: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lists = read_central_list(tree, "test/srt/run_suite.py")
    assert find_central_lists(tree) == ["test/srt/run_suite.py"]
    assert lists.dicts == ["suites", "suite_amd", "suite_xeon", "suite_xpu", "suite_ascend"]
    assert (len(lists.suites), len(lists.entries), len(lists.not_in_ci)) == (30, 301, 80)
    assert sum(1 for e in lists.entries if e.disabled) == 21
    assert lists.unit_source == "estimated_time is in seconds: python/sglang/test/ci/ci_utils.py:79"

    before = snapshot(tree)
    code, out = migrate(tree, capsys)
    assert code == 0, out
    assert "wrote 299 registration line(s) into 221 file(s)" in out
    assert "left alone: test/srt/hicache/test_hicache.py: listed but not on disk" in out
    after = snapshot(tree)
    assert after["test/srt/run_suite.py"] == before["test/srt/run_suite.py"]  # the list is kept
    changed = [f for f in after if after[f] != before[f]]
    assert len(changed) == 221 and all(f.startswith("test/srt/") for f in changed)
    # a line of each kind: the project's marker, testfleet's own where it has none or its
    # marker takes no disabled=, two suites of one file as two lines
    amd = after["test/srt/test_mla.py"].decode()
    assert "from sglang.test.ci.ci_register import register_cuda_ci\nfrom testfleet import " \
        "register_amd_ci\n\nregister_cuda_ci(est_time=180, suite=\"per-commit-1-gpu\")\n" in amd
    assert ('register_amd_ci(est_time=242, suite="per-commit-amd", disabled="Disabled '
            'temporarily, see https://github.com/sgl-project/sglang/issues/13107")\n'
            'register_amd_ci(est_time=242, suite="per-commit-amd-mi35x")\n') in amd
    assert 'register_npu_ci(est_time=400, suite="per-commit-16-npu-a3")' in \
        after["test/srt/ascend/test_ascend_deepep.py"].decode()

    report = tree / "adoption.md"
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing", "--allow-findings",
                             "--report", str(report))
    assert code == 0, out + err
    # empty suites are said, once each, in the report (init prints a summary with --report)
    text = report.read_text()
    for suite in ("per-commit-8-gpu-b200", "nightly-8-gpu", "nightly-8-gpu-h20"):
        assert text.count(f"suite {suite!r} of test/srt/run_suite.py lists no file") == 1, suite
    # the draft block of pr-gate.yml is not something policy.drafts can say for some stages
    # only: the report compares a draft pull request and says where the sides differ
    draft = text.split("### PR draft, run-ci:")[1].split("\n## ")[0]
    assert "Same stages on both sides" not in draft
    assert "| `per-commit-1-gpu` | no | 120 | the existing job fails on a draft pull request" in draft
    # the one finding is the in-file half's own (test/per_commit registers one file for
    # CUDA and AMD to one suite), never the marker module nor a migrated file
    assert [line.split(":")[0] for line in err.splitlines() if ": error:" in line] == \
        ["test/per_commit/test_srt_backend.py"]
    code, out, err = run_cli(capsys, "-C", str(tree), "check", "--format", "json")
    assert json.loads(out)["errors"] == 0, out

    # Stages whose tests the existing CI starts through a wrapper (amd_ci_exec.sh or
    # docker exec enter a container) are adopted dormant, with the line to change (#38): the selection is
    # compared with that line removed, as the maintainer would after carrying the wrapper.
    import tomlkit

    config_path = tree / "testfleet.toml"
    doc = tomlkit.parse(config_path.read_text())
    incomplete = {name: str(stage.pop("disabled")) for name, stage in doc["stages"].items()
                  if str(stage.get("disabled", "")).startswith("adoption incomplete")}
    wrappers = ("amd_ci_exec.sh", "docker exec")
    assert incomplete and all(any(w in why for w in wrappers) for why in incomplete.values()), \
        [why for why in incomplete.values() if not any(w in why for w in wrappers)]
    config_path.write_text(tomlkit.dumps(doc))
    project = load_project(tree)
    registry = collect(project, use_cache=False)
    calls = existing_ci(tree)
    selects: dict[tuple[str, int | None], set[str]] = {}
    compared = 0
    diverged: list[tuple[str, str, list[str], list[str]]] = []
    for case, (trigger, changed, _) in CASES.items():
        changes = ChangeSet(paths=changed, source="test") if changed else None
        plan = make_plan(project, registry, PlanRequest(trigger=trigger, changes=changes))
        for suite in lists.suites:
            planned = {t.file for j in plan.jobs if j.stage == suite for t in j.tests}
            expected: set[str] = set()
            for wf, size in calls.get(suite, []):
                if runs(wf, case):
                    if (suite, size) not in selects:
                        selects[suite, size] = runner_selects(tree, stub, suite, size)
                    expected |= selects[suite, size]
            if planned != expected:
                diverged.append((case, suite, sorted(planned - expected), sorted(expected - planned)))
            compared += 1
    assert compared == 30 * len(CASES) == 180
    # The one divergence is the runner's own: per-commit-8-gpu-amd lists 2 files and its job
    # asks for 3 partitions, and auto_partition returns nothing when there are more parts
    # than files (``size > len(weights)``), so the existing CI runs none of them on any
    # event; testfleet runs both. Copying that would hide two tests: it is reported instead.
    amd8 = ["test/srt/test_deepseek_v3_basic.py", "test/srt/test_deepseek_v3_mtp.py"]
    assert calls["per-commit-8-gpu-amd"] == [("pr-test-amd.yml", 3)]
    assert diverged == [(case, "per-commit-8-gpu-amd", amd8, [])
                        for case in ("push", "push-version", "pr", "manual")]


def test_migrating_twice_changes_nothing(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(tree)
    code, out = migrate(tree, capsys, "--dry-run")
    assert code == 0 and snapshot(tree) == before  # a dry run writes nothing ...
    assert "+++ b/test/srt/test_abort.py" in out  # ... and shows the whole change
    assert 'register_cuda_ci(est_time=190, suite="per-commit-1-gpu")' in out
    assert migrate(tree, capsys)[0] == 0
    once = snapshot(tree)
    assert once != before
    code, out = migrate(tree, capsys)
    assert code == 0, out
    assert "wrote 0 registration line(s) into 0 file(s)" in out
    assert "221 file(s) already hold their registrations: unchanged" in out
    assert snapshot(tree) == once


def _wanted(suite: str, file: str, est: float, disabled: str | None = None,
            backend: str = "cuda") -> Wanted:
    from testfleet.adopt.central import ListEntry

    return Wanted(backend, ListEntry(suite, file, file, est, 1, disabled))


def test_a_file_that_does_not_parse_or_already_registers_is_left_alone() -> None:
    vocab = Vocabulary()
    got = migrate_file(b"import os\nclass X(:\n", [_wanted("s", "a.py", 5)], vocab)
    assert got.new is None and got.why is not None and "does not parse (line 2" in got.why
    other = b"from testfleet import register_cuda_ci\n\nregister_cuda_ci(5, 'other')\n"
    got = migrate_file(other, [_wanted("s", "a.py", 5)], vocab)
    assert got.why == "already registers in-file (register_cuda_ci 'other'): left alone"
    # CRLF files keep CRLF; the lines go after the imports, the docstring stays first
    got = migrate_file(b'"""Doc."""\r\nimport os\r\n\r\n\r\ndef test_x():\r\n    pass\r\n',
                       [_wanted("s", "a.py", 1.5, "flaky, see #12", "npu")], vocab)
    assert got.new == (b'"""Doc."""\r\nimport os\r\nfrom testfleet import register_npu_ci\r\n\r\n'
                       b'register_npu_ci(est_time=1.5, suite="s", disabled="flaky, see #12")\r\n'
                       b'\r\n\r\ndef test_x():\r\n    pass\r\n')


LIST = '''
from dataclasses import dataclass


@dataclass
class TestFile:
    name: str
    minutes: float = 2


suites = {
    "a": [
        TestFile("test_a.py", 3),
        # flaky on the new runners, see #7
        # TestFile("test_b.py", 1),
        TestFile("../other/test_c.py"),
        TestFile("test_d.py", 1, extra_deps=["x"]),
    ],
    "b": [],
}
'''


def test_the_unit_is_asked_for_when_the_code_does_not_show_it(tmp_path: Path) -> None:
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci/run.py").write_text(textwrap.dedent(LIST))
    with pytest.raises(CentralError, match="pass --time-unit seconds or --time-unit minutes"):
        read_central_list(tmp_path, "ci/run.py")
    cl = read_central_list(tmp_path, "ci/run.py", "minutes")
    assert cl.unit_source == "minutes is in minutes: as --time-unit says"
    a = {e.file: e for e in cl.suites["a"]}
    assert a["ci/test_a.py"].est_time == 180
    assert a["other/test_c.py"].est_time == 120  # the class's default, in minutes
    assert a["ci/test_b.py"].disabled == "flaky on the new runners, see #7"
    assert a["ci/test_d.py"].extra == ("extra_deps=['x']",)
    assert cl.suites["b"] == []
    # a field commented in seconds is shown by the code: the flag is not needed
    (tmp_path / "ci/run.py").write_text(textwrap.dedent(LIST).replace(
        "minutes: float = 2", "est: float = 2  # seconds"))
    assert read_central_list(tmp_path, "ci/run.py").time_unit == "seconds"


def test_a_tree_with_neither_says_what_it_looked_for_and_writes_the_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "test").mkdir()
    (tmp_path / "test/test_x.py").write_text("def test_x():\n    pass\n")
    code, _out, err = run_cli(capsys, "-C", str(tmp_path), "init", "--from-existing",
                             "--report", str(tmp_path / "adoption.md"))
    assert code == 2
    assert "no register_<backend>_ci(...) calls under test and no central suite list" in err
    assert "--root DIR" in err and "'testfleet init' (without --from-existing)" in err
    assert "no central suite list" in (tmp_path / "adoption.md").read_text()


def test_a_central_tree_points_at_migrate(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.rmtree(tree / "test/per_commit")
    code, _out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing", "--dry-run")
    assert code == 2
    assert "lists its suites centrally (test/srt/run_suite.py)" in err
    assert "testfleet init --from-existing --migrate --dry-run" in err


def test_a_half_migrated_tree_is_read_whole(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The in-file half alone is not adopted as if it were the whole tree."""
    code, _out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing", "--dry-run")
    assert code == 1
    assert ("test/srt/run_suite.py:10: error: 280 entries of its central suite lists (27 suites: "
            "nightly-1-gpu, nightly-4-gpu, nightly-4-gpu-b200, nightly-8-gpu-b200, nightly-8-gpu-h200, "
            "...) are not registered in their files") in err


def test_the_module_that_defines_the_markers_is_never_a_finding(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "test").mkdir()
    (tmp_path / "test/ci_register.py").write_text(textwrap.dedent('''
        def register_cpu_ci(est_time: float, suite: str):
            pass


        MARKERS = {"cpu": register_cpu_ci}
    '''))
    (tmp_path / "test/test_a.py").write_text(
        "from test.ci_register import register_cpu_ci\n\nregister_cpu_ci(5, 'unit')\n")
    code, out, err = run_cli(capsys, "-C", str(tmp_path), "init", "--from-existing")
    assert code == 0 and "error" not in err, out + err
    code, out, err = run_cli(capsys, "-C", str(tmp_path), "check")
    assert code == 0, out + err


def test_the_test_steps_own_settings_are_carried_or_listed() -> None:
    """The test step's env, the commands before the runner in its run:, its time limit and
    a wrapper the runner is started through: carried where a stage holds them, else one
    line each of what is not carried over."""
    from testfleet.adopt.ci_model import CIStage, NotCarried
    from testfleet.adopt.job import _shell_item
    from testfleet.adopt.test_step import carry_test_step, runner_lines

    stage = CIStage(name="s", workflow="pr.yml", job="gpu", events=("pull_request",), env={"A": "1"},
                    timeout_minutes=90)
    told: list[NotCarried] = []
    step = {"name": "Run test", "timeout-minutes": 60,
            "env": {"CUDA_VISIBLE_DEVICES": "0,1", "IN_CI": True, "A": "2",
                    "TOKEN": "${{ secrets.T }}"},
            "run": "cd test/srt\npip install -e .[test]\n"
                   "bash scripts/exec.sh python3 run_suite.py --suite s --reruns 2\n"}
    items = carry_test_step(step, "pr.yml job gpu", stage, told, _shell_item)
    assert items == ["cd test/srt\npip install -e .[test]"]
    assert stage.env == {"A": "1", "CUDA_VISIBLE_DEVICES": "0,1", "IN_CI": "true"}
    assert stage.timeout_minutes == 60
    assert [n.render() for n in told] == [
        "pr.yml job gpu: step 'Run test': env A='2' -- the job's env sets it to '1'; a stage has one value",
        "pr.yml job gpu: step 'Run test': env TOKEN -- computed at run time (a ${{ }} expression)",
        "pr.yml job gpu: step 'Run test': the runner is started through 'bash scripts/exec.sh' -- "
        "testfleet starts each file itself; a wrapper (a container exec, a script) goes into the "
        "stage's command or setup by hand"]
    # a step that only installs a runner does not run the tests
    assert runner_lines("pip install pytest expecttest\n") == []
    assert runner_lines("cd test && python3 -m pytest -x unit\n") == ["cd test && python3 -m pytest -x unit"]
