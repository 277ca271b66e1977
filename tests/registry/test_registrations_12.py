"""#12 registrations: several per backend, marker signatures from config, est_time 0,
run-by-path suites, suppressions, and the findings that must tell the truth."""

from __future__ import annotations

import json

import pytest

from testfleet.errors import ConfigError
from testfleet.registry import collect
from testfleet.registry.suppress import NEVER_SILENCED

from .conftest import BASE_CONFIG

CPU = "from testfleet import register_cpu_ci\n"
CUDA = "from testfleet import register_cuda_ci\n"
F = "tests/unit/test_f.py"

SGLANG_CONFIG = BASE_CONFIG + """
[stages.base-b-test-1-gpu-small]
backend = "cuda"

[stages.nightly-kernel-1-gpu]
backend = "cuda"

[markers."*"]
positional = ["est_time", "suite", "nightly", "disabled"]
keywords = { stage = "str", runner_config = "str" }
suite_template = "{stage}-test-{runner_config}"
ignore = ["in_process_group"]
allow_zero_est_time = true
allow_empty_suite = true
"""


def regs(registry, file=F):  # type: ignore[no-untyped-def]
    return sorted((r.backend, r.suite) for r in registry.registrations if r.file == file)


def codes(registry, file=F):  # type: ignore[no-untyped-def]
    return sorted((f.line, f.code) for f in registry.findings if f.file == file)


def test_two_stages_of_one_backend_in_one_file(tree) -> None:
    src = CPU + 'register_cpu_ci(5, "stage-a-cpu")\nregister_cpu_ci(9, "stage-b-cpu")\n' \
        'if __name__ == "__main__":\n    main()\n'
    registry = collect(tree({F: src}), use_cache=False)
    assert regs(registry) == [("cpu", "stage-a-cpu"), ("cpu", "stage-b-cpu")]
    assert codes(registry) == []


def test_two_registrations_to_one_stage_stay_an_error_and_keep_the_first(tree) -> None:
    src = CPU + 'register_cpu_ci(5, "stage-a-cpu")\nregister_cpu_ci(9, "stage-a-cpu")\n'
    registry = collect(tree({F: src}), use_cache=False)
    assert regs(registry) == [("cpu", "stage-a-cpu")]
    assert codes(registry) == [(3, "duplicate-stage")]
    assert [(i.line, i.suite, i.code) for i in registry.invalid] == [(3, "stage-a-cpu", "duplicate-stage")]


def test_invalid_registration_never_hides_a_valid_sibling(tree) -> None:
    src = CUDA + 'register_cuda_ci(5, "stage-c-4-gpu-h200", labels=["fsdp"])\n' \
        'register_cuda_ci(5, "stage-c-4-gpu-h200x", labels=["fsdp"])\n'
    registry = collect(tree({F: src}), use_cache=False)
    assert regs(registry) == [("cuda", "stage-c-4-gpu-h200")]
    assert [(i.backend, i.suite, i.code) for i in registry.invalid] == [
        ("cuda", "stage-c-4-gpu-h200x", "unknown-suite")]


def test_invalid_registrations_survive_the_cache(tree) -> None:
    src = CPU + 'register_cpu_ci(5, "stage-a-cpu")\nregister_cpu_ci(-1, "stage-b-cpu")\n# testfleet: ignore[x]\n'
    project = tree({F: src})
    cold = collect(project)
    warm = collect(project)
    assert cold.invalid == warm.invalid and len(warm.invalid) == 1
    assert cold.suppressions == warm.suppressions == {F: {4: ("x",)}}
    assert cold.findings == warm.findings


def test_sglang_signature_composes_the_suite(tree) -> None:
    src = CUDA + ('register_cuda_ci(est_time=60, stage="base-b", runner_config="1-gpu-small", labels=["fsdp"],\n'
                  '                 in_process_group=GROUP)\n'
                  'register_cuda_ci(30, "nightly-kernel-1-gpu", True, labels=["fsdp"])\n')
    registry = collect(tree({F: src}, config=SGLANG_CONFIG), use_cache=False)
    assert codes(registry) == []
    got = {r.suite: r for r in registry.registrations if r.file == F}
    assert sorted(got) == ["base-b-test-1-gpu-small", "nightly-kernel-1-gpu"]
    assert got["nightly-kernel-1-gpu"].nightly is True


def test_sglang_signature_errors(tree) -> None:
    src = CUDA + ('register_cuda_ci(60, stage="base-b", labels=["fsdp"])\n'
                  'register_cuda_ci(60, "x", stage="base-b", runner_config="1-gpu-small", labels=["fsdp"])\n'
                  'register_cuda_ci(60, stage=3, runner_config="1-gpu-small", labels=["fsdp"])\n'
                  'register_cuda_ci(60, stage="base-c", runner_config="1-gpu-small", labels=["fsdp"])\n'
                  'register_cuda_ci(60, "nightly-kernel-1-gpu", labels=["fsdp"], sgl_only=True)\n')
    registry = collect(tree({F: src}, config=SGLANG_CONFIG), use_cache=False)
    assert codes(registry) == [(2, "missing-argument"), (3, "suite-conflict"), (4, "wrong-type"),
                               (5, "unknown-suite"), (6, "unknown-keyword")]
    unknown = next(f for f in registry.findings if f.code == "unknown-suite")
    assert "'base-c-test-1-gpu-small'" in unknown.message
    assert regs(registry) == []
    assert len(registry.invalid) == 5


def test_undeclared_keyword_is_an_error_that_says_where_to_declare_it(tree) -> None:
    src = CPU + 'register_cpu_ci(5, "stage-a-cpu", runner_config="x")\n'
    registry = collect(tree({F: src}), use_cache=False)
    f = next(f for f in registry.findings if f.code == "unknown-keyword")
    assert "[tool.testfleet.markers.register_cpu_ci]" in f.message


def test_est_time_zero_only_where_configured(tree) -> None:
    src = CUDA + 'register_cuda_ci(0, "stage-c-4-gpu-h200", labels=["fsdp"])\n'
    assert codes(collect(tree({F: src}), use_cache=False)) == [(2, "est-time-range")]
    registry = collect(tree({F: src}, config=SGLANG_CONFIG), use_cache=False)
    assert codes(registry) == []
    assert [r.est_time for r in registry.registrations if r.file == F] == [0.0]
    negative = CUDA + 'register_cuda_ci(-1, "stage-c-4-gpu-h200", labels=["fsdp"])\n'
    f = next(f for f in collect(tree({F: negative}, config=SGLANG_CONFIG), use_cache=False).findings
             if f.code == "est-time-range")
    assert ">= 0" in f.message


def test_empty_suite_is_run_by_path_only_where_configured(tree) -> None:
    src = CUDA + 'register_cuda_ci(10, "", labels=["fsdp"])\n'
    registry = collect(tree({F: src}), use_cache=False)
    f = next(f for f in registry.findings if f.code == "unknown-suite")
    assert "allow_empty_suite" in f.message
    registry = collect(tree({F: src}, config=SGLANG_CONFIG), use_cache=False)
    assert regs(registry) == [("cuda", "")] and codes(registry) == []


def test_marker_signature_config_errors(tree) -> None:
    bad = BASE_CONFIG + """
[markers.register_cpu_ci]
keywords = { suite = "str", stage = "text" }
suite_template = "{nope}"

[markers.register_tpu_ci]
"""
    with pytest.raises(ConfigError) as info:
        tree(config=bad)
    keys = sorted({f.key for f in info.value.findings})
    assert "markers.register_tpu_ci" in keys
    assert any(k.startswith("markers.register_cpu_ci") for k in keys)
    assert "'register_tpu_ci' is not a registration marker" in str(info.value)
    template_only = BASE_CONFIG + '[markers.register_cpu_ci]\nsuite_template = "{stage}-x"\n'
    with pytest.raises(ConfigError, match=r"suite_template field \{stage\} must be a declared keyword"):
        tree(config=template_only)


def test_suppression_on_a_line_and_per_file(tree, run_cli) -> None:
    config = BASE_CONFIG + """
[check]
per-file-ignores = { "tests/ci/*.py" = ["marker-in-function"], "tests/zzz/*.py" = ["no-main-call"] }
"""
    src_line = CPU + 'register_cpu_ci(5, "stage-b-cpu")  # testfleet: ignore[no-main-call]\n'
    src_fn = CPU + 'register_cpu_ci(5, "stage-a-cpu")\n\ndef test_marker():\n    register_cpu_ci(1, "x")\n'
    project = tree({F: src_line, "tests/ci/test_marker.py": src_fn}, config=config)
    registry = collect(project, use_cache=False)
    assert codes(registry) == [] and codes(registry, "tests/ci/test_marker.py") == []
    assert sorted(f.code for f in registry.suppressed) == ["marker-in-function", "no-main-call"]
    code, out, _ = run_cli("-C", str(project.root), "check", "--format", "json")
    doc = json.loads(out)
    unused = [f for f in doc["findings"] if f["code"] == "unused-suppression"]
    # the per-file entry for tests/zzz silenced nothing: a warning on the config, not an error
    assert [(f["file"], f["severity"]) for f in unused] == [("testfleet.toml", "warning")]
    assert "tests/zzz/*.py" in unused[0]["message"] and code == 0


def test_per_file_ignores_read_globs_as_exclude_does(tree) -> None:
    """One dialect (gitignore's): ``*`` stays in its directory, ``**`` crosses them, a name
    without ``/`` matches at any depth. (fnmatch let ``tests/ci/*.py`` silence a file two
    directories down, which ``exclude`` with the same pattern would not have excluded.)"""
    config = BASE_CONFIG + """
[check]
per-file-ignores = { "tests/ci/*.py" = ["marker-in-function"], "tests/deep/**/test_m.py" = ["marker-in-function"], "test_named.py" = ["marker-in-function"] }
"""
    src_fn = CPU + 'register_cpu_ci(5, "stage-a-cpu")\n\ndef test_marker():\n    register_cpu_ci(1, "x")\n'
    files = {"tests/ci/test_a.py": src_fn, "tests/ci/sub/test_b.py": src_fn,
             "tests/deep/x/y/test_m.py": src_fn, "tests/other/test_named.py": src_fn}
    registry = collect(tree(files, config=config), use_cache=False)
    silenced = sorted(f.file for f in registry.suppressed)
    assert silenced == ["tests/ci/test_a.py", "tests/deep/x/y/test_m.py", "tests/other/test_named.py"]
    assert codes(registry, "tests/ci/sub/test_b.py") == [(5, "marker-in-function")]


def test_unused_and_unsilenceable_suppressions_are_warnings(tree, run_cli) -> None:
    src = CPU + ('register_cpu_ci(-5, "stage-a-cpu")  # testfleet: ignore[est-time-range]\n'
                 'register_cpu_ci(5, "stage-b-cpu")  # testfleet: ignore[duplicate-label]\n'
                 'x = 1  # testfleet: ignore\n'
                 'if __name__ == "__main__":\n    main()\n')
    project = tree({F: src})
    code, out, _ = run_cli("-C", str(project.root), "check", "--format", "json")
    found = sorted((f["line"], f["code"]) for f in json.loads(out)["findings"] if f["file"] == F)
    assert found == [(2, "est-time-range"), (2, "unused-suppression"), (3, "unused-suppression"),
                     (4, "unused-suppression")]
    assert code == 1
    messages = [f["message"] for f in json.loads(out)["findings"] if f["code"] == "unused-suppression"]
    assert any("can never be silenced" in m for m in messages)
    assert "est-time-range" in NEVER_SILENCED


def test_marker_in_a_unit_test_function_is_a_warning(tree) -> None:
    src = CPU + ('register_cpu_ci(5, "stage-a-cpu")\n\n\nclass TestMarker:\n    def test_it(self):\n'
                 '        assert register_cpu_ci(5, "stage-a-cpu") is None\n\n'
                 'if True:\n    register_cpu_ci(5, "stage-b-cpu")\n')
    registry = collect(tree({F: src}), use_cache=False)
    got = [(f.line, f.code, f.severity) for f in registry.findings if f.file == F]
    assert got == [(7, "marker-in-function", "warning"), (10, "marker-not-read", "error")]


def test_no_main_call_is_silent_for_disabled_registrations(tree) -> None:
    src = CPU + 'register_cpu_ci(5, "stage-b-cpu", disabled="flaky, see #3")\n'
    assert codes(collect(tree({F: src}), use_cache=False)) == []
    enabled = CPU + 'register_cpu_ci(5, "stage-b-cpu")\n'
    assert codes(collect(tree({F: enabled}), use_cache=False)) == [(2, "no-main-call")]


def test_unused_stage_and_coverage_hole_name_rejected_registrations(tree, run_cli) -> None:
    src = CPU + 'register_cpu_ci(5, "stage-a-cpu")\nregister_cpu_ci(-1, "stage-b-cpu")\n'
    project = tree({F: src})
    registry = collect(project, use_cache=False)
    f = next(f for f in registry.findings if f.code == "unused-stage" and "stage-b-cpu" in f.message)
    assert "1 registration for this stage is invalid" in f.message
    assert "no test registers" not in f.message
    _, out, _ = run_cli("-C", str(project.root), "check", "--format", "json")
    holes = [x["message"] for x in json.loads(out)["findings"]
             if x["code"] == "coverage-hole" and "stage-b-cpu" in x["message"]]
    assert holes == ["coverage hole: stage stage-b-cpu has no registration that can run "
                     "(all-invalid: 1 registration for this stage is invalid)"]
    _, out, _ = run_cli("-C", str(project.root), "report", "--format", "json", "--no-history")
    assert "1 invalid registration(s)" in out


def test_long_lists_in_messages_are_cut_with_a_count(tree) -> None:
    many = "".join(f"[stages.s{i:02d}]\nbackend = \"cpu\"\n" for i in range(40))
    src = CPU + 'register_cpu_ci(5, "nope")\n'
    registry = collect(tree({F: src}, config=BASE_CONFIG + many), use_cache=False)
    f = next(f for f in registry.findings if f.code == "unknown-suite")
    assert "(30 more)" in f.message and "s39" not in f.message


def test_silenceable_codes_are_documented() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "registration.md").read_text(encoding="utf-8")
    for code in sorted(NEVER_SILENCED):
        assert f"`{code}`" in doc, code


def _plan(run_cli, root, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    out_file = root / "plan.json"
    if out_file.exists():
        out_file.unlink()
    code, out, err = run_cli("-C", str(root), "plan", "--format", "json", "--output", str(out_file), *args,
                             env=env)
    return code, (json.loads(out_file.read_text()) if out_file.exists() else None), out, err


def test_plan_is_made_with_invalid_fates_and_exit_1(tree, run_cli) -> None:
    src = CUDA + ('register_cuda_ci(5, "stage-c-4-gpu-h200", labels=["fsdp"])\n'
                  'register_cuda_ci(5, "stage-c-4-gpu-h200", labels=["fsdp"])\n')
    project = tree({F: src, "tests/unit/test_g.py": CPU + 'register_cpu_ci(-3, "stage-b-cpu")\n'})
    code, plan, _, err = _plan(run_cli, project.root, "--cadence", "nightly")
    assert code == 1 and "registration error" in err
    invalid = [(s["file"], s["suite"]) for s in plan["skipped"] if s["reason"] == "invalid"]
    assert invalid == [("tests/unit/test_g.py", "stage-b-cpu"), (F, "stage-c-4-gpu-h200")]
    scheduled = {t["file"] for j in plan["jobs"] for t in j["tests"]}
    assert F in scheduled and "tests/unit/test_good.py" in scheduled
    stages = {s["name"]: s for s in plan["stages"]}
    assert stages["stage-b-cpu"]["hole"] and stages["stage-b-cpu"]["counts"]["invalid"] == 1
    assert stages["stage-c-4-gpu-h200"]["hole"] and stages["stage-c-4-gpu-h200"]["counts"]["invalid"] == 1
    assert any("1 registration for this stage is invalid" in w for w in plan["warnings"])
    # --strict: no plan at all
    code, plan, _, err = _plan(run_cli, project.root, "--strict")
    assert code == 1 and plan is None and "--strict" in err
    # under GitHub Actions the plan says so with one ::error annotation
    code, _, out, _ = _plan(run_cli, project.root, env={"GITHUB_ACTIONS": "true"})
    assert code == 1 and out.count("::error title=testfleet plan::") == 1


def test_clean_tree_plans_with_exit_0(tree, run_cli) -> None:
    project = tree({F: CPU + 'register_cpu_ci(5, "stage-a-cpu")\n'})
    code, plan, _, _ = _plan(run_cli, project.root)
    assert code == 0 and not [s for s in plan["skipped"] if s["reason"] == "invalid"]


def test_path_only_registration_runs_only_by_file_and_stage(tree, run_cli) -> None:
    src = CUDA + 'register_cuda_ci(10, "", labels=["fsdp"])\n'
    project = tree({F: src}, config=SGLANG_CONFIG)
    code, plan, _, _ = _plan(run_cli, project.root, "--cadence", "nightly")
    assert code == 0
    assert [(s["suite"], s["reason"]) for s in plan["skipped"] if s["file"] == F] == [("", "path-only")]
    code, _, _, err = _plan(run_cli, project.root, "--file", F)
    assert code == 2 and "--stage" in err and "by path only" in err
    code, plan, _, _ = _plan(run_cli, project.root, "--file", F, "--stage", "stage-c-4-gpu-h200")
    assert code == 0
    assert [(j["stage"], [t["file"] for t in j["tests"]]) for j in plan["jobs"]] == [("stage-c-4-gpu-h200", [F])]


def test_list_and_check_agree_with_plan_on_invalid(tree, run_cli) -> None:
    src = CPU + 'register_cpu_ci(5, "stage-a-cpu")\nregister_cpu_ci(5, "stage-zzz")\n'
    project = tree({F: src})
    code, out, err = run_cli("-C", str(project.root), "list", "--format", "json")
    assert code == 1
    assert (F, "stage-a-cpu") in {(r["file"], r["suite"]) for r in json.loads(out)["registrations"]}
    assert "unknown-suite" in err
    code, out, _ = run_cli("-C", str(project.root), "check", "--format", "json")
    assert code == 1 and any(f["code"] == "unknown-suite" for f in json.loads(out)["findings"])


def test_plan_under_github_prints_each_warning_once_and_notes_as_notices(tree, run_cli, tmp_path) -> None:
    project = tree({F: CPU + 'register_cpu_ci(5, "stage-a-cpu")\n'})
    output = tmp_path / "gh-output"
    output.write_text("")
    code, out, err = run_cli("-C", str(project.root), "plan", "--event", "pull_request", "--labels",
                             "documentation,run-ci-nope", "--format", "github",
                             env={"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(output)})
    assert code == 0
    notices = [ln for ln in out.splitlines() if ln.startswith("::notice")]
    warnings = [ln for ln in out.splitlines() if ln.startswith("::warning")]
    # no history database yet: a note, not a warning; a label that is not a CI label is
    # not even a note (#26)
    assert any("no history database" in ln for ln in notices)
    assert "documentation" not in out + err
    # a CI-prefixed label that grants nothing is a real warning
    assert any("run-ci-nope" in ln for ln in warnings)
    # and nothing is repeated as a stderr line
    assert "testfleet: warning:" not in err and "testfleet: note:" not in err


def test_github_outputs_say_tree_errors_so_the_final_check_fails(tree, run_cli, tmp_path) -> None:
    """plan exits 1 with rejected registrations but writes every output, tree_errors=true
    among them: the workflow runs the valid tests and its final check fails on it."""
    project = tree({"tests/unit/test_g.py": CPU + 'register_cpu_ci(-3, "stage-b-cpu")\n'})
    out_file = tmp_path / "gh_output"
    code, _, _ = run_cli("-C", str(project.root), "plan", "--format", "github",
                         env={"GITHUB_OUTPUT": str(out_file)})
    assert code == 1
    text = out_file.read_text()
    assert "tree_errors=true" in text and "has_jobs=" in text
    (project.root / "tests/unit/test_g.py").write_text(CPU + 'register_cpu_ci(3, "stage-b-cpu")\n')
    out_file.unlink()
    code, _, _ = run_cli("-C", str(project.root), "plan", "--format", "github",
                         env={"GITHUB_OUTPUT": str(out_file)})
    assert code == 0 and "tree_errors=false" in out_file.read_text()


def test_every_command_reads_a_tree_with_errors_and_agrees_on_them(tree, run_cli) -> None:
    """#12: check, list, plan, report, durations and run all read a tree with a rejected
    registration: the valid ones are used, the rejected one is named, nothing refuses."""
    src = CPU + 'register_cpu_ci(5, "stage-a-cpu")\nregister_cpu_ci(5, "stage-zzz")\n'
    project = tree({F: src})
    root = str(project.root)
    code, out, _ = run_cli("-C", root, "check", "--format", "json")
    assert code == 1 and [f["file"] for f in json.loads(out)["findings"]
                          if f["code"] == "unknown-suite"] == [F]
    code, out, err = run_cli("-C", root, "list", "--format", "json")
    assert code == 1 and F in {r["file"] for r in json.loads(out)["registrations"]} and F in err
    code, plan, _, _ = _plan(run_cli, project.root)
    assert code == 1 and [(s["file"], s["reason"]) for s in plan["skipped"]
                          if s["reason"] == "invalid"] == [(F, "invalid")]
    # report is a dashboard: it shows what can run and says what was left out
    code, out, _ = run_cli("-C", root, "report", "--format", "json", "--no-history")
    assert code == 0 and any("1 invalid registration(s) (fate 'invalid')" in n
                             for n in json.loads(out)["notes"])
    # durations: rows for the valid registrations, the rejected one listed, exit 1
    code, out, err = run_cli("-C", root, "durations", "show", "--format", "json")
    doc = json.loads(out)
    assert code == 1 and (F, "stage-a-cpu") in {(r["file"], r["stage"]) for r in doc["rows"]}
    assert [(i["file"], i["code"]) for i in doc["invalid"]] == [(F, "unknown-suite")]
    assert "unknown-suite" in err and "registration error" in err
    code, out, err = run_cli("-C", root, "durations", "show")
    assert code == 1 and F in out and "registration error" in err
    code, out, err = run_cli("-C", root, "durations", "suggest", "--format", "json")
    assert code == 1 and json.loads(out)["suggestions"] == [] and "registration error" in err
    # run plans in process like plan does: the valid file runs, the error is named
    code, out, err = run_cli("-C", root, "run", "--stage", "stage-a-cpu", "--dry-run")
    assert code == 0 and F in out and "registration error" in err and "unknown-suite" in err


NPU_CONFIG = BASE_CONFIG + """
[stages.base-test-1-npu]
backend = "npu"

[backends.npu]
markers = ["register_npu_ci"]
labels_required = false
gpu = true

[backends.npu.signature]
positional = ["est_time", "suite", "nightly", "disabled"]
keywords = { stage = "str", runner_config = "str" }
suite_template = "{stage}-test-{runner_config}"
ignore = ["in_process_group"]
"""
NPU = "from sglang.test.ci.ci_register import register_npu_ci, register_cuda_ci\n"


def test_a_backend_signature_table_describes_its_markers(tree) -> None:
    """#12: [backends.<name>.signature] is the same signature model as [markers.<marker>],
    for every marker of that backend (and only for them)."""
    src = NPU + ('register_npu_ci(5, stage="base", runner_config="1-npu", in_process_group=G)\n'
                 'register_cuda_ci(5, stage="base", runner_config="1-npu", labels=["fsdp"])\n')
    registry = collect(tree({F: src}, config=NPU_CONFIG), use_cache=False)
    assert regs(registry) == [("npu", "base-test-1-npu")]
    bad = [f for f in registry.findings if f.file == F and f.code == "unknown-keyword"]
    assert [f.line for f in bad] == [3, 3]  # stage= and runner_config= on the cuda marker
    assert "[tool.testfleet.backends.cuda.signature]" in bad[0].message
    assert [i.line for i in registry.invalid] == [3]


def test_a_marker_table_wins_over_its_backend_signature(tree) -> None:
    config = NPU_CONFIG + '\n[markers.register_npu_ci]\nkeywords = { other = "str" }\n'
    src = NPU.replace(", register_cuda_ci", "") + ('register_npu_ci(5, "base-test-1-npu", other="x")\n'
                 'register_npu_ci(5, stage="base", runner_config="1-npu")\n')
    registry = collect(tree({F: src}, config=config), use_cache=False)
    assert regs(registry) == [("npu", "base-test-1-npu")]
    # the marker's own table has no stage/runner_config: both unknown on line 3
    assert {(line, c) for line, c in codes(registry) if c == "unknown-keyword"} == {(3, "unknown-keyword")}
    assert [i.line for i in registry.invalid] == [3]


def test_a_backend_signature_is_validated_with_its_key_path(tree) -> None:
    clash = NPU_CONFIG.replace('keywords = { stage = "str", runner_config = "str" }',
                               'keywords = { stage = "str", runner_config = "str", suite = "str" }')
    with pytest.raises(ConfigError) as info:
        tree({F: NPU}, config=clash)
    assert [(f.key, f.message.split(";")[0]) for f in info.value.findings] == [
        ("backends.npu.signature", "'suite' is a built-in keyword")]
    with pytest.raises(ConfigError) as info:
        tree({F: NPU}, config=NPU_CONFIG.replace('ignore = ["in_process_group"]', 'bogus = 1'))
    [finding] = info.value.findings
    assert finding.key == "backends.npu.signature.bogus" and "valid keys here: " in finding.message
