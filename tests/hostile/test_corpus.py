"""A permanent corpus of hostile inputs and faults (issues #17 and #27), run as real
processes with a time limit.

Each row is a project (files), what to do to it first (a git history, a merged history,
a hard link), one or more steps of commands (the commands of one step run at once),
the exit status every command must give and a fragment of the output. Every row is
judged on the same verdicts (:data:`VERDICTS`): it did not hang, printed no traceback,
exited as documented, said what went wrong, let no input issue a workflow command,
left the data it touched intact, leaked no process and wrote nothing outside the
project. The README's reliability figures are this file's own (:func:`figures`,
``test_readme_quotes_the_corpus``).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import re
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
# What a hostile text smuggles: a newline, a workflow command, a carriage return, another.
SMUGGLED = "\n::error::pwned\r::add-mask::pwned"
SHOWN = "\\n::error::pwned\\r::add-mask::pwned"  # the same, as testfleet must print it
# What testfleet itself may print as a workflow command (an annotation, escaped).
OWN = re.compile(r"::((error|warning|notice) (file=|title=)|group::|endgroup::$"
                 r"|stop-commands::[0-9a-f]{32}$|[0-9a-f]{32}::$)")

NOW = time.time()
DAY = 86400.0
FUTURE = 3_976_000_000.0  # 2096


def _pr_payload(label: str) -> str:
    return json.dumps({"pull_request": {
        "labels": [{"name": label}], "head": {"repo": {"full_name": "o/r"}},
        "base": {"repo": {"full_name": "o/r"}}}}, ensure_ascii=True)


# -- history bundles, built as a forger would (a correct checksum over any payload) -----

PUSH = {"event": "push", "ref": "refs/heads/main", "cadence": "regular", "write_baseline": True,
        "ci_run_id": "1", "repository": "o/r"}


def uid(n: int) -> str:
    return f"{n:032x}"


def execution(n: int, *, ts: float = NOW - DAY, outcome: str = "PASSED", duration: float = 60.0,
              file: str = "tests/test_a.py", attempt: int = 1, **extra: Any) -> dict[str, Any]:
    return {"uid": uid(n), "file": file, "stage": "a", "backend": "cpu", "duration": duration,
            "outcome": outcome, "attempt": attempt, "commit_sha": "abc", "ci_run_id": "1",
            "ts": ts, "recorded_at": ts, "gate_status": None, "gate_mode": None, "reason": None,
            "final": True, **extra}


def case_row(n: int, name: str, ts: float = NOW - DAY) -> dict[str, Any]:
    return {"execution": uid(n), "name": name, "outcome": "PASSED", "duration": 1.0,
            "final": True, "recorded_at": ts}


def gate_run(n: int, *, ts: float = NOW - DAY, **extra: Any) -> dict[str, Any]:
    return {"uid": uid(n), "run_id": f"r{n}", "test_path": "tests/test_a.py", "backend": "cpu",
            "suite": "a", "env_key": "", "ci_run_id": "1", "commit_sha": "abc", "trusted": True,
            "recorded_at": ts, "untrusted_at": None, "untrusted_by": None, **extra}


def gate_value(n: int, metric: str, value: float, step: int = -1) -> dict[str, Any]:
    return {"run": uid(n), "metric_key": metric, "steps_key": '"last"', "constraint_key": "{}",
            "step": step, "value": value, "actual_step": 3}


def bundle(*, executions: list[dict[str, Any]] | None = None,
           gate_runs: list[dict[str, Any]] | None = None,
           gate_values: list[dict[str, Any]] | None = None,
           testcases: list[dict[str, Any]] | None = None, source: dict[str, Any] | None = None,
           schema: str = "testfleet.bundle/1") -> bytes:
    payload = {"store_schema": 5, "created_at": NOW - DAY, "testfleet": "0.1.0",
               "source": source or PUSH, "executions": executions or [],
               "gate_runs": gate_runs or [], "gate_values": gate_values or [],
               "testcases": testcases or []}
    body = json.dumps(payload, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")
    digest = hashlib.sha256(body).hexdigest().encode()
    return gzip.compress(b'{"payload":' + body + b',"schema":' + json.dumps(schema).encode()
                         + b',"sha256":"' + digest + b'"}', mtime=0)


REAL = bundle(executions=[execution(1, ts=NOW - 4 * DAY), execution(2, ts=NOW - 3 * DAY),
                          execution(3, ts=NOW - 2 * DAY, outcome="FAILED"),
                          execution(4, ts=NOW - DAY, outcome="FAILED")])
FAKE_2096 = bundle(executions=[execution(10 + i, ts=FUTURE + i, duration=10_000.0,
                                         outcome="PASSED" if i < 3 else "FAILED")
                               for i in range(6)])
WITH_TESTCASES = bundle(executions=[execution(1)],
                        testcases=[case_row(1, "test_x"), case_row(1, "test_y")],
                        gate_runs=[gate_run(2)], gate_values=[gate_value(2, "m", 0.5)])


# -- JUnit in the encodings a report may declare -----------------------------------------

def junit(encoding: str, name: str, *, codec: str | None = None, extra: str = "") -> bytes:
    text = (f'<?xml version="1.0" encoding="{encoding}"?>{extra}<testsuite>'
            f'<testcase classname="tests.test_a" name="{name}" time="1.5"/></testsuite>')
    return text.encode(codec or encoding)


# -- rows ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ctx:
    """Where a row runs: the project, the caller's directory, a PostgreSQL URL (pg rows)."""

    root: Path
    caller: Path
    pg: str = ""


Check = Callable[[Ctx, str], list[str]]  # (where, all output) -> what was lost or changed


@dataclass(frozen=True)
class Row:
    id: str
    files: dict[str, str | bytes]
    steps: list[list[list[str]]]  # steps in order; the commands of one step run at once
    code: int
    fragment: str
    env: dict[str, str] = field(default_factory=dict)
    setup: Callable[[Ctx], None] | None = None
    intact: Check | None = None
    background: str | None = None  # Python run in the project beside the commands
    sigterm_after: float | None = None  # SIGTERM every command this long after it started
    fsize_limit: int | None = None  # RLIMIT_FSIZE of the commands (a full disk, in effect)
    pg: bool = False  # needs the real PostgreSQL server ({pg} in argv: a fresh schema's URL)
    pids: bool = False  # the row's test writes its pid to pids/test: it must not outlive the run


def row(id: str, files: dict[str, str | bytes], argv: list[str], env: dict[str, str], code: int,
        fragment: str, **kw: Any) -> Row:
    return Row(id, files, [[argv]], code, fragment, env, **kw)


def tf(ctx: Ctx, *argv: str) -> str:
    """A setup command; it must succeed."""
    proc = subprocess.run([sys.executable, "-m", "testfleet", "-C", str(ctx.root), *argv],
                          capture_output=True, text=True, timeout=TIMEOUT, env=_env({}, ctx),
                          cwd=ctx.caller)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _git(ctx: Ctx, *argv: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main",
                    "-C", str(ctx.root), *argv], check=True, capture_output=True, timeout=TIMEOUT)


# S2: a fork replaces the configuration with a symlink to a laxer file of the base commit.
STRICT = (CONFIG + '[labels]\nx = "x"\n[policy]\nauthorize_labels = ["ok-to-test"]\n'
          '[stages.g]\nbackend = "cuda"\nruns_on = ["self-hosted", "h200"]\ntrusted_only = true\n')
LAX = STRICT.replace("trusted_only = true", "trusted_only = false")
GPU_TEST = 'from testfleet import register_cuda_ci\nregister_cuda_ci(est_time=5, suite="g", labels=["x"])\n'
FORK_PLAN = ["plan", "--fork", "--labels", "run-ci-x", "--trust-base", "HEAD", "--format", "json"]


def _fork_links_config(ctx: Ctx) -> None:
    _git(ctx, "init", "-q")
    _git(ctx, "add", "-A")
    _git(ctx, "commit", "-qm", "base")
    (ctx.root / "testfleet.toml").unlink()
    (ctx.root / "testfleet.toml").symlink_to("lax.toml")


def _base_links_config(ctx: Ctx) -> None:
    (ctx.root / "testfleet.toml").unlink()
    (ctx.root / "testfleet.toml").symlink_to("lax.toml")
    _git(ctx, "init", "-q")
    _git(ctx, "add", "-A")
    _git(ctx, "commit", "-qm", "base")


def _gpu_unauthorized(ctx: Ctx, out: str) -> list[str]:
    plan = json.loads(out[out.index("{"):out.rindex("}") + 1])
    problems = [f"a fork got a job on {j['runs_on']}" for j in plan["jobs"] if j["stage"] == "g"]
    fates = {s["file"]: s["reason"] for s in plan["skipped"]}
    if fates.get("tests/test_g.py") != "unauthorized":
        problems.append(f"tests/test_g.py is {fates.get('tests/test_g.py')!r}, not unauthorized")
    return problems


# D1: disable / enable on files others write too.
TWELVE = CONFIG + "".join(f'[stages.s{i}]\nbackend = "cpu"\n' for i in range(12))
TWELVE_TEST = ("from testfleet import register_cpu_ci\n"
               + "".join(f'register_cpu_ci(est_time=5, suite="s{i}")\n' for i in range(12)))
APPENDER = """\
import os, time
fd = os.open("tests/test_a.py", os.O_WRONLY | os.O_APPEND)
n = 0
while not os.path.exists("stop"):
    os.write(fd, f"# appended line {n}\\n".encode())
    n += 1
    time.sleep(0.01)
with open("appended", "w") as fh:
    fh.write(str(n))
"""
SHAPES = ("from testfleet import register_cpu_ci\r\n"
          'register_cpu_ci(est_time=5, suite="a")\r\n'
          "register_cpu_ci(\r\n    est_time=5,\r\n    suite=\"b\",  # why\r\n)\r\n"
          "register_cpu_ci(\r\n    est_time=5,\r\n    suite=\"c\"\r\n)\r\n"
          "register_cpu_ci(est_time=5,\r\n                suite=\"d\")\r\n")
SHAPES_CONFIG = CONFIG + "".join(f'[stages.{s}]\nbackend = "cpu"\n' for s in "bcd")
URL = "https://github.com/o/r/issues/223"
PAD = "".join(f"# padding line {i}\n" for i in range(12_000))  # ~250 KiB


def _unchanged(*names: str) -> Check:
    def check(ctx: Ctx, out: str) -> list[str]:
        return [f"{n} changed" for n in names
                if (ctx.root / n).read_bytes() != _original(ctx, n)]
    return check


def _original(ctx: Ctx, name: str) -> bytes:
    return (ctx.root.parent / "original" / name).read_bytes()


def _twelve_disabled(ctx: Ctx, out: str) -> list[str]:
    text = (ctx.root / "tests/test_a.py").read_text()
    return [f"stage s{i}'s edit was lost" for i in range(12)
            if f'suite="s{i}", disabled="broken {i}")' not in text]


def _appends_kept(ctx: Ctx, out: str) -> list[str]:
    text = (ctx.root / "tests/test_a.py").read_text()
    n = int((ctx.root / "appended").read_text())
    lost = [i for i in range(n) if text.count(f"# appended line {i}\n") != 1]
    problems = [f"{len(lost)} of {n} appended lines lost or doubled"] if lost else []
    if 'disabled="r")' not in text:
        problems.append("the disable edit was lost")
    return problems


def _chown_link(ctx: Ctx) -> None:
    path = ctx.root / "tests/test_a.py"
    os.chmod(path, 0o640)
    os.link(path, ctx.root / "linked.py")
    if os.geteuid() == 0:
        os.chown(path, 4321, 4322)


def _owner_mode_links(ctx: Ctx, out: str) -> list[str]:
    path = ctx.root / "tests/test_a.py"
    st = path.stat()
    problems = []
    if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (4321, 4322):
        problems.append(f"owner changed to {st.st_uid}:{st.st_gid}")
    if st.st_mode & 0o7777 != 0o640:
        problems.append(f"mode changed to {st.st_mode & 0o7777:o}")
    if st.st_nlink != 2 or (ctx.root / "linked.py").read_bytes() != path.read_bytes():
        problems.append("the hard link was broken")
    if b'disabled="r"' not in path.read_bytes():
        problems.append("the edit is missing")
    return problems


def _round_trip(ctx: Ctx, out: str) -> list[str]:
    problems = _unchanged("tests/test_a.py")(ctx, out)
    return problems + (["printed disabled=disabled="] if "disabled=disabled=" in out else [])


# D2, D3: what the history database holds afterwards.
def _sqlite(ctx: Ctx, query: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(ctx.root / ".testfleet/history.db") as db:
        return db.execute(query).fetchall()


def _real_rows_kept(ctx: Ctx, out: str) -> list[str]:
    rows = _sqlite(ctx, "SELECT uid, ts, duration FROM executions ORDER BY uid")
    uids = [r[0] for r in rows]
    problems = []
    if uids != [uid(n) for n in (1, 2, 3, 4)]:
        problems.append(f"stored executions are {uids}, not the four real ones")
    if any(r[1] > NOW + 3600 for r in rows):
        problems.append("a row dated in the future was stored")
    shown = json.loads(tf(ctx, "durations", "show", "--format", "json"))
    estimate = next(r["estimate"] for r in shown["rows"] if r["file"] == "tests/test_a.py")
    if estimate != 60.0:
        problems.append(f"the estimate became {estimate} s")
    return problems


def _one_copy(ctx: Ctx, out: str) -> list[str]:
    rows = _sqlite(ctx, "SELECT duration FROM executions")
    return [] if rows == [(60.0,)] else [f"stored {rows}"]


def _pg_init(ctx: Ctx) -> None:
    tf(ctx, "db", "init", "--database", ctx.pg)


def _pg_counts(ctx: Ctx, out: str) -> list[str]:
    import sqlalchemy as sa

    engine = sa.create_engine(ctx.pg.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            counts = {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar()
                      for t in ("executions", "testcases", "gate_runs", "gate_values")}
    finally:
        engine.dispose()
    want = {"executions": 1, "testcases": 2, "gate_runs": 1, "gate_values": 1}
    return [] if counts == want else [f"stored {counts}, not {want}"]


# H1: a catastrophic pattern in the configuration a pull request controls.
CATASTROPHIC = CONFIG + ('command = "python"\n[runner]\ntimeout_floor = {floor}\n'
                         "timeout_factor = 0.01\ngrace_seconds = 1\n"
                         'fatal_patterns = ["^(a|a)*$"]\nretriable_patterns = ["(a+)+$"]\n')
TRIGGER = (GOOD_TEST + "import os, time\nif __name__ == '__main__':\n"
           "    open('pids/test', 'w').write(str(os.getpid()))\n"
           "    print('a' * 40 + 'b', flush=True)\n    time.sleep(30)\n")


def _no_test_left(ctx: Ctx) -> list[str]:
    pid_file = ctx.root / "pids/test"
    if not pid_file.exists():
        return ["the test never started"]
    pid = int(pid_file.read_text())
    return [f"test process {pid} outlived the runner"] if _alive(pid) else []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


# The composite action's run step (action.yml), with a stand-in testfleet.
def _plan_file(text: str) -> dict[str, str | bytes]:
    return {"plan.json": text}


def _real_plan(edit: Callable[[str], str] = lambda text: text) -> Callable[[Ctx], None]:
    """A plan testfleet made for the project, as plan.json (then ``edit``ed)."""
    def setup(ctx: Ctx) -> None:
        tf(ctx, "plan", "--event", "push", "--plan-file", str(ctx.root / "plan.json"))
        path = ctx.root / "plan.json"
        path.write_text(edit(path.read_text()))
    return setup


def _bundle_path(name: str) -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        tf(ctx, "history", "merge", str(ctx.root / name))
    return setup


# (id, files {path: text or bytes}, argv, env, expected exit, message fragment). `check`
# reports a bad configuration as findings (exit 1); every other command refuses it (exit 2).
CORPUS: list[Row] = [
    row("exclude-bang", {"testfleet.toml": 'exclude = ["!"]\n' + CONFIG}, ["check"], {}, 1,
        "not a gitignore-style pattern"),
    row("exclude-bang-list", {"testfleet.toml": 'exclude = ["!"]\n' + CONFIG}, ["list"], {}, 2,
        "exclude"),
    row("deep-toml-other-tool", {"pyproject.toml": DEEP_TOML}, ["list"], {}, 2,
        "nested too deeply"),
    row("disabled-lone-surrogate",
        {"tests/test_a.py": GOOD_TEST.replace(')', ', disabled="\\ud800")')}, ["check"], {}, 1,
        "lone surrogate"),
    row("disabled-lone-surrogate-plan",
        {"tests/test_a.py": GOOD_TEST.replace(')', ', disabled="\\ud800")')}, ["plan"], {}, 1,
        "lone surrogate"),
    row("env-key-equals", {"testfleet.toml": CONFIG + '[stages.a.env]\n"A=B" = "x"\n'}, ["check"],
        {}, 1, "not an environment variable name"),
    row("env-key-empty", {"testfleet.toml": CONFIG + '[stages.a.env]\n"" = "x"\n'}, ["check"], {},
        1, "not an environment variable name"),
    row("env-key-nul", {"testfleet.toml": CONFIG + '[stages.a.env]\n"A\\u0000" = "x"\n'},
        ["run", "--stage", "a"], {}, 2, "not an environment variable name"),
    row("shards-true", {"testfleet.toml": CONFIG + "shards = true\n"}, ["check"], {}, 1,
        "whole number"),
    row("runs-on-newline", {"testfleet.toml": CONFIG + 'runs_on = ["ubuntu\\nlatest"]\n'},
        ["check"], {}, 1, "control character"),
    row("container-newline", {"testfleet.toml": CONFIG + 'container = "img\\n::error::x"\n'},
        ["plan"], {}, 2, "control character"),
    row("pattern-empty", {"testfleet.toml": 'pattern = ""\n' + CONFIG}, ["check"], {}, 1,
        "pattern"),
    row("plan-nested-5000", {"plan.json": "[" * 5000 + "]" * 5000},
        ["run", "--plan", "plan.json", "--job", "x"], {}, 2, "plan file"),
    row("plan-nan", {"plan.json": '{"schema": "testfleet.plan/1", "x": NaN}'},
        ["run", "--plan", "plan.json", "--job", "x"], {}, 2, "NaN is not a JSON number"),
    row("plan-lone-surrogate", {"plan.json": '{"schema": "testfleet.plan/1", "x": "\\ud800"}'},
        ["run", "--plan", "plan.json", "--job", "x"], {}, 2, "lone surrogate"),
    row("payload-label-lone-surrogate", {"event.json": _pr_payload("run-ci-\ud800")},
        ["plan", "--github"], {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": "event.json"},
        0, "lone surrogate"),
    row("prune-older-than-nan", {}, ["db", "prune", "--older-than", "nan"], {}, 2,
        "not a finite number"),
    row("suggest-factor-nan", {}, ["durations", "suggest", "--factor", "nan"], {}, 2,
        "not a finite number"),
    row("payload-dev-zero", {}, ["plan", "--github"],
        {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": "/dev/zero"}, 2,
        "is a character device, not a regular file"),
    row("payload-nested", {"event.json": "[" * 100000 + "]" * 100000}, ["plan", "--github"],
        {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": "event.json"}, 2, "nested"),
    # injection and confinement
    row("file-name-newline-check", {HOSTILE_NAME: GOOD_TEST}, ["check"], {}, 1,
        "test_b\\n::error::pwned.py"),
    # run leaves a rejected file out and runs the valid ones (#12: errors are fates)
    row("file-name-newline-run", {HOSTILE_NAME: GOOD_TEST, "testfleet.toml": CONFIG
                                  + 'command = "python"\n'}, ["run", "--stage", "a"],
        {"GITHUB_ACTIONS": "true"}, 0, "control character (U+000A)"),
    row("cache-dir-symlink-run", {".testfleet": LINK + "../elsewhere"}, ["run", "--stage", "a"], {},
        2, ".testfleet is a symlink"),
    row("cache-dir-symlink-check", {".testfleet": LINK + "../elsewhere"}, ["check"], {}, 1,
        "cache-dir-symlink"),
    row("cache-dir-symlink-db", {".testfleet": LINK + "../elsewhere"}, ["db", "init"], {}, 2,
        ".testfleet is a symlink"),
    row("cache-fifo-list", dict.fromkeys(CACHES, FIFO), ["list"], {}, 0, "1 of 1 registrations"),
    row("cache-fifo-plan", dict.fromkeys(CACHES, FIFO), ["plan"], {}, 0, "1 job(s)"),
    row("cache-fifo-check", dict.fromkeys(CACHES, FIFO), ["check"], {}, 0, "cache-not-a-file"),
    row("history-db-fifo", {".testfleet/history.db": FIFO}, ["db", "init"], {}, 2,
        "is a FIFO, not a database file"),
    row("history-db-fifo-plan", {".testfleet/history.db": FIFO}, ["plan"], {}, 0,
        "is a FIFO, not a database file; all estimates are est_time literals"),
    # JUnit import (defusedxml)
    row("junit-utf16-entity", {"r.xml": UTF16 + "<?xml version='1.0' encoding='UTF-16'?>"
                               "<!DOCTYPE t [<!ENTITY a 'x'>]><testsuite/>"},
        ["durations", "import", "r.xml", "--stage", "a"], {}, 2, "DTD or entity"),
    row("junit-late-doctype", {"r.xml": "<!--" + "x" * 5000 + "--><!DOCTYPE t SYSTEM 'e.dtd'>"
                               "<testsuite/>"},
        ["durations", "import", "r.xml", "--stage", "a"], {}, 2, "DTD or entity"),
    # validation gaps: each a finding with its key path
    row("implicit-gpu-no-labels", {"testfleet.toml": CONFIG + '[stages.g]\nbackend = "cuda"\n'
                                   '[[implicit]]\npath = "tests/gpu"\nbackend = "cuda"\nsuite = "g"\n'
                                   'est_time = 5\n'}, ["check"], {}, 1, "[implicit.0.labels]"),
    row("cache-dir-dot", {"testfleet.toml": 'cache_dir = "."\n' + CONFIG}, ["check"], {}, 1,
        "the project directory itself; testfleet's caches, history and run records need a "
        "directory of their own (default '.testfleet') [cache_dir]"),
    row("cache-dir-test-root", {"testfleet.toml": 'cache_dir = "tests"\n' + CONFIG}, ["plan"], {},
        2, "'tests' is or contains the root 'tests'"),
    row("cache-dir-holds-tests", {"testfleet.toml": 'cache_dir = "./tests/sub/"\n' + CONFIG,
                                  "tests/sub/test_b.py": GOOD_TEST}, ["check"], {}, 1,
        "[cache_dir] (cache-dir-holds-tests)"),
    # the audit's other findings, kept here so they stay fixed
    row("line-continued-registration", {"tests/test_a.py": 'from testfleet import register_cpu_ci\n'
                                        'x = "abc" \\\nregister_cpu_ci(est_time=5, suite="a")\n'},
        ["check"], {}, 1, "part of a larger statement"),
    row("bare-marker-mentions-100k", {"tests/test_a.py": GOOD_TEST + "register_cpu_ci\n" * 100_000},
        ["check"], {}, 0, "0 errors"),
    row("os-exit-false-pass", {"tests/test_a.py": GOOD_TEST + "import os\ndef test_x():\n"
                               "    os._exit(0)\n"}, ["run", "--stage", "a", "--no-history"], {}, 1,
        "collected 1 test(s) but reported 0"),
    row("junit-future-timestamp", {"r.xml": '<testsuite timestamp="9999-12-31T00:00:00">'
                                   '<testcase classname="tests.test_a" name="t" time="1"/>'
                                   "</testsuite>"},
        ["durations", "import", "r.xml", "--stage", "a"], {}, 2, "is in the future"),
    row("record-5000-digit-value", {"tests/test_a.py": GATED_TEST,
                                    "r.jsonl": '{"metric": "m", "step": 0, "value": ' + "9" * 5000
                                    + "}\n"},
        ["gate", "evaluate", "--test", "tests/test_a.py", "--record", "r.jsonl"], {}, 2,
        "a number no metric can hold"),
    # bounds a pull request controls
    row("gate-steps-100k", {"tests/test_a.py": STEPS_100K}, ["check"], {}, 1,
        "at most 10000 are allowed"),
    row("record-file-300mib", {"tests/test_a.py": GATED_TEST, "r.jsonl": SPARSE + str(300 << 20)},
        ["gate", "evaluate", "--test", "tests/test_a.py", "--record", "r.jsonl"], {}, 2,
        "more than the 256 MiB testfleet reads"),

    # ---- issue #27 --------------------------------------------------------------------
    # S2: the base commit's configuration is read at its real path, never through a link.
    row("config-symlink-to-lax-file", {"testfleet.toml": STRICT, "lax.toml": LAX,
                                       "tests/test_g.py": GPU_TEST},
        FORK_PLAN, {}, 0, '"config":"testfleet.toml"', setup=_fork_links_config,
        intact=_gpu_unauthorized),
    row("config-symlink-in-base", {"testfleet.toml": STRICT, "lax.toml": LAX,
                                   "tests/test_g.py": GPU_TEST},
        FORK_PLAN, {}, 0, "testfleet.toml is a symlink at the base commit",
        setup=_base_links_config, intact=_gpu_unauthorized),
    # S3-S5: text from a file, a bundle or history is printed through the one escaping rule.
    row("junit-name-workflow-commands",
        {"r.xml": '<testsuite><testcase classname="x" name="t&#10;::error::pwned&#13;'
                  '::add-mask::pwned" time="1"/></testsuite>'},
        ["durations", "import", "r.xml", "--stage", "a"], {}, 0, "x::t" + SHOWN),
    row("junit-name-workflow-commands-error",
        {"r.xml": '<testsuite name="s&#10;::error::pwned"><testcase classname="x" '
                  'name="t&#10;::error::pwned&#13;::add-mask::pwned" time="x"/></testsuite>'},
        ["durations", "import", "r.xml", "--stage", "a"], {}, 2, "x::t" + SHOWN),
    row("junit-file-name-workflow-commands", {"r\n::error::pwned.xml": "<nope/>"},
        ["durations", "import", "r\n::error::pwned.xml", "--stage", "a"], {}, 2,
        "r\\n::error::pwned.xml"),
    row("bundle-source-workflow-commands-show",
        {"b.bundle": bundle(source={**PUSH, "ref": "refs/heads/main" + SMUGGLED,
                                    "repository": "o/r" + SMUGGLED})},
        ["history", "show", "{root}/b.bundle"], {}, 0, "ref=refs/heads/main" + SHOWN),
    row("bundle-name-workflow-commands-show", {"b\n::error::pwned.bundle": bundle()},
        ["history", "show", "{root}/b\n::error::pwned.bundle"], {}, 0, "b\\n::error::pwned.bundle"),
    row("bundle-name-workflow-commands-merge",
        {"b\n::error::pwned.bundle": bundle(source={**PUSH, "event": "pull_request"})},
        ["history", "merge", "{root}/b\n::error::pwned.bundle"], {}, 2, "b\\n::error::pwned.bundle"),
    row("bundle-metric-workflow-commands-merge",
        {"b.bundle": bundle(gate_runs=[gate_run(1)],
                            gate_values=[gate_value(1, "m" + SMUGGLED, 1.0),
                                         gate_value(1, "m" + SMUGGLED, 2.0)])},
        ["history", "merge", "{root}/b.bundle"], {}, 2, "m" + SHOWN),
    row("report-metric-key-workflow-commands",
        {"tests/test_a.py": GATED_TEST,
         "b.bundle": bundle(gate_runs=[gate_run(1), gate_run(2, ts=NOW - 1000)],
                            gate_values=[gate_value(1, "m" + SMUGGLED, 1.0),
                                         gate_value(2, "m" + SMUGGLED, 2.0),
                                         gate_value(1, "m" + SMUGGLED, 3.0, step=5),
                                         gate_value(2, "m" + SMUGGLED, 3.0, step=5)])},
        ["report", "--format", "text"], {}, 0, "m" + SHOWN, setup=_bundle_path("b.bundle")),
    row("results-testcase-workflow-commands",
        {"b.bundle": bundle(executions=[execution(1, outcome="FAILED", reason="r" + SMUGGLED)],
                            testcases=[case_row(1, "test_[/]" + SMUGGLED)])},
        ["results", "--tests"], {}, 0, "test_[/]" + SHOWN, setup=_bundle_path("b.bundle")),
    row("flaky-testcase-workflow-commands",
        {"b.bundle": bundle(executions=[execution(n, outcome=o, ts=NOW - DAY + n, ci_run_id=str(n))
                                        for n, o in ((1, "FAILED"), (2, "PASSED"), (3, "FAILED"))],
                            testcases=[{**case_row(n, "test_[/]" + SMUGGLED, NOW - DAY + n),
                                        "outcome": o}
                                       for n, o in ((1, "FAILED"), (2, "PASSED"), (3, "FAILED"))])},
        ["flaky", "--all"], {}, 0, "test_[/]" + SHOWN, setup=_bundle_path("b.bundle")),
    row("gate-history-workflow-commands",
        {"tests/test_a.py": GATED_TEST,
         "b.bundle": bundle(gate_runs=[gate_run(1, run_id="r[/]" + SMUGGLED)],
                            gate_values=[gate_value(1, "m" + SMUGGLED, 1.0)])},
        ["gate", "history", "--test", "tests/test_a.py"], {}, 0, "m" + SHOWN,
        setup=_bundle_path("b.bundle")),
    # D1: disable / enable never lose an edit, keep the file's identity, restore every byte.
    Row("disable-12-at-once", {"testfleet.toml": TWELVE, "tests/test_a.py": TWELVE_TEST},
        [[["disable", "tests/test_a.py", "--stage", f"s{i}", "--reason", f"broken {i}"]
          for i in range(12)]], 0, "disabled tests/test_a.py", intact=_twelve_disabled),
    row("disable-while-appending", {}, ["disable", "tests/test_a.py", "--stage", "a",
                                        "--reason", "r"], {}, 0, "disabled tests/test_a.py",
        background=APPENDER, intact=_appends_kept),
    row("disable-two-files-disk-full", {"tests/test_b.py": GOOD_TEST + PAD},
        ["disable", "tests/test_a.py", "tests/test_b.py", "--stage", "a", "--reason", "r"], {}, 2,
        "nothing was changed", fsize_limit=128 << 10,
        intact=_unchanged("tests/test_a.py", "tests/test_b.py")),
    row("disable-keeps-owner-mode-links", {}, ["disable", "tests/test_a.py", "--stage", "a",
                                               "--reason", "r"], {}, 0, "disabled tests/test_a.py",
        setup=_chown_link, intact=_owner_mode_links),
    Row("disable-then-enable-every-byte",
        {"testfleet.toml": SHAPES_CONFIG, "tests/test_a.py": SHAPES},
        [*([["disable", "tests/test_a.py", "--stage", s, "--reason", "down", "--ref", URL]]
           for s in "abcd"), [["enable", "--ref", URL]]], 0,
        "4 registration(s) enabled in 1 file(s)", intact=_round_trip),
    row("enable-ref-url-exact",
        {"tests/test_a.py": GOOD_TEST.replace(")", f', disabled="x, see {URL}4")'),
         "tests/test_b.py": GOOD_TEST.replace(")", f', disabled="y, see {URL}")')},
        ["enable", "--ref", URL], {}, 0, "1 registration(s) enabled in 1 file(s)",
        intact=_unchanged("tests/test_a.py")),
    row("disable-until-iso-week", {}, ["disable", "tests/test_a.py", "--stage", "a", "--reason",
                                       "r", "--until", "2024-W01-1"], {}, 2, "YYYY-MM-DD",
        intact=_unchanged("tests/test_a.py")),
    # D2: concurrent merges of one bundle into PostgreSQL store it once.
    Row("pg-merge-8-at-once", {"b.bundle": WITH_TESTCASES},
        [[["history", "merge", "{root}/b.bundle", "--database", "{pg}"] for _ in range(8)]], 0,
        "merged 1 bundle(s)", pg=True, intact=_pg_counts, setup=_pg_init),
    # D3: rows dated after the merge are refused; prune keeps what was merged.
    row("bundle-future-rows-keep-2", {"real.bundle": REAL, "fake.bundle": FAKE_2096},
        ["history", "merge", "{root}/fake.bundle", "--keep", "2"], {}, 0, "dated in the future",
        setup=_bundle_path("real.bundle"), intact=_real_rows_kept),
    row("bundle-uid-conflict", {"b1.bundle": bundle(executions=[execution(1)]),
                                "b2.bundle": bundle(executions=[execution(1, duration=9.0)])},
        ["history", "merge", "{root}/b1.bundle", "{root}/b2.bundle"], {}, 0, "different content",
        intact=_one_copy),
    # H1: matching a catastrophic pattern is bounded; timeouts and signals still work.
    row("pattern-catastrophic-timeout", {"testfleet.toml": CATASTROPHIC.format(floor=3),
                                         "tests/test_a.py": TRIGGER, "pids/.keep": ""},
        ["run", "--stage", "a", "--no-history"], {}, 1, "timed out after 3s", pids=True),
    row("pattern-catastrophic-sigterm", {"testfleet.toml": CATASTROPHIC.format(floor=600),
                                         "tests/test_a.py": TRIGGER, "pids/.keep": ""},
        ["run", "--stage", "a", "--no-history"], {}, 143, "runner received SIGTERM",
        sigterm_after=4.0, pids=True),
    # A catastrophic check.reference_patterns entry against a disabled reason the same
    # pull request wrote: the report finishes and says the pattern was not used.
    row("reference-pattern-catastrophic",
        {"testfleet.toml": CONFIG + '[check]\nreference_patterns = ["(a|aa)+$"]\n',
         "tests/test_a.py": GOOD_TEST,
         "tests/test_b.py": GOOD_TEST.replace("suite=\"a\"", f"suite=\"a\", disabled=\"{'a' * 40}!\"")},
        ["report", "--format", "text"], {}, 0, "is not matched: one search took more than"),
    # H2: a FIFO where a file is named is refused, never waited on.
    row("history-merge-fifo", {"b.bundle": FIFO}, ["history", "merge", "{root}/b.bundle"], {}, 2,
        "is a FIFO, not a regular file"),
    row("history-show-fifo", {"b.bundle": FIFO}, ["history", "show", "{root}/b.bundle"], {}, 2,
        "is a FIFO, not a regular file"),
    row("junit-import-fifo", {"r.xml": FIFO}, ["durations", "import", "r.xml", "--stage", "a"], {},
        2, "is a FIFO, not a regular file"),
    row("payload-fifo", {"event.json": FIFO}, ["plan", "--github"],
        {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": "event.json"}, 2,
        "is a FIFO, not a regular file"),
    # T1-T3
    row("bundle-schema-superscript-one", {"b.bundle": bundle(schema="testfleet.bundle/\u00b9")},
        ["history", "show", "{root}/b.bundle"], {}, 2, "foreign schema"),
    row("bundle-attempt-2-63", {"b.bundle": bundle(executions=[execution(1, attempt=2**63)])},
        ["history", "merge", "{root}/b.bundle"], {}, 2, "invalid records"),
    row("bundle-step-2-63", {"b.bundle": bundle(gate_runs=[gate_run(1)],
                                                gate_values=[gate_value(1, "m", 1.0, step=2**63)])},
        ["history", "merge", "{root}/b.bundle"], {}, 2, "invalid records"),
    row("bundle-duration-10-400", {"b.bundle": bundle(executions=[execution(1, duration=10**400)])},
        ["history", "merge", "{root}/b.bundle"], {}, 2, "invalid records"),
    *[row(f"junit-{enc}", {"r.xml": junit(enc, name, codec=codec)},
          ["durations", "import", "r.xml", "--stage", "a"], {}, 0, "1 matched")
      for enc, name, codec in (("shift_jis", "テスト", None), ("euc-jp", "テスト", None),
                               ("gb2312", "测试", None), ("big5", "測試", None),
                               ("cp932", "テスト", None), ("UTF-7", "t\u00e9st", "utf-7"))],
    row("junit-utf-7-hidden-doctype",
        {"r.xml": b'<?xml version="1.0" encoding="UTF-7"?>+ADw-!DOCTYPE t +AFs-+ADw-!ENTITY a '
                  b"'x'+AD4-+AF0-+AD4-<testsuite/>"},
        ["durations", "import", "r.xml", "--stage", "a"], {}, 2, "DTD or entity"),
    row("junit-unknown-encoding", {"r.xml": junit("x-no-such-codec", "t", codec="ascii")},
        ["durations", "import", "r.xml", "--stage", "a"], {}, 2, "unknown encoding"),
    # Also: paths relative to -C DIR, and the composite action's digest check.
    row("history-export-relative-to-C", {}, ["history", "export", "-o", "out/b.bundle"], {}, 0,
        "exported 0 execution(s)",
        intact=lambda ctx, out: [] if (ctx.root / "out/b.bundle").is_file() else ["not in -C DIR"]),
    row("history-show-relative-to-C", {"b.bundle": bundle()}, ["history", "show", "b.bundle"], {},
        0, "records: 0 execution(s)"),
    row("history-merge-relative-to-C", {"b.bundle": REAL}, ["history", "merge", "b.bundle"], {},
        0, "+4 execution(s)"),
    # the composite action passes plan-digest to `testfleet run --plan-digest`, whose check
    # is exact and over the content (#39: no shell pre-check in the action any more)
    row("run-digest-prefix", {}, ["run", "--plan", "plan.json", "--job", "j"],
        {"TESTFLEET_PLAN_DIGEST": "sha256:"}, 2, "is not the plan of this run",
        setup=_real_plan()),
    row("run-digest-elsewhere", {}, ["run", "--plan", "plan.json", "--job", "j"],
        {"TESTFLEET_PLAN_DIGEST": "sha256:" + "a" * 64}, 2, "digest mismatch",
        setup=_real_plan(lambda text: re.sub(
            r'^\{"digest":"sha256:[0-9a-f]+"',
            '{"digest":"sha256:' + "b" * 64 + '","note":"sha256:' + "a" * 64 + '"', text))),
]


# -- third audit (#36) --------------------------------------------------------------------

# #36 item 1: a test's helpers: zombies reaped while the test runs, a bounded sweep, signals.
def _orphan_config(floor: int, grace: int) -> str:
    return CONFIG + (f'command = "python"\n[runner]\ntimeout_floor = {floor}\n'
                     f"timeout_factor = 0.01\ngrace_seconds = {grace}\n")


# The test's own check, at the end of its body: how many zombies its parent (the runner,
# their subreaper) holds. Nothing reaped them while the test ran before #36.
ZOMBIE_COUNT = (GOOD_TEST + "import os, subprocess, sys, time\n\n\n"
                "def zombies_of_runner():\n"
                "    n = 0\n"
                "    for name in os.listdir('/proc'):\n"
                "        try:\n"
                "            with open(f'/proc/{name}/stat', 'rb') as fh:\n"
                "                rest = fh.read().rsplit(b')', 1)[1].split()\n"
                "        except (OSError, IndexError):\n"
                "            continue\n"
                "        n += rest[0] == b'Z' and int(rest[1]) == os.getppid()\n"
                "    return n\n\n\n"
                "def verdict():\n"
                "    time.sleep(0.3)\n"
                "    z = zombies_of_runner()\n"
                "    print(f'zombies held by the runner: {z}', flush=True)\n"
                "    sys.exit(1 if z > 50 else 0)\n\n\n")
# 1,000 shells that background a short sleep and exit: 1,000 orphans, dead 50 ms later.
HELPERS_1000 = (ZOMBIE_COUNT + "if __name__ == '__main__':\n"
                "    open('pids/test', 'w').write(str(os.getpid()))\n"
                "    for _ in range(1000):\n"
                "        subprocess.run(['sh', '-c', '(sleep 0.05 &)'])\n"
                "    verdict()\n")
# 500 shells that background a long sleep (named by a marker, so the check finds any left).
HELPERS_LIVE_500 = (ZOMBIE_COUNT + "if __name__ == '__main__':\n"
                    "    marker = f'tf-orphan-{os.getpid()}'\n"
                    "    open('marker', 'w').write(marker)\n"
                    "    for _ in range(500):\n"
                    "        subprocess.run(['bash', '-c', '(exec -a \"$0\" sleep 30 &)', marker])\n"
                    "    verdict()\n")
# A helper that leaves the test's group, ignores SIGTERM and forks and exits every 3 ms
# (a new pid each time, each dead parent one more zombie of the runner); it stops by itself
# after ``sys.argv[1]`` s, so a runner that cannot catch it leaks it for that long, never
# for good.
PID_HOPPER = ("import os, signal, sys, time\n"
              "end = time.time() + float(sys.argv[1])\n"
              "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "os.setsid()\n"
              "while time.time() < end:\n"
              "    if os.fork():\n"
              "        os._exit(0)\n"
              "    with open(f'pids/test.{os.getpid()}', 'w') as fh:\n"
              "        fh.write(str(os.getpid()))\n"
              "    os.replace(f'pids/test.{os.getpid()}', 'pids/test')\n"
              "    time.sleep(0.003)\n")


def _hopping(lifetime: int) -> dict[str, str | bytes]:
    """A test that starts the pid hopper and passes 0.8 s later."""
    test = (ZOMBIE_COUNT + "if __name__ == '__main__':\n"
            f"    subprocess.Popen([sys.executable, 'hopper.py', '{lifetime}'])\n"
            "    time.sleep(0.5)\n"
            "    verdict()\n")
    return {"tests/test_a.py": test, "hopper.py": PID_HOPPER, "pids/.keep": ""}


def _hopper_stopped(ctx: Ctx, out: str) -> list[str]:
    """The hopper no longer hops (a live one rewrites pids/test every few ms)."""
    before = (ctx.root / "pids/test").read_bytes()
    time.sleep(0.3)
    return [] if (ctx.root / "pids/test").read_bytes() == before else ["the pid hopper still runs"]


def _hopper_stopped_by_signal(ctx: Ctx, out: str) -> list[str]:
    said = [] if "interrupted by signal 15" in out else ["the sweep's SIGTERM was not reported"]
    return said + _hopper_stopped(ctx, out)


def _no_marked_helper(ctx: Ctx, out: str) -> list[str]:
    marker = (ctx.root / "marker").read_bytes()
    left = []
    for name in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if name.isdigit() and _alive(int(name)) and (
                    Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")[0] == marker):
                left.append(name)
    return [f"helper(s) {', '.join(left)} outlived the run"] if left else []


CORPUS += [
    # Zombies reaped while the test runs; the test returns at once after its body.
    row("orphans-1000-short-helpers-reaped",
        {"testfleet.toml": _orphan_config(50, 5), "tests/test_a.py": HELPERS_1000, "pids/.keep": ""},
        ["run", "--stage", "a", "--no-history"], {}, 0, "zombies held by the runner: ", pids=True),
    # 500 live orphans at the end: one /proc scan per sweep round (it was one per orphan:
    # quadratic, 38 s for 300), all killed.
    row("orphans-500-live-helpers-swept",
        {"testfleet.toml": _orphan_config(50, 5), "tests/test_a.py": HELPERS_LIVE_500},
        ["run", "--stage", "a", "--no-history"], {}, 0,
        "500 leftover process(es) killed after the test ended", intact=_no_marked_helper),
    # The pid hopper: reaped while the test runs, caught and killed by the file's timeout
    # (3 s) although the grace period (30 s) is longer.
    row("orphans-pid-hopper-file-timeout",
        {"testfleet.toml": _orphan_config(3, 30), **_hopping(10)},
        ["run", "--stage", "a", "--no-history"], {}, 0,
        "1 leftover process(es) killed after the test ended (at the file's 3s timeout)",
        intact=_hopper_stopped, pids=True),
    # A SIGTERM during the sweep (a 600 s timeout and grace; it comes when the test, 0.8 s,
    # is long over, and the hopper still has 15 s to go): acted on at once.
    row("orphans-sigterm-during-sweep",
        {"testfleet.toml": _orphan_config(600, 600), **_hopping(20)},
        ["run", "--stage", "a", "--no-history"], {}, 143,
        "1 leftover process(es) killed after the test ended", sigterm_after=5.0,
        intact=_hopper_stopped_by_signal, pids=True),
]


# #36 item 2: the trusted workflow plans with --pr-head <the event's head.sha>; a checkout of
# refs/pull/<n>/merge that merges another head (a push after the label) is refused.
LABELLED = "1" * 40  # the head the maintainer labelled, as the event names it
PR_HEAD_PLAN = ["plan", "--github", "--trust-base", "HEAD^1", "--format", "json",
                "--plan-file", "plan-out.json", "--pr-head"]
TRUSTED_ENV = {"GITHUB_EVENT_NAME": "pull_request_target", "GITHUB_EVENT_PATH": "event.json",
               "GITHUB_ACTIONS": "true"}


def _fork_event(action: str) -> str:
    added = {"label": {"name": "ok-to-test"}} if action == "labeled" else {}
    return json.dumps({"action": action, **added, "pull_request": {
        "labels": [{"name": "ok-to-test"}, {"name": "run-ci-x"}],
        "head": {"sha": LABELLED, "repo": {"full_name": "mallory/r"}},
        "base": {"repo": {"full_name": "o/r"}}}})


def _merge_of_a_later_push(ctx: Ctx) -> None:
    """refs/pull/<n>/merge as GitHub recomputes it after the fork pushed again: a merge
    commit whose second parent is the fork's newest head, not the one the event named."""
    _git(ctx, "init", "-q")
    _git(ctx, "add", "-A")
    _git(ctx, "commit", "-qm", "base")
    _git(ctx, "checkout", "-qb", "fork")
    (ctx.root / "tests/test_g.py").write_text(GPU_TEST + "# pushed after the label\n")
    _git(ctx, "commit", "-qam", "fork: after the label")
    _git(ctx, "checkout", "-q", "main")
    _git(ctx, "merge", "-q", "--no-ff", "-m", "merge", "fork")


def _one_commit(ctx: Ctx) -> None:
    _git(ctx, "init", "-q")
    _git(ctx, "add", "-A")
    _git(ctx, "commit", "-qm", "the head itself, not a merge commit")


def _refused(ask_label: bool) -> Check:
    """No plan was written, the error names the head the checkout really merges, and only
    a labelled run asks for the label again (on the run's page too)."""
    def check(ctx: Ctx, out: str) -> list[str]:
        now = subprocess.run(["git", "-C", str(ctx.root), "rev-parse", "HEAD^2"],
                             capture_output=True, text=True, check=True).stdout.strip()
        problems = ["a plan was written"] if (ctx.root / "plan-out.json").exists() else []
        if f"now {now})" not in out:
            problems.append(f"the message does not name the merged head {now}")
        if ("a maintainer must label it again" in out) != ask_label:
            problems.append("asks for a label" if not ask_label else "does not ask for the label")
        if "::error title=testfleet plan::" not in out:
            problems.append("no error annotation")
        return problems
    return check


# #36 item 3: a pull_request workflow that picks its runner through a reusable workflow.
CALLED_GPU = """\
on:
  workflow_call:
    inputs:
      runs_on: {type: string, required: true}
jobs:
  run:
    runs-on: ${{ fromJSON(inputs.runs_on) }}
    steps:
      - run: make test
"""
SELF_CALL = """\
on: [pull_request, workflow_call]
jobs:
  again:
    uses: ./.github/workflows/loop.yml
  gpu:
    runs-on: [self-hosted, x]
    steps:
      - run: make test
"""


def _pr_calls_gpu(runs_on: list[str]) -> dict[str, str | bytes]:
    caller = ("on: [pull_request]\njobs:\n  gpu:\n    uses: ./.github/workflows/_gpu.yml\n"
              f"    with:\n      runs_on: '{json.dumps(runs_on)}'\n")
    return {".github/workflows/pr.yml": caller, ".github/workflows/_gpu.yml": CALLED_GPU}


def _no_fork_finding(ctx: Ctx, out: str) -> list[str]:
    return ["a hosted runner was reported"] if "fork-self-hosted" in out else []


def _said_once(ctx: Ctx, out: str) -> list[str]:
    n = out.count("job again calls .github/workflows/loop.yml")
    return [] if n == 1 else [f"the self-call was reported {n} times"]


CORPUS += [
    row("label-then-push-moved-ref",
        {"testfleet.toml": STRICT, "tests/test_g.py": GPU_TEST, "event.json": _fork_event("labeled")},
        [*PR_HEAD_PLAN, LABELLED], TRUSTED_ENV, 2,
        f"the pull request moved after it was labelled (labelled {LABELLED}, now ",
        setup=_merge_of_a_later_push, intact=_refused(ask_label=True)),
    row("push-then-moved-ref",
        {"testfleet.toml": STRICT, "tests/test_g.py": GPU_TEST,
         "event.json": _fork_event("synchronize")},
        [*PR_HEAD_PLAN, LABELLED], TRUSTED_ENV, 2, "the pull request moved after this event",
        setup=_merge_of_a_later_push, intact=_refused(ask_label=False)),
    row("pr-head-checkout-not-a-merge",
        {"testfleet.toml": STRICT, "tests/test_g.py": GPU_TEST, "event.json": _fork_event("labeled")},
        [*PR_HEAD_PLAN, LABELLED], TRUSTED_ENV, 2, "not a pull request's merge commit",
        setup=_one_commit, intact=lambda ctx, out: ["a plan was written"]
        if (ctx.root / "plan-out.json").exists() else []),
    row("pr-head-hostile-value",
        {"testfleet.toml": STRICT, "tests/test_g.py": GPU_TEST, "event.json": _fork_event("labeled")},
        [*PR_HEAD_PLAN, LABELLED + SMUGGLED], TRUSTED_ENV, 2, "not a full commit id"),
    row("reusable-workflow-self-hosted-input", _pr_calls_gpu(["h200", "4gpu"]), ["check"], {}, 0,
        "job gpu calls .github/workflows/_gpu.yml, whose job run runs on h200, 4gpu"),
    row("reusable-workflow-hosted-input", _pr_calls_gpu(["ubuntu-latest"]), ["check"], {}, 0,
        "testfleet check: ok", intact=_no_fork_finding),
    row("reusable-workflow-hostile-label", _pr_calls_gpu(["h200" + SMUGGLED]), ["check"], {}, 0,
        f"whose job run runs on h200{SHOWN}"),
    row("reusable-workflow-calls-itself", {".github/workflows/loop.yml": SELF_CALL}, ["check"], {},
        0, "job again calls .github/workflows/loop.yml, whose job gpu runs on self-hosted, x",
        intact=_said_once),
    row("reusable-workflow-not-yaml",
        {**_pr_calls_gpu(["h200"]), ".github/workflows/_gpu.yml": "on: [workflow_call\n"},
        ["check"], {}, 0, "(workflow-unreadable)"),
]


# #36 item 4-5: reconcile checks every status field against its plan job; edited plans with a recomputed digest.
TWO_STAGES = CONFIG + '[stages.b]\nbackend = "cpu"\n'
B_TEST = GOOD_TEST.replace('suite="a"', 'suite="b"')
# A file outside roots that leaves a mark when it runs at all.
EVIL = {"evil/test_evil.py": "from pathlib import Path\n"
                             "(Path(__file__).resolve().parents[1] / 'PWNED').write_text('ran')\n"}


def _status_doc(plan: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """The status `testfleet run` writes for a job of ``plan`` that passed every file."""
    lane = job["stage"] + (f".{job['variant']}" if job.get("variant") else "")
    return {"schema": "testfleet.job-status/1", "plan_digest": plan["digest"],
            "plan_file": "plan.json", "job_id": job["id"], "jobs": [job["id"]],
            "stage": job["stage"], "variant": job.get("variant", ""), "shard": job["shard"],
            "shards": job["shards"], "run_id": f"r-{job['id']}", "ci_run_id": "1",
            "ci_attempt": 1, "runner": "testfleet run", "empty": False, "complete": True,
            "exit_status": 0, "reason": "", "started_at": NOW - 60, "finished_at": NOW,
            "testfleet_version": "0.2.0",
            "files": [{"file": t["file"], "stage": lane, "outcome": "PASSED", "attempts": 1,
                       "quarantined": False} for t in job["tests"]]}


def _forged_status(edit: Callable[[dict[str, Any]], None],
                   text: Callable[[str], str] = lambda raw: raw) -> Callable[[Ctx], None]:
    """A plan, and a status per job as its run wrote it, except job a-1-of-1's: ``edit``
    changes its document, ``text`` its JSON text (what a forger with an editor does)."""
    def setup(ctx: Ctx) -> None:
        tf(ctx, "plan", "--format", "json", "-o", "plan.json")
        plan = json.loads((ctx.root / "plan.json").read_text(encoding="utf-8"))
        (ctx.root / "st").mkdir()
        for job in plan["jobs"]:
            doc = _status_doc(plan, job)
            raw = json.dumps(doc)
            if job["id"] == "a-1-of-1":
                edit(doc)
                raw = text(json.dumps(doc))
            (ctx.root / "st" / f"{job['id']}.json").write_text(raw, encoding="utf-8")
    return setup


def _set(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc.update(fields)


def _no_attempt(doc: dict[str, Any]) -> None:
    doc["files"][0]["attempts"] = 0


def _with_evil(doc: dict[str, Any], job_id: str) -> None:
    """Add the file outside roots to ``job_id`` and recompute the digest, as anyone who can
    write the plan can."""
    from testfleet.planning.model import content_digest

    job = next(j for j in doc["jobs"] if j["id"] == job_id)
    job["tests"].append({"file": "evil/test_evil.py", "estimate": 1.0, "source": "est_time"})
    doc["digest"] = content_digest(doc)


def _edited_plan(ctx: Ctx) -> None:
    tf(ctx, "plan", "--format", "json", "-o", "plan.json")
    path = ctx.root / "plan.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    _with_evil(doc, "a-1-of-1")
    path.write_text(json.dumps(doc), encoding="utf-8")


def _edited_frozen_plan(ctx: Ctx) -> None:
    """Shard 1 of 2 freezes the run's plan (a dry run is enough); then something on the
    machine (shard 1's tests) adds a file to shard 2's job in it."""
    tf(ctx, "run", "--stage", "a", "--shard", "1/2", "--dry-run")
    (path,) = (ctx.root / ".testfleet/plans").glob("*.json")
    doc = json.loads(path.read_text(encoding="utf-8"))
    _with_evil(doc, "a-2-of-2")
    path.write_text(json.dumps(doc), encoding="utf-8")


def _evil_not_run(ctx: Ctx, output: str) -> list[str]:
    return ["the file outside roots ran"] if (ctx.root / "PWNED").exists() else []


CORPUS += [
    row("reconcile-status-other-stage", {"testfleet.toml": TWO_STAGES, "tests/test_b.py": B_TEST},
        ["reconcile", "--plan", "plan.json", "st"], {}, 1,
        "stage 'b', but job a-1-of-1 is of 'a'", setup=_forged_status(_set(stage="b"))),
    row("reconcile-status-shard-2-of-2", {}, ["reconcile", "--plan", "plan.json", "st"], {}, 1,
        "shard 2/2, but job a-1-of-1 is shard 1 of 1",
        setup=_forged_status(_set(shard=2, shards=2))),
    row("reconcile-status-passed-0-attempts", {}, ["reconcile", "--plan", "plan.json", "st"], {},
        1, "tests/test_a.py: PASSED after 0 attempt(s)", setup=_forged_status(_no_attempt)),
    row("reconcile-status-shard-5000-digits", {}, ["reconcile", "--plan", "plan.json", "st"],
        {"PYTHONINTMAXSTRDIGITS": "0"}, 2, "an integer of 5000 digits",
        setup=_forged_status(_set(), lambda raw: raw.replace('"shard": 1', '"shard": '
                                                             + "9" * 5000))),
    row("run-plan-job-edited-digest-recomputed", EVIL,
        ["run", "--plan", "plan.json", "--job", "a-1-of-1", "--no-history"], {}, 2,
        "evil/test_evil.py not registered for stage a in this checkout",
        setup=_edited_plan, intact=_evil_not_run),
    row("run-stage-frozen-plan-edited", {**EVIL, "testfleet.toml": CONFIG + "shards = 2\n",
                                         "tests/test_b.py": GOOD_TEST},
        ["run", "--stage", "a", "--shard", "2/2", "--no-history"], {}, 2,
        "evil/test_evil.py not planned for a", setup=_edited_frozen_plan, intact=_evil_not_run),
]


# #36 item 6: merges under load, list/plan/check agree on files Python cannot read, patterns, enable/disable.

# 6a: another process holds the SQLite history's write lock for a while (longer than a
# merge's busy timeout); merges wait for it, saying so, or give up after --wait.
HOLDER = """\
import os, sqlite3, time
db = sqlite3.connect(".testfleet/history.db", isolation_level=None)
db.execute("BEGIN IMMEDIATE")
end = time.monotonic() + {seconds}
while time.monotonic() < end and not os.path.exists("stop"):
    time.sleep(0.05)
db.execute("COMMIT")
"""
ONE_EACH = {f"b{n}.bundle": bundle(executions=[execution(n)]) for n in range(1, 5)}


def _db_init(ctx: Ctx) -> None:
    tf(ctx, "db", "init")


def _stored_uids(*ns: int) -> Check:
    def check(ctx: Ctx, out: str) -> list[str]:
        stored = [r[0] for r in _sqlite(ctx, "SELECT uid FROM executions ORDER BY uid")]
        want = [uid(n) for n in ns]
        return [] if stored == want else [f"stored executions are {stored}, not {want}"]
    return check

# 6b: files Python cannot read: list, plan and check agree that their registrations are invalid.
COOKIE_TEST = "# -*- coding: no-such-codec -*-\n" + GOOD_TEST
NUL_TEST = GOOD_TEST + 'x = "\0"\n'
IMPLICIT = CONFIG + '[[implicit]]\npath = "tests/fast"\nbackend = "cpu"\nsuite = "a"\nest_time = 5\n'


def _invalid_fate(name: str) -> Check:
    """The plan (JSON on stdout) skips ``name`` as invalid and no job holds it."""
    def check(ctx: Ctx, out: str) -> list[str]:
        plan = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
        fates = {s["file"]: s["reason"] for s in plan["skipped"]}
        held = [j["id"] for j in plan["jobs"] if any(t["file"] == name for t in j["tests"])]
        problems = [f"{name} is in job(s) {held}"] if held else []
        if fates.get(name) != "invalid":
            problems.append(f"{name}'s fate is {fates.get(name)!r}, not invalid")
        return problems
    return check


def _not_listed(name: str) -> Check:
    def check(ctx: Ctx, out: str) -> list[str]:
        return [f"{name} is listed as a registration"] if f"\n{name}:" in "\n" + out.split(
            "registrations\n", 1)[0] else []
    return check

# 6c: check flags what the runner would cut off at run time (the H1 patterns above).
SAFE_NESTED = CONFIG + '[runner]\nretriable_patterns = ["(a+)+$", "(foo\\\\s+)+x"]\n'
PYPROJECT_PATTERN = ('[tool.testfleet]\nroots = ["tests"]\n[tool.testfleet.stages.a]\n'
                     'backend = "cpu"\n[tool.testfleet.runner]\n'
                     'retriable_patterns = ["NCCL (error|timeout)", "error: (x|xx)+$"]\n')

# 6d: enable gives back an explicit disabled=None that disable wrote a reason over.
NONE_TEST = GOOD_TEST.replace(")", ", disabled=None)")


def _git_base(ctx: Ctx) -> None:
    _git(ctx, "init", "-q")
    _git(ctx, "add", "-A")
    _git(ctx, "commit", "-qm", "base")


def _git_disabled_commit(ctx: Ctx) -> None:
    """The disable was committed: enable must look past it, at the commit before."""
    _git_base(ctx)
    path = ctx.root / "tests/test_a.py"
    path.write_text(NONE_TEST.replace("disabled=None", 'disabled="broken, see #7"'))
    _git(ctx, "commit", "-qam", "disable")


CORPUS += [
    Row("sqlite-merge-4-at-once-while-locked", ONE_EACH,
        [[["history", "merge", f"{{root}}/b{n}.bundle"] for n in range(1, 5)]], 0,
        "the history database is busy (another merge?); waiting for it", setup=_db_init,
        background=HOLDER.format(seconds=8), intact=_stored_uids(1, 2, 3, 4)),
    row("sqlite-merge-wait-bounded", ONE_EACH, ["history", "merge", "{root}/b1.bundle",
                                                "--wait", "1"], {}, 2,
        "is locked by another process (waited for the busy timeout): database is locked; "
        "gave up after waiting", setup=_db_init, background=HOLDER.format(seconds=20),
        intact=_stored_uids()),
    row("encoding-cookie-unknown-check", {"tests/test_c.py": COOKIE_TEST}, ["check"], {}, 1,
        "1:1  error  Python cannot run this file: its encoding cookie: unknown encoding: "
        "no-such-codec (encoding)"),
    row("encoding-cookie-unknown-list", {"tests/test_c.py": COOKIE_TEST}, ["list"], {}, 1,
        "tests/test_c.py:1:1: error: Python cannot run this file: its encoding cookie",
        intact=_not_listed("tests/test_c.py")),
    row("encoding-cookie-unknown-plan", {"tests/test_c.py": COOKIE_TEST},
        ["plan", "--format", "json"], {}, 1, "tests/test_c.py:1:1: error: Python cannot run",
        intact=_invalid_fate("tests/test_c.py")),
    row("nul-byte-check", {"tests/test_n.py": NUL_TEST}, ["check"], {}, 1,
        "3:6  error  Python cannot run this file: source code cannot contain null bytes"),
    row("nul-byte-list", {"tests/test_n.py": NUL_TEST}, ["list"], {}, 1,
        "tests/test_n.py:3:6: error: Python cannot run this file: source code cannot contain "
        "null bytes", intact=_not_listed("tests/test_n.py")),
    row("nul-byte-plan", {"tests/test_n.py": NUL_TEST}, ["plan", "--format", "json"], {}, 1,
        "tests/test_n.py:3:6: error: Python cannot run", intact=_invalid_fate("tests/test_n.py")),
    row("nul-byte-implicit-plan", {"testfleet.toml": IMPLICIT, "tests/fast/test_f.py": "x = 1\0\n"},
        ["plan", "--format", "json"], {}, 1, "tests/fast/test_f.py:1:6: error: Python cannot run",
        intact=_invalid_fate("tests/fast/test_f.py")),
    row("pattern-catastrophic-check", {"testfleet.toml": CATASTROPHIC.format(floor=3)}, ["check"],
        {}, 1, "pattern '^(a|a)*$' backtracks catastrophically (a search of 29 characters"),
    row("pattern-catastrophic-check-key", {"testfleet.toml": CATASTROPHIC.format(floor=3)},
        ["check"], {}, 1, "[runner.fatal_patterns.0] (pattern-catastrophic)"),
    row("pattern-catastrophic-pyproject", {"pyproject.toml": PYPROJECT_PATTERN}, ["check"], {}, 1,
        "'error: (x|xx)+$' backtracks catastrophically"),
    row("pattern-catastrophic-pyproject-key", {"pyproject.toml": PYPROJECT_PATTERN}, ["check"],
        {}, 1, "[tool.testfleet.runner.retriable_patterns.1] (pattern-catastrophic)"),
    row("pattern-nested-but-linear", {"testfleet.toml": SAFE_NESTED,
                                      "tests/test_a.py": GOOD_TEST + "def test_x():\n    pass\n"},
        ["check"], {}, 0, "0 errors"),
    Row("enable-restores-disabled-none", {"tests/test_a.py": NONE_TEST},
        [[["disable", "tests/test_a.py", "--stage", "a", "--reason", "broken", "--ref", "#7"]],
         [["enable", "--ref", "#7"]]], 0,
        'enabled tests/test_a.py:2 (a): disabled="broken, see #7" -> disabled=None',
        setup=_git_base, intact=_unchanged("tests/test_a.py")),
    row("enable-restores-disabled-none-committed", {"tests/test_a.py": NONE_TEST},
        ["enable", "--ref", "#7"], {}, 0,
        'enabled tests/test_a.py:2 (a): disabled="broken, see #7" -> disabled=None',
        setup=_git_disabled_commit, intact=_unchanged("tests/test_a.py")),
]


# -- running a row -----------------------------------------------------------------------

def _project(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    root = tmp_path / "p"
    (root / "tests").mkdir(parents=True)
    defaults: dict[str, str | bytes] = {"testfleet.toml": CONFIG, "tests/test_a.py": GOOD_TEST}
    if "pyproject.toml" in files:
        defaults.pop("testfleet.toml")
    for rel, text in {**defaults, **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        elif text.startswith(LINK):
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
    original = tmp_path / "original"
    for rel in files:
        path = root / rel
        if path.is_file() and not path.is_symlink():
            (original / rel).parent.mkdir(parents=True, exist_ok=True)
            (original / rel).write_bytes(path.read_bytes())
    if (root / "tests/test_a.py").is_file():
        (original / "tests").mkdir(parents=True, exist_ok=True)
        (original / "tests/test_a.py").write_bytes((root / "tests/test_a.py").read_bytes())
    return root


def _env(env: dict[str, str], ctx: Ctx) -> dict[str, str]:
    full = {k: v for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "TESTFLEET_", "BUILDKITE"))}
    # text output wraps at the terminal's width (COLUMNS): a message is matched as a
    # command prints it with no terminal, as in CI, whatever terminal runs the suite
    full["COLUMNS"] = "120"
    for key, value in env.items():
        full[key] = str(ctx.root / value) if value.endswith(".json") else value
    return full


@dataclass
class Ran:
    status: int | None  # None: it hung
    output: str


def run_row(row: Row, ctx: Ctx) -> list[Ran]:
    """Every command of every step, in order; a step's commands run at once."""
    if row.setup is not None:
        row.setup(ctx)
    background = None
    if row.background is not None:
        background = subprocess.Popen([sys.executable, "-c", row.background], cwd=ctx.root)
        time.sleep(0.3)
    limit = row.fsize_limit

    def limits() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    ran: list[Ran] = []
    try:
        for step in row.steps:
            procs = []
            for argv in step:
                argv = [a.replace("{pg}", ctx.pg).replace("{root}", str(ctx.root)) for a in argv]
                cmd = [sys.executable, "-m", "testfleet", "-C", str(ctx.root), *argv]
                env = _env(row.env, ctx)
                procs.append(subprocess.Popen(
                    cmd, cwd=ctx.caller, env=env,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                    preexec_fn=limits))
            if row.sigterm_after is not None:
                time.sleep(row.sigterm_after)
                for p in procs:
                    p.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + TIMEOUT
            for p in procs:
                try:
                    out, _ = p.communicate(timeout=max(deadline - time.monotonic(), 0.1))
                    ran.append(Ran(p.returncode, out.decode("utf-8", "replace")))
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    out, _ = p.communicate()
                    ran.append(Ran(None, out.decode("utf-8", "replace")))
    finally:
        if background is not None:
            time.sleep(0.3)
            (ctx.root / "stop").touch()
            background.wait(timeout=TIMEOUT)
    return ran


#: What every row is judged on; the README quotes each with the count of rows that failed it.
VERDICTS = ("hangs", "tracebacks", "wrong exit statuses", "missing messages",
            "injected workflow commands", "data losses", "leaked processes",
            "writes outside the project")


def _injected(output: str) -> list[str]:
    """Lines that would be workflow commands and are not testfleet's own (a test's own
    output inside a ``::stop-commands::`` fence is inert)."""
    bad = []
    token = None
    for line in re.split(r"\r\n|\r|\n", output):
        text = line.lstrip()
        if token is not None:
            if text == f"::{token}::":
                token = None
            continue
        if text.startswith("::stop-commands::"):
            token = text.removeprefix("::stop-commands::")
        elif text.startswith("::") and not OWN.match(text):
            bad.append(line)
    return bad


def judge(row: Row, ctx: Ctx, ran: list[Ran]) -> dict[str, list[str]]:
    """Per verdict, what went wrong (every list empty: the row passes)."""
    output = "\n".join(r.output for r in ran)
    found: dict[str, list[str]] = {v: [] for v in VERDICTS}
    found["hangs"] = [f"command {i} hung" for i, r in enumerate(ran) if r.status is None]
    found["tracebacks"] = [r.output for r in ran if "Traceback" in r.output]
    found["wrong exit statuses"] = [f"exit {r.status}, not {row.code}: {r.output}" for r in ran
                                    if r.status is not None and r.status != row.code]
    if row.fragment not in output:
        found["missing messages"] = [f"{row.fragment!r} not in: {output}"]
    found["injected workflow commands"] = _injected(output)
    if row.intact is not None and not found["hangs"]:
        found["data losses"] = row.intact(ctx, output)
    if row.pids:
        found["leaked processes"] = _no_test_left(ctx)
    found["writes outside the project"] = [p.name for p in ctx.caller.iterdir()]
    return found


def _cleanup(ctx: Ctx) -> None:
    pid_file = ctx.root / "pids/test"
    if pid_file.is_file():
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


@pytest.mark.parametrize("case", CORPUS, ids=[c.id for c in CORPUS])
def test_hostile_input(case: Row, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    pg = request.getfixturevalue("pg_url") if case.pg else ""
    root = _project(tmp_path, case.files)
    caller = tmp_path / "caller"
    caller.mkdir()
    ctx = Ctx(root, caller, pg)
    try:
        verdicts = judge(case, ctx, run_row(case, ctx))
    finally:
        _cleanup(ctx)
    assert {v: found for v, found in verdicts.items() if found} == {}


def test_row_ids_are_unique() -> None:
    assert len({c.id for c in CORPUS}) == len(CORPUS)


def figures() -> dict[str, int]:
    """What the README's reliability section states: the rows, how many check the data they
    touch, and per verdict the rows that failed it (0: ``test_hostile_input`` asserts it)."""
    return {"inputs in the hostile corpus": len(CORPUS),
            "of them checking the data they touch afterwards": sum(1 for c in CORPUS if c.intact),
            **dict.fromkeys(VERDICTS, 0)}


def test_readme_quotes_the_corpus() -> None:
    """The reliability figures in the README are this corpus's own: the figures above, each
    as a ``- name: value`` line of the Reliability section, and nothing else there."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Reliability", 1)[1].split("\n## ", 1)[0]
    quoted = dict(re.findall(r"^- ([a-z ]+): (\d+)$", section, flags=re.MULTILINE))
    assert {k: int(v) for k, v in quoted.items()} == figures()
