"""Every machine output carries ``schema: testfleet.<kind>/<n>`` and validates against
the schema ``testfleet schema KIND`` publishes, run for real on the example project."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from testfleet.schemas.kinds import OUTPUT_KINDS
from testfleet.schemas.outputs import OUTPUTS, validate_output

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "fleet"


def _tf(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    return subprocess.run([sys.executable, "-m", "testfleet", "-C", str(root), *args], env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("schemas") / "fleet"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".testfleet", "__pycache__"))
    run = _tf(root, "run", "--stage", "stage-b-cpu", "--cadence", "nightly", "--display", "plain",
              "--continue-on-error")
    assert "Traceback" not in run.stdout + run.stderr
    gated = next((root / ".testfleet" / "runs").rglob("tests__unit__test_train_curve_loss/*/*.jsonl")).parent
    commands = {
        "check": ["check", "--format", "json"],
        "list": ["list", "--format", "json"],
        "plan": ["plan", "--format", "json"],
        "report": ["report", "--format", "json"],
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
        # the run's frozen plan against its job status file (#26)
        "reconcile": ["reconcile", "--plan", str(next((root / ".testfleet" / "plans").glob("*.json"))),
                      str(root / ".testfleet" / "runs"), "--format", "json"],
    }
    exported = _tf(root, "history", "export", "--output", str(root / "all.tfb"))
    assert exported.returncode == 0, exported.stderr
    docs: dict[str, object] = {}
    for kind, args in commands.items():
        proc = _tf(root, *args)
        assert "Traceback" not in proc.stdout + proc.stderr, (kind, proc.stderr)
        docs[kind] = json.loads(proc.stdout)
    status = next((root / ".testfleet" / "runs").rglob("job-status.json"))
    docs["job-status"] = json.loads(status.read_text(encoding="utf-8"))
    evaluated = docs["gate-evaluate"]
    assert isinstance(evaluated, dict) and evaluated["status"] in ("PASS", "INACTIVE", "FAIL")
    return docs


def test_every_output_kind_is_covered() -> None:
    assert set(OUTPUT_KINDS) == set(OUTPUTS)


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
def test_real_output_validates(kind: str, outputs: dict[str, object]) -> None:
    doc = outputs[kind]
    assert isinstance(doc, dict) and doc["schema"].startswith(f"testfleet.{kind}/")
    validate_output(kind, doc)  # the model
    proc = subprocess.run([sys.executable, "-m", "testfleet", "schema", kind], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    jsonschema.validate(doc, json.loads(proc.stdout))  # the published schema


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
def test_schema_rejects_a_foreign_or_newer_document(kind: str, outputs: dict[str, object]) -> None:
    doc = dict(outputs[kind])  # type: ignore[call-overload]
    schema = json.loads(subprocess.run([sys.executable, "-m", "testfleet", "schema", kind],
                                       capture_output=True, text=True, timeout=60).stdout)
    for bad in ({**doc, "schema": f"testfleet.{kind}/999"}, {k: v for k, v in doc.items()
                                                             if k != "schema"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_closed_outputs_reject_unknown_fields(outputs: dict[str, object]) -> None:
    for kind in ("check", "list", "durations", "gate-history", "db-status"):
        doc = {**outputs[kind], "surprise": 1}  # type: ignore[dict-item]
        with pytest.raises(Exception, match="surprise"):
            validate_output(kind, doc)
