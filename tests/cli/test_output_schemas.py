"""Every machine output carries ``schema: testfleet.<kind>/<n>``, validates against the
schema ``testfleet schema KIND`` publishes, and that schema describes every key of it,
run for real on the example project (with history: a real run, with failures)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from testfleet.schemas.kinds import OUTPUT_KINDS
from testfleet.schemas.outputs import output_json_schema, output_types, validate_output

from .schema_coverage import coverage

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "fleet"

#: Two files of stage-b-cpu that fail alike (an incident, failing files, a failing stage
#: health, failure signatures), and a marker call the registry rejects (check errors,
#: ``durations``' invalid registrations, the plan's ``invalid`` fates).
BROKEN = '''from testfleet import register_cpu_ci

register_cpu_ci(est_time=1, suite="stage-b-cpu")

raise RuntimeError("the rollout buffer lost its shared memory segment")
'''
INVALID = 'from testfleet import register_cpu_ci\n\nregister_cpu_ci(est_time=1, suite="stage-nope")\n'

#: Maps whose keys are the user's, not ours (their values are typed), by kind and place in
#: the published schema. Every other map names its keys (``propertyNames``).
FREE_FORM_MAPS = {
    ("plan", "/$defs/JobDoc/properties/env"):
        "a job's environment variables: the stage's ``env`` table, named by the project",
}


def _tf(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    return subprocess.run([sys.executable, "-m", "testfleet", "-C", str(root), *args], env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("schemas") / "fleet"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".testfleet", "__pycache__"))
    for name in ("test_zz_broken_a.py", "test_zz_broken_b.py"):
        (root / "tests" / "unit" / name).write_text(BROKEN, encoding="utf-8")
    (root / "tests" / "unit" / "test_zz_invalid.py").write_text(INVALID, encoding="utf-8")
    run = _tf(root, "run", "--stage", "stage-b-cpu", "--cadence", "nightly", "--display", "plain",
              "--continue-on-error")
    # the broken files' own tracebacks are in the output; none of testfleet's may be
    frames = [line for line in (run.stdout + run.stderr).splitlines()
              if line.strip().startswith('File "')]
    assert run.returncode == 1 and not [f for f in frames if "testfleet" in f], run.stderr
    gated = next((root / ".testfleet" / "runs").rglob("tests__unit__test_train_curve_loss/*/*.jsonl")).parent
    # the whole nightly plan: the report draws its shards, and reconciling the run against
    # it finds the jobs that never reported and the statuses of another plan
    planned = _tf(root, "plan", "--cadence", "nightly", "--format", "json", "--output",
                  str(root / "nightly.json"))
    assert planned.returncode == 1 and "1 registration error" in planned.stderr  # the invalid one
    # shadow mode: a record of an old CI run that differs from the plan in every way it can
    # (a file each side only, other runner labels, another partition count), with a history
    (root / "shadow.txt").write_text(
        "== stage=stage-a-cpu shard=0/3 runs_on=ubuntu-22.04 ==\ntests/fast/test_advantage.py\n"
        "tests/fast/test_gone.py\n== stage=stage-b-cpu ==\ntests/unit/test_offload_plan.py\n",
        encoding="utf-8")
    commands = {
        "check": ["check", "--format", "json"],
        "list": ["list", "--format", "json"],
        "plan": ["plan", "--format", "json"],
        "report": ["report", "--format", "json", "--plan", str(root / "nightly.json")],
        "durations": ["durations", "show", "--format", "json"],
        "durations-suggest": ["durations", "suggest", "--format", "json"],
        "gate-history": ["gate", "history", "--test", "tests/unit/test_train_curve_loss.py",
                         "--format", "json"],
        "gate-evaluate": ["gate", "evaluate", "--test", "tests/unit/test_train_curve_loss.py",
                          "--record", str(gated), "--format", "json"],
        "db-status": ["db", "status", "--format", "json"],
        # the whole history as a bundle, then shown and merged into a second database
        "history-show": ["history", "show", str(root / "all.tfb"), "--format", "json"],
        "history-merge": ["history", "merge", str(root / "all.tfb"), "--database",
                          str(root / "merged.db"), "--format", "json"],
        "results": ["results", "--tests", "--format", "json"],
        "flaky": ["flaky", "--all", "--format", "json"],
        "reconcile": ["reconcile", "--plan", str(root / "nightly.json"),
                      str(root / ".testfleet" / "runs"), "--format", "json"],
        "incidents": ["incident", "list", "--format", "json"],
        "shadow": ["shadow", "compare", "--plan", str(root / "nightly.json"), "--observed",
                   str(root / "shadow.txt"), "--history", str(root / "shadow-history.json"),
                   "--record", "--format", "json"],
    }
    exported = _tf(root, "history", "export", "--output", str(root / "all.tfb"))
    assert exported.returncode == 0, exported.stderr
    docs: dict[str, object] = {}
    for kind, args in commands.items():
        proc = _tf(root, *args)
        assert "Traceback" not in proc.stdout + proc.stderr, (kind, proc.stderr)
        docs[kind] = json.loads(proc.stdout)
    docs["queue-status"] = _queue_status(tmp_path_factory.mktemp("queue"))
    # the nightly plan's jobs that never reported: a rescue wave (#40)
    proc = _tf(root, "reconcile", "--plan", str(root / "nightly.json"),
               str(root / ".testfleet" / "runs"), "--rescue-out", str(root / "rescue.json"))
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    docs["rescue"] = json.loads((root / "rescue.json").read_text(encoding="utf-8"))
    assert docs["rescue"]["jobs"]  # type: ignore[index]
    docs["breakers"] = _breakers(tmp_path_factory.mktemp("breakers"))
    status = next((root / ".testfleet" / "runs").rglob("job-status.json"))
    docs["job-status"] = json.loads(status.read_text(encoding="utf-8"))
    evaluated = docs["gate-evaluate"]
    assert isinstance(evaluated, dict) and evaluated["status"] in ("PASS", "INACTIVE", "FAIL")
    return docs


QUEUE_CONFIG = """\
roots = ["tests"]

[stages.q]
backend = "cpu"
command = "python"
shards = 2
execution = "queue"
"""


def _breakers(tmp: Path) -> object:
    """``breaker list``: a lane whose breaker was forced open, closed and open again (one
    closed episode, one open), and a lane that never opened."""
    (tmp / "tests").mkdir()
    (tmp / "testfleet.toml").write_text(
        'roots = ["tests"]\n[stages.gpu]\nbackend = "rocm"\nbreaker = true\n'
        '[stages.gpu2]\nbackend = "rocm"\nbreaker = { open_after = 3 }\n', encoding="utf-8")
    for verb, reason in (("open", "drained"), ("close", "fixed"), ("open", "again")):
        proc = _tf(tmp, "breaker", verb, "gpu", "--reason", reason, "--by", "alice")
        assert proc.returncode == 0, proc.stderr
    proc = _tf(tmp, "breaker", "list", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _queue_status(tmp: Path) -> object:
    """``queue status`` needs PostgreSQL (queue mode refuses SQLite): a two-file queue lane
    run by one runner in a schema of its own on the test server, then its status. Without
    the server this one kind is skipped (failed under CI), as every PostgreSQL test is."""
    import uuid
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    url, url_rw = os.environ.get("TESTFLEET_TEST_PG_URL"), os.environ.get("TESTFLEET_TEST_PG_URL_RW")
    if not (url and url_rw):
        return None
    import psycopg

    schema = f"tf_{uuid.uuid4().hex[:16]}"

    def scoped(u: str) -> str:
        parts = urlsplit(u)
        return urlunsplit(parts._replace(query=urlencode(
            [*parse_qsl(parts.query), ("options", f"-csearch_path={schema}")])))

    (tmp / "tests").mkdir()
    (tmp / "testfleet.toml").write_text(QUEUE_CONFIG)
    for name in ("test_a.py", "test_b.py"):
        (tmp / "tests" / name).write_text('from testfleet import register_cpu_ci\n'
                                          'register_cpu_ci(est_time=2, suite="q")\n')
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            for args in (["db", "init", "--database", scoped(url)],
                         ["plan", "--format", "json", "-o", str(tmp / "plan.json")],
                         ["run", "--plan", str(tmp / "plan.json"), "--stage", "q", "--queue",
                          "--display", "plain", "--database", scoped(url)]):
                proc = _tf(tmp, *args)
                assert proc.returncode == 0, (args, proc.stderr)
            proc = _tf(tmp, "queue", "status", "--plan", str(tmp / "plan.json"), "--format",
                       "json", "--database", scoped(url))
            assert proc.returncode == 0, proc.stderr
            return json.loads(proc.stdout)
        finally:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _doc(outputs: dict[str, object], kind: str) -> Any:
    doc = outputs[kind]
    if doc is None:
        message = "the queue-status output needs TESTFLEET_TEST_PG_URL(_RW): PostgreSQL"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return doc


@pytest.fixture(scope="module")
def published() -> Iterator[dict[str, dict[str, Any]]]:
    """``testfleet schema KIND`` as a tool sees it: the command's stdout."""
    out = {}
    for kind in OUTPUT_KINDS:
        proc = subprocess.run([sys.executable, "-m", "testfleet", "schema", kind],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        out[kind] = json.loads(proc.stdout)
    yield out


def test_every_output_kind_is_covered() -> None:
    assert set(OUTPUT_KINDS) == set(output_types())


def test_the_example_exercises_the_lists_that_matter(outputs: dict[str, Any]) -> None:
    """The coverage below is measured on what the documents hold: these lists must not be
    empty, or whole objects (an incident, a failing file, a plan's shards) go unwalked."""
    o = outputs
    assert o["incidents"]["incidents"] and o["results"]["incidents"]
    assert o["report"]["results"]["failing"] and o["report"]["failing_stages"]
    assert o["report"]["plan"]["stages"] and o["report"]["ledger"] and o["report"]["holes"]
    assert o["report"]["history"]["gates"] and o["report"]["history"]["trends"]
    assert o["durations"]["invalid"] and o["check"]["findings"]
    assert o["reconcile"]["missing_jobs"] and o["reconcile"]["other_plan"]
    assert any(s["reason"] == "invalid" for s in o["plan"]["skipped"])
    assert o["gate-evaluate"]["specs"] and o["gate-history"]["values"]
    lanes = o["shadow"]["lanes"]
    assert any(lane["only_observed"] for lane in lanes) and any(lane["only_planned"] for lane in lanes)
    assert o["shadow"]["verdict"] and o["shadow"]["notes"]


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
def test_real_output_validates(kind: str, outputs: dict[str, object],
                               published: dict[str, dict[str, Any]]) -> None:
    doc = _doc(outputs, kind)
    assert isinstance(doc, dict) and doc["schema"].startswith(f"testfleet.{kind}/")
    validate_output(kind, doc)  # the writer's own type, strictly
    jsonschema.validate(doc, published[kind])  # the published schema


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
def test_the_schema_describes_every_field(kind: str, outputs: dict[str, object],
                                          published: dict[str, dict[str, Any]]) -> None:
    """Every key path of the real document is reached through declared properties (or a
    typed map) and the schema says what its value is: nothing is merely allowed."""
    cov = coverage(_doc(outputs, kind), published[kind])
    print(f"\ncoverage {kind}: {len(cov.described)}/{len(cov.present)} key paths, "
          f"{cov.keys_described}/{cov.keys} keys")
    assert cov.present and not cov.missing, {p: cov.undescribed[p] for p in cov.missing}


def _objects(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every sub-schema of a schema, with where it is."""
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _objects(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _objects(value, f"{path}/{i}")


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
def test_the_schema_is_closed(kind: str, published: dict[str, dict[str, Any]]) -> None:
    """Strict where the output is ours, whatever a run happens to hold: every object
    declares its keys and forbids others; a map names its keys (an enum) unless its keys
    are the user's; no value is left untyped; ``schema`` is a constant."""
    schema = published[kind]
    assert schema["properties"]["schema"]["const"].startswith(f"testfleet.{kind}/")
    free = {where for (k, where) in FREE_FORM_MAPS if k == kind}
    maps = []
    for where, sub in _objects(schema):
        if sub.get("type") != "object" or where.endswith("/propertyNames"):
            continue
        extra = sub.get("additionalProperties")
        if "properties" in sub:
            assert extra is False, f"{kind}{where}: an object of ours that is open"
            for name, prop in sub["properties"].items():
                assert prop, f"{kind}{where}/properties/{name}: untyped"
        else:
            assert isinstance(extra, dict) and extra, f"{kind}{where}: an object without keys"
            if "propertyNames" not in sub:
                maps.append(where)
    assert set(maps) == free


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
def test_schema_rejects_a_foreign_or_newer_document(kind: str, outputs: dict[str, object],
                                                    published: dict[str, dict[str, Any]]) -> None:
    doc = dict(_doc(outputs, kind))
    for bad in ({**doc, "schema": f"testfleet.{kind}/999"},
                {k: v for k, v in doc.items() if k != "schema"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, published[kind])


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
def test_outputs_reject_unknown_fields(kind: str, outputs: dict[str, object],
                                       published: dict[str, dict[str, Any]]) -> None:
    doc = {**_doc(outputs, kind), "surprise": 1}
    with pytest.raises(Exception, match="surprise"):
        validate_output(kind, doc)
    with pytest.raises(jsonschema.ValidationError, match="surprise"):
        jsonschema.validate(doc, published[kind])


def test_published_schema_is_the_documents_type(published: dict[str, dict[str, Any]]) -> None:
    """`testfleet schema KIND` prints what the writer's type generates, nothing kept by hand."""
    for kind in OUTPUT_KINDS:
        assert published[kind] == output_json_schema(kind)
