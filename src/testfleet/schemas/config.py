"""The configuration's JSON Schema and its Markdown reference, both from :class:`Config`.

The schema follows SchemaStore conventions (draft 2020-12, title, description)
so Taplo / Even Better TOML can validate ``testfleet.toml`` directly and
``[tool.testfleet]`` through the pyproject schema's ``tool`` map.
"""

from __future__ import annotations

import json
from typing import Any


def config_json_schema() -> dict[str, Any]:
    from testfleet.config import Config

    schema = Config.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "testfleet configuration",
        "description": "[tool.testfleet] in pyproject.toml, or the top level of testfleet.toml.",
        **{k: v for k, v in schema.items() if k not in ("title", "description")},
    }


def config_json_text() -> str:
    text: str = json.dumps(config_json_schema(), indent=2, sort_keys=True)
    return text + "\n"


def _type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return "table `" + str(prop["$ref"]).rsplit("/", 1)[-1] + "`"
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"] if p.get("type") != "null")
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object":
        extra = prop.get("additionalProperties")
        return f"map of {_type(extra)}" if isinstance(extra, dict) else "table"
    return {"string": "string", "integer": "integer", "number": "number",
            "boolean": "boolean"}.get(kind, str(kind))


_BOUNDS = (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="),
           ("exclusiveMaximum", "<"), ("minItems", "at least"), ("maxItems", "at most"))


def _constraints(prop: dict[str, Any]) -> str:
    parts: list[str] = []
    for key, word in _BOUNDS:
        for p in [prop, *prop.get("anyOf", [])]:
            if key in p:
                unit = (" item" if p[key] == 1 else " items") if key.endswith("Items") else ""
                parts.append(f"{word} {p[key]}{unit}")
    return ", ".join(parts)


def _default(model: Any, key: str) -> str:
    """Defaults from the model itself: pydantic leaves ``default_factory`` values out of
    the JSON Schema, and "required" would be a lie for ``roots`` or ``stages``."""
    field = model.model_fields.get(key) if model is not None else None
    if field is None or field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if hasattr(value, "model_dump"):
        return "(table defaults)"
    text = json.dumps(value, default=str, sort_keys=True)
    return f"`{text}`" if len(text) <= 60 else "(long; see `testfleet schema config`)"


def config_reference_markdown() -> str:
    """One table per model: key, type, default, constraints; the model's docstring on top."""
    import testfleet.config as config_module

    schema = config_json_schema()
    defs: dict[str, Any] = schema.get("$defs", {})
    sections = [("Config", "top level", schema)] + [
        (name, name, body) for name, body in sorted(defs.items())]
    out = ["# Configuration keys", "",
           "Generated from the pydantic models that `testfleet check` validates with. The same",
           "schema is published as JSON (`testfleet schema config`) for editors: point",
           "Taplo / Even Better TOML at it for `testfleet.toml`.", ""]
    for name, title, body in sections:
        out.append(f"## `{title}`" if name != "Config" else "## Top level")
        out.append("")
        doc = (body.get("description") or "").strip()
        if doc and name != "Config":
            out += [doc.replace("\n", " "), ""]
        props: dict[str, Any] = body.get("properties", {})
        if not props:
            continue
        out += ["| key | type | default | constraints |", "|---|---|---|---|"]
        model = getattr(config_module, name, None)
        for key, prop in props.items():
            out.append(f"| `{key}` | {_type(prop)} | {_default(model, key)} | {_constraints(prop)} |")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
