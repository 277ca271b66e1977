"""Stage variants (#12): one suite on several runner classes or images, each variant
planned as its own jobs with its own runners, container, timeouts, fates, counts and
duration history; carried by the GitHub workflow (one job per variant), the Buildkite
pipeline and the runner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testfleet.config import validate_config
from testfleet.errors import ConfigError, UsageError
from testfleet.integrations.buildkite import pipeline
from testfleet.integrations.github_workflow import render_workflow, stage_job_ids
from testfleet.integrations.plan_formats import github_outputs, render_markdown, render_table
from testfleet.planning import make_plan
from testfleet.planning.lanes import find_lane, stage_lanes
from testfleet.planning.model import Plan, load_plan, plan_bytes
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest
from testfleet.runner.jobs import build_spec, select_plan_job, select_stage_jobs
from testfleet.runner.model import RunOptions
from testfleet.runner.settings import run_options

from .conftest import make_project, reg

PUSH = Trigger(event="push")

GPU: dict[str, Any] = {
    "backend": "cuda", "runs_on": ["self-hosted", "h100"], "env": {"NCCL_DEBUG": "WARN"},
    "job_timeout_factor": 3.0, "needs": ["unit"], "secrets": ["HF_TOKEN"],
    "variants": {
        "h200": {"runs_on": ["self-hosted", "h200"], "container": "nvcr.io/nvidia/pytorch:24.05-py3",
                 "job_timeout_minutes": 90, "file_timeout": 600, "env": {"GPU": "h200"},
                 "max_attempts": 3},
        "b200": {"runs_on": ["self-hosted", "b200"], "setup": ["nvidia-smi"]},
    },
}


def config(gpu: dict[str, Any] | None = None, **more_stages: Any) -> Any:
    return validate_config({"stages": {"unit": {"backend": "cpu"}, "gpu": gpu or GPU,
                                       **more_stages}})


REGS = [
    reg("tests/test_unit.py", "unit", 5, backend="cpu"),
    reg("tests/test_a.py", "gpu", 100, backend="cuda"),
    reg("tests/test_b.py", "gpu", 200, backend="cuda"),
    reg("tests/test_off.py", "gpu", 50, backend="cuda", disabled="flaky, see #1"),
]


def plan(cfg: Any = None, regs: Any = None, estimates: Any = None, **request: Any) -> Plan:
    return make_plan(make_project(cfg or config()), REGS if regs is None else regs,
                     PlanRequest(trigger=request.pop("trigger", PUSH), **request), estimates)


def lane(p: Plan, key: str) -> Any:
    return next(s for s in p.stages if s.lane == key)


def fates(p: Plan) -> dict[tuple[str, str], str]:
    out = {(s.file, s.lane): s.reason for s in p.skipped}
    out.update({(t.file, j.lane): "job" for j in p.jobs for t in j.tests})
    return out


# -- configuration ----------------------------------------------------------------------


def test_a_variant_overrides_the_stage_table_and_merges_env() -> None:
    gpu = config().stages["gpu"]
    h200 = gpu.with_variant("h200")
    assert h200.runs_on == ["self-hosted", "h200"]
    assert h200.container is not None and h200.container.image.startswith("nvcr.io/")
    assert h200.env == {"NCCL_DEBUG": "WARN", "GPU": "h200"}
    # either job timeout key of the variant replaces the stage's pair (no conflict)
    assert (h200.job_timeout_minutes, h200.job_timeout_factor) == (90, None)
    b200 = gpu.with_variant("b200")
    assert (b200.job_timeout_minutes, b200.job_timeout_factor) == (None, 3.0)
    assert b200.secrets == ["HF_TOKEN"] and b200.setup == ["nvidia-smi"] and b200.container is None
    assert [ln.key for ln in stage_lanes(config(), "gpu")] == ["gpu.b200", "gpu.h200"]
    assert find_lane(config(), "gpu") is None  # a stage with variants runs only as its variants
    assert find_lane(config(), "unit") is not None and find_lane(config(), "gpu.nope") is None


@pytest.mark.parametrize(("variant", "key", "words"), [
    ({"secrets": ["GITHUB_TOKEN"]}, "stages.gpu.variants.v.secrets", "not a secret name"),
    ({"setup": [" "]}, "stages.gpu.variants.v.setup", "setup command is empty"),
    ({"container": "img with space"}, "stages.gpu.variants.v.container.image", "whitespace"),
    ({"runs_on": []}, "stages.gpu.variants.v.runs_on", "at least 1"),
    ({"backend": "npu"}, "stages.gpu.variants.v.backend", "unknown backend 'npu'"),
    ({"disabled": ""}, "stages.gpu.variants.v.disabled", "non-empty reason"),
    ({"job_timeout_minutes": 5, "job_timeout_factor": 2}, "stages.gpu.variants.v", "not both"),
    ({"shards": 2}, "stages.gpu.variants.v.shards", "unknown key"),
    ({"env": {"A": "${{ secrets.X }}"}}, "stages.gpu.variants.v.env", "GitHub would evaluate"),
])
def test_variant_keys_are_validated_with_their_key_path(variant: dict[str, Any], key: str,
                                                        words: str) -> None:
    with pytest.raises(ConfigError) as info:
        config({"backend": "cuda", "variants": {"v": variant}})
    found = [f for f in info.value.findings if f.key == key]
    assert found and words in found[0].message, [(f.key, f.message) for f in info.value.findings]


def test_a_variant_whose_lane_is_also_a_stage_name_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        config(**{"gpu.h200": {"backend": "cuda"}})
    assert any(f.key == "stages.gpu.variants.h200" and "also a stage's name" in f.message
               for f in info.value.findings)
    with pytest.raises(ConfigError, match="variant name"):
        config({"backend": "cuda", "variants": {"bad name": {}}})


# -- planning -----------------------------------------------------------------------------


def test_each_variant_is_planned_as_its_own_jobs_with_its_own_runners() -> None:
    p = plan()
    gpu_jobs = {j.id: j for j in p.jobs if j.stage == "gpu"}
    assert sorted(gpu_jobs) == ["gpu.b200-1-of-1", "gpu.h200-1-of-1"]
    h200, b200 = gpu_jobs["gpu.h200-1-of-1"], gpu_jobs["gpu.b200-1-of-1"]
    assert (h200.variant, h200.runs_on, h200.container) == (
        "h200", ("self-hosted", "h200"), "nvcr.io/nvidia/pytorch:24.05-py3")
    assert (b200.variant, b200.runs_on, b200.container) == ("b200", ("self-hosted", "b200"), None)
    assert h200.timeout_minutes == 90  # the variant's fixed minutes
    assert b200.timeout_minutes == 15 + 15  # the stage's factor: ceil(300 s x 3 / 60) + overhead
    assert h200.env == {"NCCL_DEBUG": "WARN", "GPU": "h200"} and b200.ci.setup == ("nvidia-smi",)
    assert [t.file for t in h200.tests] == [t.file for t in b200.tests]  # the same suite
    assert h200.needs == ("unit",) and h200.wave == 1


def test_fates_and_counts_are_per_variant_and_a_dormant_variant_is_a_hole() -> None:
    gpu = {**GPU, "variants": {**GPU["variants"],
                               "b200": {"runs_on": ["b200"], "disabled": "B200 pool down, #7"}}}
    p = plan(config(gpu))
    f = fates(p)
    assert f[("tests/test_a.py", "gpu.h200")] == "job"
    assert f[("tests/test_a.py", "gpu.b200")] == "stage-dormant"
    assert f[("tests/test_off.py", "gpu.h200")] == "disabled"
    assert f[("tests/test_off.py", "gpu.b200")] == "disabled"  # decided before dormancy
    assert not any(s.lane == "gpu" for s in p.skipped)  # never a fate without its variant
    h200, b200 = lane(p, "gpu.h200"), lane(p, "gpu.b200")
    assert (h200.status, h200.counts["scheduled"], h200.counts["disabled"], h200.hole) == (
        "scheduled", 2, 1, False)
    assert (b200.status, b200.reason, b200.counts["stage-dormant"], b200.hole) == (
        "dormant", "B200 pool down, #7", 2, True)
    assert any("coverage hole: stage gpu variant b200" in w for w in p.warnings)
    assert [j.lane for j in p.jobs if j.stage == "gpu"] == ["gpu.h200"]


def test_a_skip_on_the_stage_is_a_skip_on_every_variant() -> None:
    p = plan(regs=[*REGS, reg("tests/test_n.py", "gpu", 10, backend="cuda", nightly=True)])
    f = fates(p)
    assert f[("tests/test_n.py", "gpu.h200")] == f[("tests/test_n.py", "gpu.b200")] == "nightly-only"
    assert lane(p, "gpu.h200").counts["nightly-only"] == 1


def test_plan_json_round_trips_the_variants_and_plain_plans_do_not_change(tmp_path: Path) -> None:
    p = plan()
    path = tmp_path / "plan.json"
    path.write_bytes(plan_bytes(p))
    back = load_plan(path)
    assert back == p and {j.variant for j in back.jobs} == {"", "h200", "b200"}
    assert {s.variant for s in back.skipped} == {"h200", "b200"}
    plain = plan(config({"backend": "cuda"}))
    text = plan_bytes(plain).decode()
    assert '"variant"' not in text  # a plan without variants keeps its bytes


def test_stage_filter_selects_one_variant_or_all() -> None:
    one = plan(stages=("gpu.b200",))
    assert [j.lane for j in one.jobs] == ["gpu.b200"]
    assert fates(one)[("tests/test_a.py", "gpu.h200")] == "not-requested"
    assert lane(one, "gpu.h200").reason == "not requested (--stage filter)"
    both = plan(stages=("gpu",))
    assert sorted(j.lane for j in both.jobs) == ["gpu.b200", "gpu.h200"]
    with pytest.raises(UsageError, match=r"no such stage or variant.*did you mean .gpu\.h200."):
        plan(stages=("gpu.h20",))


def test_a_variant_prefers_its_own_history_and_falls_back_to_the_stage() -> None:
    estimates = {("tests/test_a.py", "gpu.h200"): (40.0, "history"),
                 ("tests/test_a.py", "gpu"): (150.0, "history")}
    p = plan(estimates=estimates)
    est = {(t.file, j.lane): (t.estimate, t.source) for j in p.jobs for t in j.tests}
    assert est[("tests/test_a.py", "gpu.h200")] == (40.0, "history")
    assert est[("tests/test_a.py", "gpu.b200")] == (150.0, "history")
    assert est[("tests/test_b.py", "gpu.b200")] == (200.0, "est_time")


def test_estimates_for_reads_each_variant_history_under_its_lane(tmp_path: Path) -> None:
    from testfleet.planning.estimates import lane_registrations

    copies = lane_registrations(config(), REGS)
    assert sorted({r.suite for r in copies}) == ["gpu.b200", "gpu.h200"]
    assert len(copies) == 2 * 3
    assert lane_registrations(config({"backend": "cuda"}), REGS) == []


def test_outputs_tables_and_markdown_name_each_variant() -> None:
    p = plan()
    stages = json.loads(github_outputs(p)["stages"])
    assert sorted(stages) == ["gpu.b200", "gpu.h200", "unit"]
    assert [e["id"] for e in stages["gpu.h200"]["matrix"]["include"]] == ["gpu.h200-1-of-1"]
    assert stages["gpu.h200"]["matrix"]["include"][0]["variant"] == "h200"
    assert "gpu.h200" in render_table(p) and "gpu.b200" in render_table(p)
    assert "| gpu.h200 | cuda | scheduled" in render_markdown(p)


# -- CI engines ---------------------------------------------------------------------------


def test_the_workflow_has_one_job_per_variant_with_its_static_settings() -> None:
    from integrations.gha_calls import rendered

    cfg = config()
    jobs = rendered(cfg)["jobs"]
    ids = stage_job_ids(cfg)
    assert ids == {"gpu.b200": "gpu_b200", "gpu.h200": "gpu_h200", "unit": "unit"}
    h200, b200 = jobs["gpu_h200"], jobs["gpu_b200"]
    assert "['gpu.h200'].matrix" in h200["strategy"]["matrix"]
    assert h200["container"]["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert "container" not in b200
    settings = h200["env"].pop("TESTFLEET_CI_SETTINGS")  # the digest the plan job checks
    assert h200["env"] == {"GPU": "h200", "NCCL_DEBUG": "WARN"}
    assert settings != b200["env"]["TESTFLEET_CI_SETTINGS"]
    assert {"run": "bash .github/testfleet/gpu.b200/setup-1.sh",
            "env": {"HF_TOKEN": "${{ secrets.HF_TOKEN }}"}} in b200["steps"]  # its own setup
    assert h200["needs"] == ["plan", "unit"]
    soak = rendered(config(soak={"backend": "cuda", "needs": ["gpu"]}))
    assert soak["jobs"]["soak"]["needs"] == ["plan", "gpu_b200", "gpu_h200"]


def test_the_workflow_guard_checks_each_variant_settings() -> None:
    """The plan job's check (``testfleet plan --fits-workflow``) holds each variant to the
    settings written in its own job: changing one variant names that variant only."""
    from testfleet.integrations.workflow_fit import misfits, workflow_lanes
    from testfleet.planning.jobci import job_ci

    cfg = config()
    from testfleet.integrations.github_stages import render_stages_workflow

    lanes = workflow_lanes(render_workflow(cfg), render_stages_workflow(cfg) or "")

    def plan_of(c: Any) -> dict[str, Any]:
        jobs = [{"id": f"{ln.key}-1", "stage": ln.stage, "variant": ln.variant, "wave": 0,
                 "ci": job_ci(ln.config).to_json(), "env": ln.config.env,
                 "runs_on": list(ln.config.runs_on)}
                for name in ("unit", "gpu") for ln in stage_lanes(c, name)]
        for job in jobs:
            if not job["variant"]:
                del job["variant"]
        return {"jobs": jobs}

    assert misfits(plan_of(cfg), lanes) == []
    changed = {**GPU, "variants": {**GPU["variants"], "b200": {"runs_on": ["b200"],
                                                               "setup": ["other"]}}}
    bad = misfits(plan_of(config(changed)), lanes)
    assert bad and all("gpu.b200" in reason for reason in bad), bad
    assert any("CI settings of stage gpu.b200" in reason for reason in bad)
    assert not any("gpu.h200" in reason for reason in bad)


def test_buildkite_steps_carry_each_variant() -> None:
    steps = {s["key"]: s for s in pipeline(plan())["steps"] if "key" in s}
    h200 = steps["gpu_h200-1-of-1"]
    assert h200["label"] == "gpu.h200 1/1" and h200["timeout_in_minutes"] == 90
    assert h200["agents"] == {"h200": "true"} and h200["env"]["GPU"] == "h200"
    image = next(iter(h200["plugins"][0].values()))["image"]
    assert image == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert steps["gpu_b200-1-of-1"]["agents"] == {"b200": "true"}


# -- runner -------------------------------------------------------------------------------


def test_the_runner_applies_the_variant_settings_and_records_under_its_lane() -> None:
    p = plan()
    project = make_project(config())
    sel = select_plan_job(p, "gpu.h200-1-of-1")
    assert sel.variant == "h200"
    spec = build_spec(project, sel, RunOptions(), records=Path("/nonexistent"), run_id="r")
    assert spec.settings.stage == "gpu.h200"  # results and durations are keyed by the lane
    assert spec.settings.file_timeout == 600 and spec.settings.env["GPU"] == "h200"
    assert run_options(project.config, stage="gpu", variant="h200").max_attempts == 3
    other = build_spec(project, select_plan_job(p, "gpu.b200-1-of-1"), RunOptions(),
                       records=Path("/nonexistent"), run_id="r")
    assert other.settings.stage == "gpu.b200" and other.settings.file_timeout is None
    with pytest.raises(UsageError, match="runs as 2 variants"):
        select_stage_jobs(p, "gpu", None)
    assert select_stage_jobs(p, "gpu.b200", None).variant == "b200"


def test_a_fork_takes_its_variants_from_the_base() -> None:
    from testfleet.planning.trust import Trust, apply

    base = config()
    forked = config({**GPU, "variants": {**GPU["variants"],
                                         "h200": {"runs_on": ["self-hosted", "secret-pool"]}}})
    effective, denied = apply(forked, Trust("abc1234", "testfleet.toml", base=base))
    assert not denied
    assert effective.stages["gpu"].with_variant("h200").runs_on == ["self-hosted", "h200"]


# -- one suite name under two backends (an explicit opt-in) -------------------------------

TWO = '''
[stages.stage-a]
backend = "cuda"
'''
OPT_IN = TWO + '''
[stages.stage-a.variants.cuda]
runs_on = ["linux-h100"]
[stages.stage-a.variants.amd]
backend = "rocm"
runs_on = ["linux-mi325"]
'''


def two_backend_tree(tmp_path: Path, config_text: str) -> Any:
    from testfleet.config import load_project

    (tmp_path / "testfleet.toml").write_text(config_text)
    tests = tmp_path / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_cuda.py").write_text(
        "from testfleet import register_cuda_ci\n"
        'register_cuda_ci(est_time=60, suite="stage-a", labels=["x"])\n')
    (tests / "test_amd.py").write_text(
        "from testfleet import register_amd_ci\n"
        'register_amd_ci(est_time=60, suite="stage-a", labels=["x"])\n')
    (tests / "test_both.py").write_text(
        "from testfleet import register_cuda_ci, register_amd_ci\n"
        'register_cuda_ci(est_time=30, suite="stage-a", labels=["x"])\n'
        'register_amd_ci(est_time=40, suite="stage-a", labels=["x"])\n')
    with (tmp_path / "testfleet.toml").open("a") as fh:
        fh.write('[labels]\nx = "x"\n')
    return load_project(tmp_path)


def test_one_suite_under_two_backends_is_an_error_without_the_opt_in(tmp_path: Path) -> None:
    from testfleet.registry import collect

    registry = collect(two_backend_tree(tmp_path, TWO))
    errors = [f for f in registry.findings if f.severity == "error"]
    assert {(f.file, f.code) for f in errors} == {("tests/test_amd.py", "suite-backend"),
                                                  ("tests/test_both.py", "suite-backend")}
    assert "give stage 'stage-a' a variant with backend = 'rocm'" in errors[0].message
    assert {r.file for r in registry.registrations} == {"tests/test_cuda.py", "tests/test_both.py"}


def test_one_suite_under_two_backends_runs_each_backend_on_its_variant(tmp_path: Path) -> None:
    from testfleet.registry import collect
    from testfleet.report.collect import _stage_rows

    project = two_backend_tree(tmp_path, OPT_IN)
    registry = collect(project)
    assert not [f for f in registry.findings if f.severity == "error"]
    assert sorted((r.file, r.backend) for r in registry.registrations) == [
        ("tests/test_amd.py", "rocm"), ("tests/test_both.py", "cuda"),
        ("tests/test_both.py", "rocm"), ("tests/test_cuda.py", "cuda")]
    p = make_plan(project, registry, PlanRequest(trigger=Trigger(event="schedule",
                                                                 schedule="0 0 * * *",
                                                                 cadence="nightly")))
    files = {j.lane: sorted(t.file for t in j.tests) for j in p.jobs}
    assert files == {"stage-a.amd": ["tests/test_amd.py", "tests/test_both.py"],
                     "stage-a.cuda": ["tests/test_both.py", "tests/test_cuda.py"]}
    assert {(s.lane, s.backend, s.counts["scheduled"]) for s in p.stages} == {
        ("stage-a.amd", "rocm", 2), ("stage-a.cuda", "cuda", 2)}
    assert [j.runs_on for j in p.jobs if j.lane == "stage-a.amd"] == [("linux-mi325",)]
    rows = {(r.name, r.backend): r.counts.total
            for r in _stage_rows(project.config, registry.registrations, ())}
    assert rows == {("stage-a.amd", "rocm"): 2, ("stage-a.cuda", "cuda"): 2}


def test_report_shows_each_variant_as_a_row_and_names_its_table(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from support import run_cli

    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    text = OPT_IN.replace('runs_on = ["linux-mi325"]',
                          'runs_on = ["linux-mi325"]\ndisabled = "MI325 pool down, see #9"')
    project = two_backend_tree(tmp_path, text)
    _, out, _ = run_cli(capsys, "-C", str(project.root), "report", "--format", "json",
                           "--no-history")
    doc = json.loads(out)
    rows = {(s["name"], s["backend"], s["status"]) for s in doc["stages"]}
    assert rows == {("stage-a.amd", "rocm", "dormant"), ("stage-a.cuda", "cuda", "active")}
    assert {(h["kind"], h["name"], h["cause"]) for h in doc["holes"]} >= {
        ("stage", "stage-a.amd", "dormant")}
    _, out, _ = run_cli(capsys, "-C", str(project.root), "check", "--format", "json")
    keys = {f["key"] for f in json.loads(out)["findings"]
            if "coverage hole: stage stage-a.amd" in f["message"]}
    assert keys == {"stages.stage-a.variants.amd"}  # the variant's own table


def test_variant_history_is_its_own_from_import_to_plan(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A real SQLite history: durations imported for gpu.h200 only estimate that variant;
    gpu.b200 falls back to the stage's history, then to est_time; `durations show`
    lists each variant's rows and `suggest` never rewrites a literal from a variant's."""
    from support import run_cli

    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    (tmp_path / "testfleet.toml").write_text(
        '[stages.gpu]\nbackend = "cuda"\n[stages.gpu.variants.h200]\nruns_on = ["h200"]\n'
        '[stages.gpu.variants.b200]\nruns_on = ["b200"]\n'
        '[backends.cuda]\nmarkers = ["register_cuda_ci"]\nlabels_required = false\n')
    (tmp_path / "tests").mkdir()
    for name, est in (("a", 100), ("b", 200)):
        (tmp_path / "tests" / f"test_{name}.py").write_text(
            f'from testfleet import register_cuda_ci\nregister_cuda_ci({est}, "gpu")\n'
            "def test_x():\n    pass\n")

    def junit(name: str, seconds: float) -> str:
        path = tmp_path / name
        path.write_text('<?xml version="1.0"?><testsuites><testsuite name="s">'
                        f'<testcase classname="tests.test_a" name="test_x" time="{seconds}"/>'
                        "</testsuite></testsuites>")
        return str(path)

    root = str(tmp_path)
    code, _, err = run_cli(capsys, "-C", root, "durations", "import", junit("h.xml", 900),
                           "--stage", "gpu.h200")
    assert code == 0, err
    code, _, err = run_cli(capsys, "-C", root, "durations", "import", junit("s.xml", 300),
                           "--stage", "gpu")
    assert code == 0, err
    code, out, _ = run_cli(capsys, "-C", root, "durations", "show", "--format", "json")
    rows = {(r["stage"], r["file"]): (r["estimate"], r["source"], r["history_from"])
            for r in json.loads(out)["rows"]}
    assert rows[("gpu.h200", "tests/test_a.py")] == (900.0, "history", None)
    # no history of its own: shown as planned, on the stage's history, and saying so
    assert rows[("gpu.b200", "tests/test_a.py")] == (300.0, "history", "gpu")
    assert rows[("gpu.b200", "tests/test_b.py")] == (200.0, "est_time", None)
    assert rows[("gpu", "tests/test_a.py")] == (300.0, "history", None)
    code, out, _ = run_cli(capsys, "-C", root, "durations", "show", "--stage", "gpu.b200")
    assert code == 0 and "history (gpu)" in out and "gpu.h200" not in out
    code, out, _ = run_cli(capsys, "-C", root, "durations", "show", "--stage", "gpu.b200",
                           "--format", "json")
    only = [(r["stage"], r["file"], r["estimate"], r["history_from"]) for r in json.loads(out)["rows"]]
    assert only == [("gpu.b200", "tests/test_a.py", 300.0, "gpu"),
                    ("gpu.b200", "tests/test_b.py", 200.0, None)]
    code, out, _ = run_cli(capsys, "-C", root, "durations", "suggest", "--format", "json")
    assert {s["stage"] for s in json.loads(out)["suggestions"]} <= {"gpu"}
    out_file = tmp_path / "plan.json"
    code, _, err = run_cli(capsys, "-C", root, "plan", "--format", "json", "--output",
                           str(out_file), "--event", "push")
    assert code == 0, err
    plan = json.loads(out_file.read_text())
    est = {(j["variant"], t["file"]): (t["estimate"], t["source"])
           for j in plan["jobs"] for t in j["tests"]}
    assert est[("h200", "tests/test_a.py")] == (900.0, "history")  # its own hardware
    assert est[("b200", "tests/test_a.py")] == (300.0, "history")  # the stage's, not h200's
    assert est[("b200", "tests/test_b.py")] == (200.0, "est_time")


def test_a_variant_job_runs_for_real_and_its_results_are_its_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Two variants of a CPU stage (two "images": env differs), each job run for real from
    the plan file: results are recorded per variant and `results --stage` reads either."""
    from support import run_cli

    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    (tmp_path / "testfleet.toml").write_text(
        '[stages.unit]\nbackend = "cpu"\n'
        '[stages.unit.variants.py-a]\nenv = { IMAGE = "a" }\n'
        '[stages.unit.variants.py-b]\nenv = { IMAGE = "b" }\n')
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_img.py").write_text(
        'import os\nfrom testfleet import register_cpu_ci\nregister_cpu_ci(5, "unit")\n'
        'def test_image():\n    assert os.environ["IMAGE"] == "a"\n')
    root = str(tmp_path)
    plan = tmp_path / "plan.json"
    code, _, err = run_cli(capsys, "-C", root, "plan", "--format", "json", "--output", str(plan),
                           "--event", "push")
    assert code == 0, err
    code_a, _, _ = run_cli(capsys, "-C", root, "run", "--plan", str(plan), "--job", "unit.py-a-1-of-1")
    code_b, _, _ = run_cli(capsys, "-C", root, "run", "--plan", str(plan), "--job", "unit.py-b-1-of-1")
    assert (code_a, code_b) == (0, 1)  # each ran with its own variant's environment
    outcomes = {}
    for lane_key in ("unit.py-a", "unit.py-b"):
        code, out, err = run_cli(capsys, "-C", root, "results", "--stage", lane_key, "--format", "json")
        assert code == 0, err
        outcomes[lane_key] = {(f["stage"], f["file"], f["last"]) for f in json.loads(out)["files"]}
    assert outcomes == {"unit.py-a": {("unit.py-a", "tests/test_img.py", "PASSED")},
                        "unit.py-b": {("unit.py-b", "tests/test_img.py", "FAILED")}}


@pytest.mark.parametrize(("own", "stage", "uses_stage"), [
    (None, None, False), (None, "est_time", True), (None, "history", True),
    ("est_time", None, False), ("est_time", "est_time", False), ("est_time", "history", True),
    ("history", None, False), ("history", "est_time", False), ("history", "history", False),
])
def test_one_rule_decides_a_variants_estimate(own: str | None, stage: str | None, uses_stage: bool) -> None:
    """The planner and ``durations show`` share the rule: a variant's own history, else its
    stage's history, else its own literal (equal to the stage's)."""
    from testfleet.planning.lanes import uses_stage_estimate
    from testfleet.planning.planner import _estimate
    from testfleet.registry.model import Registration

    assert uses_stage_estimate(own, stage) is uses_stage
    reg = Registration("t.py", "cuda", "s", 100)
    estimates = {**({("t.py", "s.h200"): (10.0, own)} if own else {}),
                 **({("t.py", "s"): (20.0, stage)} if stage else {})}
    seconds, source = _estimate(reg, estimates, "s.h200")  # type: ignore[arg-type]
    assert (seconds, source) == ((20.0, stage) if uses_stage else (10.0, own) if own else (100.0, "est_time"))
