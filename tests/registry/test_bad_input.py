"""The bad-input corpus: every malformed registration or config gives one exact error.

Each case writes one broken file next to valid ones and asserts the finding
(file, line, code, message fragment) and that the valid registrations are still
collected. Every case also goes through the real CLI: exit 1, no traceback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from testfleet.errors import ConfigError
from testfleet.registry import collect

from .conftest import BASE_CONFIG, GOOD_KEYS

IMP = "from testfleet import register_cpu_ci, register_cuda_ci, register_rocm_ci, register_amd_ci\n"
CPU = "from testfleet import register_cpu_ci\n"
BAD = "tests/unit/test_bad.py"


@dataclass(frozen=True)
class Case:
    id: str
    source: str | bytes
    line: int
    code: str
    fragment: str
    path: str = BAD
    severity: str = "error"
    thorough: bool = False


CASES = [
    Case("non-literal-est", IMP + 'register_cpu_ci(est_time=EST, suite="stage-a-cpu")\n', 2, "non-literal",
         "argument 'est_time' of register_cpu_ci must be a literal, got `EST`"),
    Case("f-string-suite", IMP + 'register_cpu_ci(5, f"stage-{X}")\n', 2, "non-literal",
         "argument 'suite' of register_cpu_ci must be a literal"),
    Case("starred-positional", IMP + "register_cpu_ci(*ARGS)\n", 2, "starred-argument", "*ARGS"),
    Case("double-star", IMP + 'register_cpu_ci(5, "stage-a-cpu", **KW)\n', 2, "starred-argument", "**KW"),
    Case("unknown-keyword", IMP + 'register_cpu_ci(5, "stage-a-cpu", label=["fsdp"])\n', 2,
         "unknown-keyword", "unknown keyword 'label' (did you mean 'labels'?)"),
    Case("duplicate-keyword", IMP + 'register_cpu_ci(est_time=5, suite="stage-a-cpu", suite="stage-b-cpu")\n',
         2, "duplicate-keyword", "'suite' is given twice"),
    Case("positional-and-keyword", IMP + 'register_cpu_ci(5, "stage-a-cpu", est_time=6)\n', 2,
         "duplicate-keyword", "'est_time' is given positionally and as keyword"),
    Case("too-many-positional", IMP + 'register_cpu_ci(5, "stage-a-cpu", ["fsdp"])\n', 2,
         "too-many-positional", "at most 2 positional arguments"),
    Case("missing-est", IMP + 'register_cpu_ci(suite="stage-a-cpu")\n', 2, "missing-argument",
         "missing 'est_time'"),
    Case("missing-suite", IMP + "register_cpu_ci(est_time=5)\n", 2, "missing-argument", "missing 'suite'"),
    Case("est-string", IMP + 'register_cpu_ci(est_time="5", suite="stage-a-cpu")\n', 2, "wrong-type",
         "est_time must be a number of seconds, got '5'"),
    Case("est-bool", IMP + 'register_cpu_ci(True, "stage-a-cpu")\n', 2, "wrong-type", "got True"),
    Case("est-zero", IMP + 'register_cpu_ci(0, "stage-a-cpu")\n', 2, "est-time-range", "> 0, got 0"),
    Case("est-negative", IMP + 'register_cpu_ci(-3, "stage-a-cpu")\n', 2, "est-time-range", "got -3"),
    Case("est-infinite", IMP + 'register_cpu_ci(1e999, "stage-a-cpu")\n', 2, "est-time-range", "got inf"),
    # finite but absurd: timeouts and shard estimates computed from it overflow (run crashed)
    Case("est-absurd", IMP + 'register_cpu_ci(1e308, "stage-a-cpu")\n', 2, "est-time-range",
         "est_time must be at most 604800 seconds (7 days), got 1e+308"),
    Case("suite-int", IMP + "register_cpu_ci(5, 3)\n", 2, "wrong-type", "suite must be a string"),
    Case("empty-disabled", IMP + 'register_cpu_ci(5, "stage-a-cpu", disabled="")\n', 2, "empty-disabled",
         "non-empty reason"),
    Case("blank-disabled", IMP + 'register_cpu_ci(5, "stage-a-cpu", disabled="   ")\n', 2, "empty-disabled",
         "non-empty reason"),
    Case("disabled-bool", IMP + 'register_cpu_ci(5, "stage-a-cpu", disabled=True)\n', 2, "wrong-type",
         "disabled must be a reason string or None"),
    Case("nightly-string", IMP + 'register_cpu_ci(5, "stage-a-cpu", nightly="yes")\n', 2, "wrong-type",
         "nightly must be True or False"),
    Case("labels-string", IMP + 'register_cpu_ci(5, "stage-a-cpu", labels="fsdp")\n', 2, "wrong-type",
         "labels must be a list of strings"),
    Case("label-int", IMP + 'register_cpu_ci(5, "stage-a-cpu", labels=[1])\n', 2, "wrong-type",
         "label 1 is not a string"),
    Case("unknown-suite", IMP + 'register_cpu_ci(5, "stage-a-cpux")\n', 2, "unknown-suite",
         "suite 'stage-a-cpux' is not a configured stage (did you mean 'stage-a-cpu'?); "
         "valid cpu stages: stage-a-cpu, stage-b-cpu"),
    Case("suite-other-backend", IMP + 'register_cuda_ci(5, "stage-a-cpu", labels=["fsdp"])\n', 2,
         "suite-backend", "suite 'stage-a-cpu' is a cpu stage, but register_cuda_ci registers for cuda; "
         "valid cuda stages: stage-c-4-gpu-h200"),
    Case("unknown-label", IMP + 'register_cuda_ci(5, "stage-c-4-gpu-h200", labels=["megatorn"])\n', 2,
         "unknown-label", "unknown label 'megatorn' (did you mean 'megatron'?); valid labels: amd, fsdp, megatron"),
    Case("gpu-no-labels", IMP + 'register_cuda_ci(5, "stage-c-4-gpu-h200")\n', 2, "labels-required",
         "cuda registrations need at least one label"),
    Case("gpu-empty-labels", IMP + 'register_rocm_ci(5, "stage-c-4-gpu-mi300x", labels=[])\n', 2,
         "labels-required", "rocm registrations need at least one label"),
    Case("two-cuda", IMP + 'register_cuda_ci(5, "stage-c-4-gpu-h200", labels=["fsdp"])\n'
         'register_cuda_ci(9, "stage-c-4-gpu-h200", labels=["fsdp"])\n', 3, "duplicate-stage",
         "second cuda registration of this file for stage 'stage-c-4-gpu-h200' (register_cuda_ci here, "
         "register_cuda_ci at line 2)"),
    Case("amd-alias-twice", IMP + 'register_rocm_ci(5, "stage-c-4-gpu-mi300x", labels=["amd"])\n'
         'register_amd_ci(5, "stage-c-4-gpu-mi300x", labels=["amd"])\n', 3, "duplicate-stage",
         "second rocm registration"),
    Case("unregistered", "def test_x():\n    pass\n", 0, "unregistered", "test file has no registration"),
    Case("gpu-in-implicit", IMP + 'register_cuda_ci(5, "stage-c-4-gpu-h200", labels=["fsdp"])\n', 2,
         "backend-in-implicit", "in 'tests/fast', an implicit cpu directory", path="tests/fast/test_gpu.py"),
    Case("aliased-import", "from testfleet import register_cuda_ci as rc\n\n"
         'rc(5, "stage-c-4-gpu-h200", labels=["fsdp"])\n', 1, "marker-not-read",
         "register_cuda_ci is imported as 'rc'"),
    Case("call-in-function", CPU + 'register_cpu_ci(5, "stage-a-cpu")\n\n\ndef setup():\n'
         '    register_cpu_ci(5, "stage-a-cpu")\n', 6, "marker-in-function",
         "register_cpu_ci(...) is called inside `def setup():` (line 5), not at module level",
         severity="warning"),
    Case("call-in-if", IMP + "import os\nif os.environ.get('GPU'):\n"
         '    register_cuda_ci(5, "stage-c-4-gpu-h200", labels=["fsdp"])\n'
         'register_cpu_ci(5, "stage-a-cpu")\n', 4, "marker-not-read",
         "called inside `if os.environ.get('GPU'):` (line 3)"),
    Case("attribute-call", "import testfleet\n\n"
         'testfleet.register_cuda_ci(5, "stage-c-4-gpu-h200", labels=["fsdp"])\n', 3, "marker-not-read",
         "attribute call testfleet.register_cuda_ci(...)"),
    Case("embedded-call", IMP + 'x = register_cpu_ci(5, "stage-a-cpu")\n', 2, "marker-not-read",
         "part of a larger statement"),
    Case("named-not-called", IMP + 'register_cpu_ci(5, "stage-a-cpu")\n'
         "MARKERS = [register_cuda_ci]\n", 1, "marker-not-called",
         "register_cuda_ci is named here but this file has no top-level register_cuda_ci(...) call"),
    Case("syntax-in-call", IMP + 'register_cpu_ci(est_time=5 suite="stage-a-cpu")\n', 2, "syntax",
         "invalid syntax in register_cpu_ci(...)"),
    Case("unclosed-call", IMP + 'register_cpu_ci(5, "stage-a-cpu"\n', 2, "syntax", "is never closed"),
    Case("not-utf8", b"# caf\xe9\nregister_cpu_ci(5, 'stage-a-cpu')\n", 0, "encoding",
         "file is not UTF-8 (line 1: byte 0xe9"),
    Case("huge-int-est", CPU + "register_cpu_ci(" + "9" * 400 + ', "stage-a-cpu")\n', 2, "est-time-range",
         "got an int of 400 digits"),
    Case("too-many-digits", CPU + "register_cpu_ci(" + "9" * 5000 + ', "stage-a-cpu")\n', 2, "syntax",
         "Exceeds the limit"),
    Case("nul-byte", CPU + 'register_cpu_ci(5, "stage-a-cpu"\x00)\n', 2, "syntax", "register_cpu_ci(...)"),
    Case("absurd-nesting", CPU + "register_cpu_ci(5, 'stage-a-cpu', labels=" + "[" * 300 + "]" * 300 + ")\n", 2,
         "syntax", "too many nested parentheses"),
    Case("parser-exhaustion", CPU + "register_cpu_ci(5, 'stage-a-cpu', labels=" + "-" * 100000 + "1)\n", 2,
         "syntax", "cannot be parsed"),
    Case("syntax-elsewhere", IMP + 'register_cpu_ci(5, "stage-a-cpu")\n\ndef test_x(:\n    pass\n', 4,
         "syntax", "syntax error", thorough=True),
    Case("python-stage-no-main", CPU + 'register_cpu_ci(5, "stage-b-cpu")\n\ndef test_x():\n    pass\n', 2,
         "no-main-call", "runs files as `python FILE`", severity="warning"),
    Case("duplicate-label", "from testfleet import register_cuda_ci\n" + 'register_cuda_ci(5, "stage-c-4-gpu-h200", labels=["fsdp", "fsdp"])\n', 2,
         "duplicate-label", "label 'fsdp' is listed twice", severity="warning"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_registration_case(case: Case, tree, run_cli) -> None:
    project = tree({case.path: case.source})
    registry = collect(project, use_cache=False, thorough=case.thorough)
    hits = [f for f in registry.findings if f.file == case.path and f.code == case.code]
    assert hits, f"no {case.code} finding; got {[f.render() for f in registry.findings]}"
    f = hits[0]
    assert (f.line, f.severity) == (case.line, case.severity), f.render()
    assert case.fragment in f.message, f.render()
    # The valid files elsewhere are still collected, exactly as declared.
    assert {(r.file, r.backend) for r in registry.registrations} >= GOOD_KEYS
    # The CLI reports it too, with the documented exit status and no traceback.
    code, out, err = run_cli("-C", str(project.root), "check", "--format", "json")
    assert "Traceback" not in out + err
    doc = json.loads(out)
    assert code == (1 if case.severity == "error" else 0)
    assert any(x["file"] == case.path and x["code"] == case.code and x["line"] == case.line
               for x in doc["findings"])
    code, out, err = run_cli("-C", str(project.root), "list", "--format", "json")
    assert "Traceback" not in out + err
    listed = {(r["file"], r["backend"]) for r in json.loads(out)["registrations"]}
    assert listed >= GOOD_KEYS
    if case.severity == "error" and not case.thorough:
        assert code == 1 and case.path in err


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 30


def test_all_errors_of_one_call_at_once(tree) -> None:
    project = tree({BAD: "from testfleet import register_cuda_ci\n" + 'register_cuda_ci(-1, "nope", labels=["megatorn", 3], nightly=1, disabled="")\n'})
    codes = sorted(f.code for f in collect(project, use_cache=False).findings if f.file == BAD)
    assert codes == ["empty-disabled", "est-time-range", "unknown-label", "unknown-suite", "wrong-type",
                     "wrong-type"]


def test_all_files_reported_in_one_pass(tree) -> None:
    files = {f"tests/unit/test_b{i}.py": IMP + f'register_cpu_ci({-i}, "stage-a-cpu")\n' for i in range(1, 6)}
    registry = collect(tree(files), use_cache=False)
    assert sorted(f.file for f in registry.findings if f.code == "est-time-range") == sorted(files)


def test_error_columns_point_at_the_argument(tree) -> None:
    src = "from testfleet import register_cuda_ci\n" + 'register_cuda_ci(\n    est_time=5,\n    suite="stage-c-4-gpu-h200",\n    labels=["fsdp", "nope"],\n)\n'
    f = next(f for f in collect(tree({BAD: src}), use_cache=False).findings if f.code == "unknown-label")
    assert (f.line, f.col) == (5, 21)


CONFIG_CASES = [
    ("unknown-key", "rooots = ['x']\n" + BASE_CONFIG, "rooots", "unknown key"),
    ("unknown-backend", BASE_CONFIG + "[stages.stage-t]\nbackend = 'tpu'\n", "stages.stage-t.backend",
     "unknown backend 'tpu'"),
    ("implicit-unknown-suite", BASE_CONFIG.replace('suite = "stage-a-cpu"', 'suite = "stage-z"'), "implicit.0.suite",
     "unknown stage 'stage-z'"),
    ("shards-zero", BASE_CONFIG + "[stages.stage-x]\nbackend = 'cpu'\nshards = 0\n", "stages.stage-x.shards",
     "greater than or equal to 1"),
    ("bad-command", BASE_CONFIG + "[stages.stage-x]\nbackend = 'cpu'\ncommand = 'bash'\n",
     "stages.stage-x.command", "never names the file"),
    ("shards-and-target", BASE_CONFIG + "[stages.stage-x]\nbackend = 'cpu'\nshards = 2\ntarget_minutes = 5\n",
     "stages.stage-x", "either 'shards' or 'target_minutes'"),
    ("needs-cycle", BASE_CONFIG + "[stages.s1]\nbackend = 'cpu'\nneeds = ['s2']\n[stages.s2]\nbackend = 'cpu'\n"
     "needs = ['s1']\n", "stages.s1.needs", "forms a cycle"),
    ("implicit-unknown-label", BASE_CONFIG.replace("est_time = 5\n", "est_time = 5\nlabels = ['nope']\n"),
     "implicit.0.labels", "unknown label 'nope'"),
    ("field-and-reference-errors-together",
     BASE_CONFIG + "[stages.stage-t]\nbackend = 'cudaa'\nshards = 'many'\n", "stages.stage-t.backend",
     "unknown backend 'cudaa' (did you mean 'cuda'?)"),
    ("empty-dormant-reason", BASE_CONFIG + "[stages.stage-x]\nbackend = 'cpu'\ndisabled = ''\n",
     "stages.stage-x.disabled", "non-empty reason"),
    ("absolute-root", BASE_CONFIG.replace('roots = ["tests"]', 'roots = ["/etc"]'), "roots",
     "must be a relative path"),
    ("invalid-toml", BASE_CONFIG + "[stages\n", "", "invalid TOML"),
    ("cache-dir-outside", 'cache_dir = "../elsewhere"\n' + BASE_CONFIG, "cache_dir", "must be a relative path"),
    ("cache-dir-absolute", 'cache_dir = "/etc"\n' + BASE_CONFIG, "cache_dir", "must be a relative path"),
    # the generated workflow hands it to actions/cache (glob patterns, `${{ }}` evaluated)
    ("cache-dir-expression", 'cache_dir = ".tf${{ github.event.pull_request.title }}"\n' + BASE_CONFIG,
     "cache_dir", "holds '${{', which GitHub would evaluate as an expression"),
    ("cache-dir-newline", 'cache_dir = ".tf\\nsecrets"\n' + BASE_CONFIG, "cache_dir",
     "holds a control character ('\\n')"),
    ("cache-dir-glob", 'cache_dir = ".tf*"\n' + BASE_CONFIG, "cache_dir",
     "holds '*', which the CI cache action would read as a pattern"),
    ("cache-dir-exclusion", 'cache_dir = "./!tf"\n' + BASE_CONFIG, "cache_dir",
     "holds a leading '!', which the CI cache action would read as an exclusion"),
    # #17: testfleet's own directory must not be the project, a root or an implicit directory
    ("cache-dir-dot", 'cache_dir = "."\n' + BASE_CONFIG, "cache_dir", "the project directory itself"),
    ("cache-dir-root", 'cache_dir = "tests"\n' + BASE_CONFIG, "cache_dir",
     "'tests' is or contains the root 'tests'"),
    ("cache-dir-implicit", 'cache_dir = "./tests/fast/"\n' + BASE_CONFIG, "cache_dir",
     "contains the implicit directory 'tests/fast'"),
    # #17: an implicit GPU directory obeys the label rule of its backend's registrations
    ("implicit-gpu-without-labels", BASE_CONFIG.replace(
        'backend = "cpu"\nsuite = "stage-a-cpu"', 'backend = "cuda"\nsuite = "stage-c-4-gpu-h200"', 1),
     "implicit.0.labels", "cuda registrations need at least one label"),
    # 'ü' is a letter: the message must say the rule is ASCII
    ("non-ascii-label", BASE_CONFIG.replace("[labels]\n", "[labels]\n\"\u00fcni\" = 'x'\n"), "labels",
     "ASCII letters"),
    ("absurdly-long-stage", BASE_CONFIG + "[stages." + "s" * 3000 + "]\nbackend = 'cpu'\n", "stages",
     "is 3000 characters long; at most 100"),
    ("implicit-est-infinite", BASE_CONFIG.replace("est_time = 5\n", "est_time = inf\n"), "implicit.0.est_time",
     "finite number"),
    ("implicit-est-absurd", BASE_CONFIG.replace("est_time = 5\n", "est_time = 1e308\n"), "implicit.0.est_time",
     "less than or equal to 604800"),
    # inf or absurd timeouts and targets crashed `plan` and `run` with an OverflowError
    ("timeout-factor-inf", BASE_CONFIG + "[runner]\ntimeout_factor = inf\n", "runner.timeout_factor",
     "finite number"),
    ("timeout-floor-inf", BASE_CONFIG + "[stages.stage-x]\nbackend = 'cpu'\ntimeout_floor = inf\n",
     "stages.stage-x.timeout_floor", "finite number"),
    ("grace-nan", BASE_CONFIG + "[runner]\ngrace_seconds = nan\n", "runner.grace_seconds", "finite number"),
    ("target-minutes-absurd", BASE_CONFIG + "[stages.stage-x]\nbackend = 'cpu'\ntarget_minutes = 1e308\n"
     "max_shards = 4\n", "stages.stage-x.target_minutes", "less than or equal to 10080"),
    ("timeout-factor-absurd", BASE_CONFIG + "[stages.stage-x]\nbackend = 'cpu'\ntimeout_factor = 1e308\n",
     "stages.stage-x.timeout_factor", "less than or equal to 1000"),
    # #30: one glob dialect (gitignore's) for every path pattern, each checked as exclude is
    ("no-impact-bang", BASE_CONFIG + "[policy]\nno_impact = ['docs/**', '!']\n", "policy.no_impact",
     "'!' is not a gitignore-style pattern"),
    ("per-file-ignores-bang", BASE_CONFIG + "[check]\nper-file-ignores = { '!' = ['no-main-call'] }\n",
     "check.per-file-ignores", "'!' is not a gitignore-style pattern"),
]


@pytest.mark.parametrize(("name", "config", "key", "fragment"), CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES])
def test_config_case(name: str, config: str, key: str, fragment: str, tree, run_cli, tmp_path) -> None:
    with pytest.raises(ConfigError) as info:
        tree(config=config)
    assert any(fragment in f.message and (not key or f.key.startswith(key)) for f in info.value.findings), (
        [f.render() for f in info.value.findings])
    if name == "field-and-reference-errors-together":
        assert any(f.key.endswith("stages.stage-t.shards") for f in info.value.findings)
    code, out, err = run_cli("-C", str(tmp_path / "proj"), "check", "--format", "json")
    assert code == 1 and "Traceback" not in out + err
    doc = json.loads(out)
    assert any(fragment in x["message"] for x in doc["findings"])
    assert all(x["file"] == "testfleet.toml" for x in doc["findings"])
    code, out, err = run_cli("-C", str(tmp_path / "proj"), "list")
    assert code == 2 and "testfleet: error:" in err and "Traceback" not in err


@pytest.mark.parametrize("call", [
    'register_cuda_ci(5, "stage-c-4-gpu-h200", labels=["{long}"])',
    'register_cpu_ci(5, "{long}")',
    'register_cpu_ci(5, "stage-a-cpu", disabled=["{long}"])',
], ids=["label", "suite", "non-string-value"])
def test_long_user_values_are_cut_in_messages(tree, call: str) -> None:
    """A 5,000-character label/suite must not be echoed whole into every message."""
    long = "x" * 5000
    src = IMP + call.replace("{long}", long) + "\n"
    found = [f for f in collect(tree({BAD: src}), use_cache=False).findings if f.file == BAD and f.line == 2]
    assert found
    for f in found:
        assert long not in f.message and len(f.message) < 600, f.message[:200]
        assert "characters)" in f.message and "…" in f.message


def test_long_keyword_is_cut_in_messages(tree) -> None:
    name = "k" * 3000
    src = IMP + f'register_cpu_ci(5, "stage-a-cpu", {name}=1)\n'
    f = next(f for f in collect(tree({BAD: src}), use_cache=False).findings if f.code == "unknown-keyword")
    assert name not in f.message and "(3000 characters)" in f.message
