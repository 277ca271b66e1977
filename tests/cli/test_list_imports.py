"""``testfleet list --format json`` stays lean: no table, database or report libraries at start-up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet"
HEAVY = ("rich", "sqlalchemy", "psycopg", "junitparser", "psutil", "testfleet.store", "testfleet.runner")


def imported_modules(*args: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "testfleet.cli.main", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def test_list_json_does_not_import_heavy_modules() -> None:
    names = imported_modules("-C", str(EXAMPLE), "list", "--format", "json")
    assert "testfleet.registry.collector" in names
    assert not {n for n in names if n.split(".")[0] in HEAVY or n.startswith(HEAVY)}


def test_warm_list_skips_pydantic_and_pathspec(tmp_path: Path) -> None:
    import shutil

    project = tmp_path / "fleet"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".testfleet", "__pycache__"))
    first = imported_modules("-C", str(project), "list", "--format", "json")
    assert "pydantic" in first  # the first run validates the config and writes the snapshot
    warm = imported_modules("-C", str(project), "list", "--format", "json")
    assert "testfleet.registry.collector" in warm
    assert not {n for n in warm if n.split(".")[0] in ("pydantic", "pathspec", "rich", "sqlalchemy")}
    assert "testfleet.registry.scan" not in warm  # nothing changed, so nothing was parsed


def test_plan_start_up_does_not_import_asyncio(tmp_path: Path) -> None:
    """pydantic's import applies typing_extensions.deprecated, which imported asyncio (~60 ms
    of every command's start-up) before typing_extensions 4.16, the pinned lower bound."""
    import shutil

    project = tmp_path / "fleet"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".testfleet", "__pycache__"))
    names = imported_modules("-C", str(project), "plan", "--event", "pull_request")
    assert "pydantic" in names and "testfleet.planning.planner" in names
    assert not {n for n in names if n.split(".")[0] == "asyncio"}
