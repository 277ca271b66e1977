"""The derived configuration written as TOML that reads like the documented examples.
"""

from __future__ import annotations

import json
import re
from typing import Any

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: str) -> str:

    return k if _BARE.match(k) else json.dumps(k, ensure_ascii=False)


def _value(v: Any) -> str:

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v) if isinstance(v, float) and not v.is_integer() else str(int(v))
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _assign(k: str, v: Any) -> str:
    """``key = value``; a file list (``exclude``) or a long list goes one item per line,
    so a reviewer reads it and a diff adding one file touches one line."""
    line = f"{_key(k)} = {_value(v)}"
    if isinstance(v, (list, tuple)) and v and (k == "exclude" or len(line) > 100):
        return f"{_key(k)} = [\n" + "".join(f"    {_value(x)},\n" for x in v) + "]"
    return line


def render_toml(data: dict[str, Any], prefix: str = "", header_comment: str = "") -> str:
    """Write the configuration as TOML under ``prefix`` (``tool.testfleet`` or empty).

    Scalars and lists go in the first table; ``implicit`` is an array of tables;
    ``labels``, ``backends.<name>``, ``stages.<name>`` and ``policy`` get tables
    of their own so the file reads like the documented examples.
    """
    def header(*parts: str, array: bool = False) -> str:
        name = ".".join([*([prefix] if prefix else []), *(_key(p) for p in parts)])
        return f"[[{name}]]" if array else f"[{name}]"

    lines: list[str] = []
    # Under a prefix the comment goes inside the section's first table, so that
    # replacing the section later (init --rederive-config) replaces the comment too.
    if prefix:
        lines.append(header())
    if header_comment:
        lines += [f"# {line}" if line else "#" for line in header_comment.split("\n")]
    simple = {k: v for k, v in data.items() if not isinstance(v, dict) and k != "implicit"}
    lines += [_assign(k, v) for k, v in simple.items()]
    for entry in data.get("implicit", []):
        lines += ["", header("implicit", array=True)]
        lines += [_assign(k, v) for k, v in entry.items()]
    if "labels" in data:
        lines += ["", header("labels")]
        lines += [_assign(k, v) for k, v in data["labels"].items()]
    for name, body in data.get("markers", {}).items():
        lines += ["", header("markers", name)]
        lines += [_assign(k, v) for k, v in body.items()]
    if "check" in data:
        lines += ["", header("check")]
        lines += [_assign(k, v) for k, v in data["check"].items()]
    for section in ("backends", "stages"):
        for name, body in data.get(section, {}).items():
            lines += ["", header(section, name)]
            lines += [_assign(k, v) for k, v in body.items() if k != "variants"]
            for variant, vbody in body.get("variants", {}).items() if section == "stages" else []:
                lines += ["", header(section, name, "variants", variant)]
                lines += [_assign(k, v) for k, v in vbody.items()]
    if "policy" in data:
        lines += ["", header("policy")]
        lines += [_assign(k, v) for k, v in data["policy"].items() if k != "cadences"]
        for name, body in data["policy"].get("cadences", {}).items():
            lines += ["", header("policy", "cadences", name)]
            lines += [_assign(k, v) for k, v in body.items()]
    gate = data.get("gate", {})
    if any(not isinstance(v, dict) for v in gate.values()):
        lines += ["", header("gate")]
        lines += [_assign(k, v) for k, v in gate.items() if not isinstance(v, dict)]
    for metric, body in gate.get("defaults", {}).items():
        lines += ["", header("gate", "defaults", metric)]
        lines += [_assign(k, v) for k, v in body.items()]
    return "\n".join(lines).strip("\n") + "\n"
