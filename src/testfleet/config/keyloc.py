"""Where a stage lives in the configuration text, so findings and the dashboard can
point at the line to edit (``pyproject.toml:63``) instead of just naming the key."""

from __future__ import annotations

import re


def config_line(text: str, stage: str, key: str | None = None) -> int:
    """The line of ``[...stages.<stage>]`` (or of ``key`` inside it) in the config text; 0 if not found."""
    if not text:
        return 0
    name = re.escape(stage)
    header = re.compile(
        r"^\s*\[\s*(?:tool\s*\.\s*testfleet\s*\.\s*)?stages\s*\.\s*(?:" + name + r'|"' + name + r'"|\'' + name + r"')\s*\]")
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if header.match(line):
            if key is None:
                return i + 1
            key_re = re.compile(r"^\s*" + re.escape(key) + r"\s*=")
            for j in range(i + 1, len(lines)):
                if lines[j].lstrip().startswith("["):
                    break
                if key_re.match(lines[j]):
                    return j + 1
            return i + 1
    return 0
