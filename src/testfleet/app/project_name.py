"""The name a report is titled with: the project's own, not the folder it sits in.

CI checks a repository out into a folder named after it, but a local copy, a demo or a
test often lives in a temporary folder (``/tmp/tmp.Xy7Qk2``), and a page titled with
that name says nothing. So the name comes from what the project calls itself:

1. ``[project] name`` (PEP 621) of the ``pyproject.toml`` that holds the configuration,
   or of the one beside ``testfleet.toml``;
2. ``[tool.poetry] name`` of that file;
3. only then the project root's folder name.

A ``pyproject.toml`` that cannot be read or parsed is skipped (the configuration loader
reports a broken configuration file; this is only a title). The name is one printable
line (:func:`testfleet.textsafe.printable`), at most :data:`MAX_CHARS` characters.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from testfleet.config import Project
from testfleet.textsafe import printable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MAX_CHARS = 100
MAX_BYTES = 4 << 20


def project_name(project: Project) -> str:
    config = project.config_path
    source = config if config.name == "pyproject.toml" else project.root / "pyproject.toml"
    name = declared_name(_read(source, project.raw_config_text if source == config else None))
    if name is None:
        name = project.root.name or str(project.root)
    name = printable(" ".join(name.split()) or name)
    return name if len(name) <= MAX_CHARS else name[:MAX_CHARS - 1] + "…"


def declared_name(data: dict[str, Any]) -> str | None:
    """``[project] name``, else ``[tool.poetry] name``: a non-blank string, or None."""
    tool = data.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    for table in (data.get("project"), poetry):
        if isinstance(table, dict):
            name = table.get("name")
            if isinstance(name, str) and name.strip():
                return name.strip()
    return None


def _read(path: Path, text: str | None) -> dict[str, Any]:
    if text is None:
        try:
            if not path.is_file() or path.stat().st_size > MAX_BYTES:
                return {}
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return {}
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return {}
    return data
