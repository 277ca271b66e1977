"""The documentation site builds with strict link checking, its generated pages cover
every command and configuration model, and the published config schema is current."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCHEMA_FILE = REPO / "schemas" / "testfleet-config.schema.json"
REGENERATE = "python -m testfleet schema config > schemas/testfleet-config.schema.json"


def test_published_config_schema_is_current() -> None:
    from testfleet.schemas.config import config_json_text

    assert SCHEMA_FILE.read_text(encoding="utf-8") == config_json_text(), (
        f"schemas/testfleet-config.schema.json is stale; regenerate it: {REGENERATE}")


def test_config_schema_validates_the_example_and_rejects_a_bad_key() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from testfleet.configfile import parse_toml

    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    doc = parse_toml((REPO / "examples" / "fleet" / "pyproject.toml").read_text(encoding="utf-8"))
    assert doc is not None
    data = doc["tool"]["testfleet"]
    jsonschema.validate(data, schema)
    bad = {**data, "stages": {"x": {"backend": "cpu", "shards": "four"}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_schema_command_prints_the_file(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "testfleet", "schema", "config"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == SCHEMA_FILE.read_text(encoding="utf-8")
    bad = subprocess.run([sys.executable, "-m", "testfleet", "schema", "nosuch"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_readme_links_point_at_files() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
    assert links
    # read on the forge, not only in the built site: a page generated at build time is no target
    missing = [link for link in links if not (REPO / link).exists()]
    assert not missing


def test_mkdocs_builds_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "DISABLE_MKDOCS_2_WARNING": "true", "NO_COLOR": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cli_page = (site / "cli" / "index.html").read_text(encoding="utf-8")
    from testfleet.cli.main import COMMANDS

    for name in COMMANDS:
        assert f"testfleet {name}" in cli_page, f"command {name} missing from the CLI reference"
    # click 8.3's "no default" sentinel printed as a default (mkdocs-click's table style did)
    assert "Sentinel" not in cli_page and "UNSET" not in cli_page
    ref = (site / "config-reference" / "index.html").read_text(encoding="utf-8")
    for model in ("StageConfig", "PolicyConfig", "ImplicitDir"):
        assert model in ref
