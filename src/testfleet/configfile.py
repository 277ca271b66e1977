"""Where the configuration is and its TOML, without pydantic.

Both the validated load (:func:`testfleet.config.load_project`) and the fast start-up
path (:mod:`testfleet.registry.settings`, which skips pydantic when its snapshot
matches) must find the same file, so the search lives here, once, importing nothing
heavier than ``tomllib``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

CONFIG_NAMES = ("testfleet.toml", "pyproject.toml")


def parse_toml(text: str) -> dict[str, Any] | None:
    """The document, or ``None`` when it is not valid TOML."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):  # nested ~500 deep: not usable TOML
        return None
    return data


def find_config(start: Path) -> Path | None:
    """Walk up from ``start``; a ``pyproject.toml`` counts only if it has ``[tool.testfleet]``
    (an unreadable or invalid one is passed over, as if it had none)."""
    here = start.resolve()
    for directory in (here, *here.parents):
        candidate = directory / "testfleet.toml"
        if candidate.is_file():
            return candidate
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            data = parse_toml(text)
            if data is None and "[tool.testfleet" in text:
                return candidate  # ours, but broken: loading it says what is wrong
            if data and isinstance(data.get("tool"), dict) and "testfleet" in data["tool"]:
                return candidate
    return None
