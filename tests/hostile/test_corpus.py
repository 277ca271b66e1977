"""A permanent corpus of bad inputs (issue #17): each row is a project (files), a command,
the exit status it must give and a fragment of its message. No row may print a
traceback or hang. The README's reliability section quotes the counts this file
computes (``test_readme_quotes_the_corpus``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 60

CONFIG = """\
roots = ["tests"]

[stages.a]
backend = "cpu"
"""
GOOD_TEST = 'from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=5, suite="a")\n'
DEEP_TOML = ("[tool.other]\nx = " + "[" * 600 + "]" * 600 + "\n\n[tool.testfleet]\n"
             'roots = ["tests"]\n[tool.testfleet.stages.a]\nbackend = "cpu"\n')


# Special file contents: a symlink to the given target, or a FIFO (no writer ever comes).
LINK = "\0link:"
FIFO = "\0fifo"
UTF16 = "\0utf16:"  # the rest of the text, written as UTF-16 with a byte order mark
SPARSE = "\0sparse:"  # a sparse file of the given size (nothing really written)
GATED_TEST = GOOD_TEST + ('from testfleet import register_ci_gate\nregister_ci_gate(metric_key="m", '
                          'constraint={"rel_up": 0.1, "rel_down": 0.1})\n')
STEPS_100K = GOOD_TEST + ("from testfleet import register_ci_gate\nregister_ci_gate(metric_key='m', "
                          "constraint={'rel_up': 0.1, 'rel_down': 0.1}, steps=["
                          + ",".join(map(str, range(100_000))) + "])\n")
CACHES = (".testfleet/registry-cache.bin", ".testfleet/config-snapshot.json",
          ".testfleet/syntax-cache.json", ".testfleet/style-cache.json")
HOSTILE_NAME = "tests/test_b\n::error::pwned.py"


def _pr_payload(label: str) -> str:
    return json.dumps({"pull_request": {
        "labels": [{"name": label}], "head": {"repo": {"full_name": "o/r"}},
        "base": {"repo": {"full_name": "o/r"}}}}, ensure_ascii=True)


# (id, files {path: text}, argv, env, expected exit, message fragment). `check` reports a
# bad configuration as findings (exit 1); every other command refuses it (exit 2).
CORPUS: list[tuple[str, dict[str, str], list[str], dict[str, str], int, str]] = [
    ("exclude-bang", {"testfleet.toml": 'exclude = ["!"]\n' + CONFIG}, ["check"], {}, 1,
     "not a gitignore-style pattern"),
    ("exclude-bang-list", {"testfleet.toml": 'exclude = ["!"]\n' + CONFIG}, ["list"], {}, 2,
     "exclude"),
    ("deep-toml-other-tool", {"pyproject.toml": DEEP_TOML}, ["list"], {}, 2,
     "nested too deeply"),
    ("disabled-lone-surrogate",
     {"tests/test_a.py": GOOD_TEST.replace(')', ', disabled="\\ud800")')}, ["check"], {}, 1,
     "lone surrogate"),
    ("disabled-lone-surrogate-plan",
     {"tests/test_a.py": GOOD_TEST.replace(')', ', disabled="\\ud800")')}, ["plan"], {}, 1,
     "lone surrogate"),
    ("env-key-equals", {"testfleet.toml": CONFIG + '[stages.a.env]\n"A=B" = "x"\n'}, ["check"],
     {}, 1, "not an environment variable name"),
    ("env-key-empty", {"testfleet.toml": CONFIG + '[stages.a.env]\n"" = "x"\n'}, ["check"], {},
     1, "not an environment variable name"),
    ("env-key-nul", {"testfleet.toml": CONFIG + '[stages.a.env]\n"A\\u0000" = "x"\n'},
     ["run", "--stage", "a"], {}, 2, "not an environment variable name"),
    ("shards-true", {"testfleet.toml": CONFIG + "shards = true\n"}, ["check"], {}, 1,
     "whole number"),
    ("runs-on-newline", {"testfleet.toml": CONFIG + 'runs_on = ["ubuntu\\nlatest"]\n'},
     ["check"], {}, 1, "control character"),
    ("container-newline", {"testfleet.toml": CONFIG + 'container = "img\\n::error::x"\n'},
     ["plan"], {}, 2, "control character"),
    ("pattern-empty", {"testfleet.toml": 'pattern = ""\n' + CONFIG}, ["check"], {}, 1,
     "pattern"),
    ("plan-nested-5000", {"plan.json": "[" * 5000 + "]" * 5000},
     ["run", "--plan", "plan.json", "--job", "x"], {}, 2, "plan file"),
    ("plan-nan", {"plan.json": '{"schema": "testfleet.plan/1", "x": NaN}'},
     ["run", "--plan", "plan.json", "--job", "x"], {}, 2, "NaN is not a JSON number"),
    ("plan-lone-surrogate", {"plan.json": '{"schema": "testfleet.plan/1", "x": "\\ud800"}'},
     ["run", "--plan", "plan.json", "--job", "x"], {}, 2, "lone surrogate"),
    ("payload-label-lone-surrogate", {"event.json": _pr_payload("run-ci-\ud800")},
     ["plan", "--github"], {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": "event.json"},
     0, "lone surrogate"),
    ("prune-older-than-nan", {}, ["db", "prune", "--older-than", "nan"], {}, 2,
     "not a finite number"),
    ("suggest-factor-nan", {}, ["durations", "suggest", "--factor", "nan"], {}, 2,
     "not a finite number"),
    ("payload-dev-zero", {}, ["plan", "--github"],
     {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": "/dev/zero"}, 2, "larger than"),
    ("payload-nested", {"event.json": "[" * 100000 + "]" * 100000}, ["plan", "--github"],
     {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": "event.json"}, 2, "nested"),
    # injection and confinement
    ("file-name-newline-check", {HOSTILE_NAME: GOOD_TEST}, ["check"], {}, 1,
     "test_b\\n::error::pwned.py"),
    # run leaves a rejected file out and runs the valid ones (#12: errors are fates)
    ("file-name-newline-run", {HOSTILE_NAME: GOOD_TEST, "testfleet.toml": CONFIG
                               + 'command = "python"\n'}, ["run", "--stage", "a"],
     {"GITHUB_ACTIONS": "true"}, 0, "control character (U+000A)"),
    ("cache-dir-symlink-run", {".testfleet": LINK + "../elsewhere"}, ["run", "--stage", "a"], {},
     2, ".testfleet is a symlink"),
    ("cache-dir-symlink-check", {".testfleet": LINK + "../elsewhere"}, ["check"], {}, 1,
     "cache-dir-symlink"),
    ("cache-dir-symlink-db", {".testfleet": LINK + "../elsewhere"}, ["db", "init"], {}, 2,
     ".testfleet is a symlink"),
    ("cache-fifo-list", dict.fromkeys(CACHES, FIFO), ["list"], {}, 0, "1 of 1 registrations"),
    ("cache-fifo-plan", dict.fromkeys(CACHES, FIFO), ["plan"], {}, 0, "1 job(s)"),
    ("cache-fifo-check", dict.fromkeys(CACHES, FIFO), ["check"], {}, 0, "cache-not-a-file"),
    ("history-db-fifo", {".testfleet/history.db": FIFO}, ["db", "init"], {}, 2,
     "is a FIFO, not a database file"),
    ("history-db-fifo-plan", {".testfleet/history.db": FIFO}, ["plan"], {}, 0,
     "is a FIFO, not a database file; all estimates are est_time literals"),
    # JUnit import (defusedxml)
    ("junit-utf16-entity", {"r.xml": UTF16 + "<?xml version='1.0' encoding='UTF-16'?>"
                            "<!DOCTYPE t [<!ENTITY a 'x'>]><testsuite/>"},
     ["durations", "import", "r.xml", "--stage", "a"], {}, 2, "DTD or entity"),
    ("junit-late-doctype", {"r.xml": "<!--" + "x" * 5000 + "--><!DOCTYPE t SYSTEM 'e.dtd'>"
                            "<testsuite/>"},
     ["durations", "import", "r.xml", "--stage", "a"], {}, 2, "DTD or entity"),
    # validation gaps: each a finding with its key path
    ("implicit-gpu-no-labels", {"testfleet.toml": CONFIG + '[stages.g]\nbackend = "cuda"\n'
                                '[[implicit]]\npath = "tests/gpu"\nbackend = "cuda"\nsuite = "g"\n'
                                'est_time = 5\n'}, ["check"], {}, 1, "[implicit.0.labels]"),
    ("cache-dir-dot", {"testfleet.toml": 'cache_dir = "."\n' + CONFIG}, ["check"], {}, 1,
     "the project directory itself; testfleet's caches, history and run records need a "
     "directory of their own (default '.testfleet') [cache_dir]"),
    ("cache-dir-test-root", {"testfleet.toml": 'cache_dir = "tests"\n' + CONFIG}, ["plan"], {},
     2, "'tests' is or contains the root 'tests'"),
    ("cache-dir-holds-tests", {"testfleet.toml": 'cache_dir = "./tests/sub/"\n' + CONFIG,
                               "tests/sub/test_b.py": GOOD_TEST}, ["check"], {}, 1,
     "[cache_dir] (cache-dir-holds-tests)"),
    # the audit's other findings, kept here so they stay fixed
    ("line-continued-registration", {"tests/test_a.py": 'from testfleet import register_cpu_ci\n'
                                     'x = "abc" \\\nregister_cpu_ci(est_time=5, suite="a")\n'},
     ["check"], {}, 1, "part of a larger statement"),
    ("bare-marker-mentions-100k", {"tests/test_a.py": GOOD_TEST + "register_cpu_ci\n" * 100_000},
     ["check"], {}, 0, "0 errors"),
    ("os-exit-false-pass", {"tests/test_a.py": GOOD_TEST + "import os\ndef test_x():\n"
                            "    os._exit(0)\n"}, ["run", "--stage", "a", "--no-history"], {}, 1,
     "collected 1 test(s) but reported 0"),
    ("junit-future-timestamp", {"r.xml": '<testsuite timestamp="9999-12-31T00:00:00">'
                                '<testcase classname="tests.test_a" name="t" time="1"/>'
                                "</testsuite>"},
     ["durations", "import", "r.xml", "--stage", "a"], {}, 2, "is in the future"),
    ("record-5000-digit-value", {"tests/test_a.py": GATED_TEST,
                                 "r.jsonl": '{"metric": "m", "step": 0, "value": ' + "9" * 5000
                                 + "}\n"},
     ["gate", "evaluate", "--test", "tests/test_a.py", "--record", "r.jsonl"], {}, 2,
     "a number no metric can hold"),
    # bounds a pull request controls
    ("gate-steps-100k", {"tests/test_a.py": STEPS_100K}, ["check"], {}, 1,
     "at most 10000 are allowed"),
    ("record-file-300mib", {"tests/test_a.py": GATED_TEST, "r.jsonl": SPARSE + str(300 << 20)},
     ["gate", "evaluate", "--test", "tests/test_a.py", "--record", "r.jsonl"], {}, 2,
     "more than the 256 MiB testfleet reads"),
]


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "p"
    (root / "tests").mkdir(parents=True)
    defaults = {"testfleet.toml": CONFIG, "tests/test_a.py": GOOD_TEST}
    if "pyproject.toml" in files:
        defaults.pop("testfleet.toml")
    for rel, text in {**defaults, **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if text.startswith(LINK):
            (root / text.removeprefix(LINK)).resolve().mkdir(parents=True, exist_ok=True)
            path.symlink_to(text.removeprefix(LINK))
        elif text == FIFO:
            os.mkfifo(path)
        elif text.startswith(SPARSE):
            with open(path, "wb") as fh:
                fh.truncate(int(text.removeprefix(SPARSE)))
        elif text.startswith(UTF16):
            path.write_bytes(text.removeprefix(UTF16).encode("utf-16"))
        else:
            path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return root


def run_case(tmp_path: Path, files: dict[str, str], argv: list[str],
             env: dict[str, str]) -> tuple[int | None, str]:
    """(exit status or None when it hung, combined output)."""
    root = _project(tmp_path, files)
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    for key, value in env.items():
        full_env[key] = str(root / value) if value.endswith(".json") else value
    try:
        proc = subprocess.run([sys.executable, "-m", "testfleet", "-C", str(root), *argv],
                              capture_output=True, text=True, timeout=TIMEOUT, env=full_env,
                              errors="replace")
    except subprocess.TimeoutExpired:
        return None, ""
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize(("files", "argv", "env", "code", "fragment"),
                         [c[1:] for c in CORPUS], ids=[c[0] for c in CORPUS])
def test_bad_input_gets_a_clear_message(files: dict[str, str], argv: list[str],
                                        env: dict[str, str], code: int, fragment: str,
                                        tmp_path: Path) -> None:
    status, out = run_case(tmp_path, files, argv, env)
    assert status is not None, "hung"
    assert "Traceback" not in out, out
    assert status == code, out
    assert fragment in out, out


def test_readme_quotes_the_corpus() -> None:
    """The reliability figures in the README are this corpus's: inputs, and the 0
    tracebacks / hangs / data losses every row above asserts."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"inputs in the hostile corpus: (\d+)", text)
    assert match, "README lacks the reliability section"
    assert int(match.group(1)) == len(CORPUS)
    for what in ("tracebacks: 0", "hangs: 0", "data losses: 0"):
        assert what in text
