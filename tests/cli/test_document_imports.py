"""Writing a document costs nothing at start-up: writers name their document types for
the type checker only, so the commands that write JSON load neither the types' modules
(``testfleet.documents.*`` but the literal vocabulary) nor the schema builder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .test_list_imports import EXAMPLE, imported_modules

#: the one module of the package writers import at run time: literal types, no pydantic
RUNTIME = {"testfleet.documents", "testfleet.documents.vocabulary"}


@pytest.mark.parametrize("args", [("--help",), ("list", "--format", "json"),
                                  ("plan", "--event", "pull_request", "--format", "json"),
                                  ("report", "--format", "json")])
def test_writing_a_document_loads_no_schema_machinery(args: tuple[str, ...],
                                                      tmp_path: Path) -> None:
    project = tmp_path / "fleet"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".testfleet", "__pycache__"))
    names = imported_modules("-C", str(project), *args)
    loaded = {n for n in names if n.startswith(("testfleet.documents", "testfleet.schemas"))}
    assert loaded <= RUNTIME, sorted(loaded - RUNTIME)
    if args == ("--help",):
        assert "pydantic" not in names
