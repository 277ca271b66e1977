"""The derived configuration written as TOML that reads like the documented examples: a
multi-line value (a setup script) as a multi-line string, a long one (container options)
wrapped, a long inline table as a table of its own, so no line runs far past the width.
"""

from __future__ import annotations

import json
import re
from typing import Any

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")
#: a line longer than this is wrapped (a value over several lines) where TOML allows it
WIDTH = 100
_LITERAL_OK = re.compile(r"[^\x00-\x08\x0b-\x1f\x7f]*")
_TRIPLE_SINGLE = "'" * 3


def _key(k: str) -> str:
    return k if _BARE.match(k) else json.dumps(k, ensure_ascii=False)


def _string(s: str, block: bool, width: int = WIDTH) -> str:
    """A TOML string. Where a value may span lines (``block``), a multi-line value is a
    multi-line string a reviewer reads as it runs (a literal one, so a shell script's
    backslashes stay as written, when it can be), and a long one-line value is wrapped at
    spaces with line-ending backslashes (TOML joins the lines back exactly)."""
    if block and "\n" in s:
        if _TRIPLE_SINGLE not in s and _LITERAL_OK.fullmatch(s) and not s.endswith("'"):
            return _TRIPLE_SINGLE + "\n" + s + _TRIPLE_SINGLE
        return '"""\n' + _basic(s) + '"""'
    plain = json.dumps(s, ensure_ascii=False)
    if not block or len(plain) <= width or "  " in s or s != s.strip() or "\t" in s:
        return plain
    lines: list[str] = []
    line = ""
    for word in s.split(" "):
        if line and len(line) + len(word) + 1 > width - 8:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    # each line but the last ends with its space and a continuation backslash, which
    # TOML removes together with the newline and the next line's indentation
    body = " \\\n".join(_basic(x) for x in lines)
    return '"""\n' + body + '"""'


def _basic(s: str) -> str:
    """Text inside a multi-line basic string: backslashes and control characters escaped,
    no three quotes in a row, no quote just before the closing delimiter."""
    trailing = s.endswith('"')  # escaped on its own: no quote just before the delimiter
    out = []
    for c in s[:-1] if trailing else s:
        if c == "\\":
            out.append("\\\\")
        elif c in "\n\t":
            out.append(c)
        elif ord(c) < 32 or c == "\x7f":
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    text = "".join(out).replace('"""', '""\\"')
    return text + ('\\"' if trailing else "")


def _value(v: Any, block: bool = False, width: int = WIDTH) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v) if isinstance(v, float) and not v.is_integer() else str(int(v))
    if isinstance(v, str):
        return _string(v, block, width)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _assign(k: str, v: Any) -> str:
    """``key = value``; a file list (``exclude``) or a long list goes one item per line,
    so a reviewer reads it and a diff adding one file touches one line; a multi-line or
    long string (a setup script, container options) spans lines as it reads."""
    line = f"{_key(k)} = {_value(v)}"
    if isinstance(v, (list, tuple)) and v and (k == "exclude" or len(line) > WIDTH
                                                or any(isinstance(x, str) and "\n" in x for x in v)):
        return f"{_key(k)} = [\n" + "".join(f"    {_value(x, True, WIDTH - 5)},\n" for x in v) + "]"
    if isinstance(v, str):
        return f"{_key(k)} = {_value(v, True, WIDTH - len(_key(k)) - 3)}"
    return line


def _table_lines(table_header: str, body: dict[str, Any], skip: tuple[str, ...] = ()) -> list[str]:
    """A table's keys, then its long inline tables (``container``) as tables of their own."""
    lines = [table_header]
    subs: list[tuple[str, dict[str, Any]]] = []
    for k, v in body.items():
        if k in skip:
            continue
        if isinstance(v, dict) and v and len(f"{_key(k)} = {_value(v)}") > WIDTH \
                and not any(isinstance(x, dict) for x in v.values()):
            subs.append((k, v))
            continue
        lines.append(_assign(k, v))
    for k, v in subs:
        lines += ["", table_header[:-1] + "." + _key(k) + "]"]
        lines += [_assign(kk, vv) for kk, vv in v.items()]
    return lines


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
            lines += ["", *_table_lines(header(section, name), body, ("variants",))]
            for variant, vbody in body.get("variants", {}).items() if section == "stages" else []:
                lines += ["", *_table_lines(header(section, name, "variants", variant), vbody)]
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
