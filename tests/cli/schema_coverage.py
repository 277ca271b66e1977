"""How much of a real JSON document its published schema describes.

A key path is *described* when the schema reaches it through declared ``properties``
(or a typed map: ``additionalProperties`` / ``patternProperties`` with a schema of its own)
and the schema found there says what the value is (a type, const, enum or reference).
Reaching a value through ``additionalProperties: true`` or an empty schema ``{}`` means
the schema says nothing about it: that path, and every path under it, is undescribed.

Paths are counted with list indices folded to ``[]`` (``stages[].counts.enabled``), so
a report with 40 stages has one path per stage field, not 40.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import jsonschema

_SAYS_WHAT = ("type", "const", "enum", "$ref", "anyOf", "oneOf", "allOf")


@dataclass
class Coverage:
    present: set[str] = field(default_factory=set)
    described: set[str] = field(default_factory=set)
    # paths whose object the schema leaves open, with the open object's path
    undescribed: dict[str, str] = field(default_factory=dict)
    # every key of the document, list items counted one by one
    keys: int = 0
    keys_described: int = 0

    @property
    def missing(self) -> list[str]:
        return sorted(self.present - self.described)


def coverage(document: Any, schema: dict[str, Any]) -> Coverage:
    out = Coverage()
    _walk(document, schema, schema, "", out, open_at=None)
    return out


def _resolve(sub: Any, root: dict[str, Any], value: Any) -> Any:
    """Follow ``$ref`` and pick the ``anyOf``/``oneOf`` branch ``value`` validates against."""
    for _ in range(64):
        if not isinstance(sub, dict):
            return sub
        if "$ref" in sub:
            ref = sub["$ref"]
            assert ref.startswith("#/"), ref
            target: Any = root
            for part in ref[2:].split("/"):
                target = target[part]
            sub = {**{k: v for k, v in sub.items() if k != "$ref"}, **target}
            continue
        for key in ("anyOf", "oneOf"):
            if key in sub:
                branches = sub[key]
                chosen = next((b for b in branches if _valid(value, b, root)), None)
                if chosen is None:
                    return {}  # no branch fits: nothing here describes the value
                sub = {**{k: v for k, v in sub.items() if k != key}, **chosen}
                break
        else:
            if "allOf" in sub and len(sub["allOf"]) == 1:
                sub = {**{k: v for k, v in sub.items() if k != "allOf"}, **sub["allOf"][0]}
                continue
            return sub
    raise AssertionError("schema reference loop")


def _valid(value: Any, sub: dict[str, Any], root: dict[str, Any]) -> bool:
    probe = {**sub, "$defs": root.get("$defs", {})}
    return jsonschema.Draft202012Validator(probe).is_valid(value)


def _says_what(sub: Any) -> bool:
    return isinstance(sub, dict) and any(k in sub for k in _SAYS_WHAT)


def _walk(value: Any, sub: Any, root: dict[str, Any], path: str, out: Coverage,
          open_at: str | None) -> None:
    sub = _resolve(sub, root, value) if open_at is None else {}
    if isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            out.present.add(child)
            out.keys += 1
            child_sub: Any = None
            if open_at is None and isinstance(sub, dict):
                props = sub.get("properties", {})
                if key in props:
                    child_sub = props[key]
                else:
                    for pattern, pattern_sub in sub.get("patternProperties", {}).items():
                        if re.search(pattern, key):
                            child_sub = pattern_sub
                            break
                    else:
                        extra = sub.get("additionalProperties")
                        if isinstance(extra, dict) and extra:
                            child_sub = extra
            child_open = open_at
            if child_open is None:
                if not _says_what(child_sub):
                    child_open = path or "(document)"
                else:
                    out.described.add(child)
                    out.keys_described += 1
            if child_open is not None:
                out.undescribed[child] = child_open
            _walk(item, child_sub if child_open is None else None, root, child, out, child_open)
    elif isinstance(value, list):
        items = sub.get("items") if open_at is None and isinstance(sub, dict) else None
        item_open = open_at
        if item_open is None and not _says_what(items):
            item_open = path
        for item in value:
            _walk(item, items if item_open is None else None, root, f"{path}[]", out, item_open)
