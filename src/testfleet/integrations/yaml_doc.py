"""Write a YAML document from data, with comments, so that every value round-trips.

The generated workflows are reviewed by people, so their comments (why a job is gated,
why a checkout does not persist credentials) are worth keeping; and they carry values
from the configuration (env values, setup scripts, stage names), so no value may change
type or break the file: ``- foo``, ``0x1F``, ``.inf``, ``0b101``, ``null``, ``yes``,
``on`` and multi-line strings must come back as the strings they were.

So the layout (block mappings and sequences, two spaces a level) is written here, every
key and scalar is written by PyYAML's emitter (which quotes what needs quoting, and picks
a literal block for a multi-line string only when the string survives it), and comments
are whole lines or end-of-line comments placed around those scalars. The document is then
parsed back and compared with the data before it is returned: a value that would not come
back as it went in is an error here, never a broken workflow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml


@dataclass(frozen=True)
class Note:
    """``value`` with comments: whole lines ``before`` its key (or sequence item) and an
    ``eol`` comment after it (after a scalar, or after ``key:`` of a collection)."""

    value: Any
    before: tuple[str, ...] = ()
    eol: str = ""


@dataclass(frozen=True)
class Anchor:
    """``value`` written once under the anchor ``&name``, for :class:`Alias` to repeat.

    Stage jobs that share their runner class or setup would otherwise repeat the same steps
    in full; GitHub Actions reads YAML anchors (since 2025), so the second job says
    ``steps: *name`` and a reviewer reads the steps once."""

    name: str
    value: Any


@dataclass(frozen=True)
class Alias:
    """``*name``: the value of the :class:`Anchor` of that name, written earlier in the
    document. ``value`` is what it stands for (the round-trip check compares it)."""

    name: str
    value: Any


_ANCHOR_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def _anchor_name(name: str) -> str:
    if not _ANCHOR_NAME.match(name):
        raise ValueError(f"not an anchor name: {name!r}")
    return name


@dataclass(frozen=True)
class Flow:
    """A sequence of scalars written on one line (``[a, b]``), or a mapping of scalars
    (``{type: string, required: true}``): a short record a reviewer reads at a glance."""

    items: list[Any] | dict[str, Any] = field(default_factory=list)


class _Dumper(yaml.SafeDumper):  # type: ignore[misc]  # PyYAML has no type stubs here
    """SafeDumper that writes a multi-line string as a literal block when it can."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _represent_str)

_SCALARS = (str, int, float, bool, type(None))
#: The columns a generated GitHub file's short records are written within (``dump(width=)``).
REVIEW_WIDTH = 120
#: Characters YAML 1.1 parsers (PyYAML among them) take as line breaks besides "\n".
_BREAKS = ("\r", "\x85", "\u2028", "\u2029", "\ufeff")


def _scalar(value: Any) -> list[str]:
    """The scalar's lines as PyYAML writes it at the top level: the first is its text or
    block header, the others (a block's content) indented relative to column 0."""
    if not isinstance(value, _SCALARS):
        raise TypeError(f"not a YAML scalar: {type(value).__name__}")
    text: str = yaml.dump(value, Dumper=_Dumper, width=float("inf"), allow_unicode=True)
    if any(c in text for c in _BREAKS):
        # a character a YAML parser reads as a line break, written raw: escape everything
        text = yaml.safe_dump(value, width=float("inf"), allow_unicode=False, default_style='"')
    lines = text.rstrip("\n").split("\n")
    if lines[-1] == "...":  # the document end marker PyYAML adds after a root scalar
        lines.pop()
    return lines


def _key(value: Any) -> str:
    lines = _scalar(value)
    if len(lines) != 1:
        raise ValueError(f"a mapping key must fit on one line: {value!r}")
    return lines[0]


def _flow(items: list[Any] | dict[str, Any]) -> str:
    for item in (items.values() if isinstance(items, dict) else items):
        if not isinstance(item, _SCALARS):
            raise TypeError("a flow sequence or mapping holds scalars only")
    text: str = yaml.dump(items, Dumper=_Dumper, default_flow_style=True, width=float("inf"),
                          sort_keys=False,
                          allow_unicode=True).rstrip("\n")
    if "\n" in text:
        raise ValueError(f"a flow sequence must fit on one line: {items!r}")
    return text


def _comment_lines(texts: tuple[str, ...], pad: str) -> list[str]:
    out = []
    for text in texts:
        for line in text.split("\n"):
            out.append(f"{pad}# {line}".rstrip() if line else f"{pad}#")
    return out


def _eol(text: str) -> str:
    if "\n" in text:
        raise ValueError("an end-of-line comment is one line")
    return f" # {text}" if text else ""


def _unwrap(value: Any) -> tuple[Any, tuple[str, ...], str]:
    """The value inside any :class:`Note` wrappers, their comments joined (outer first)."""
    before: tuple[str, ...] = ()
    eols: list[str] = []
    while isinstance(value, Note):
        before += value.before
        if value.eol:
            eols.append(value.eol)
        value = value.value
    return value, before, "; ".join(eols)


def bare(value: Any) -> Any:
    """The value inside any :class:`Note` wrappers, without their comments."""
    return _unwrap(value)[0]


def _inline(value: dict[Any, Any], line: str, width: int) -> str | None:
    """``line`` ended by ``value`` as a flow mapping, when the mapping is a short record of
    scalars and the whole line fits in ``width`` columns (``with: {path: x, name: y}``)."""
    if not width or len(value) > 6 or not all(
            isinstance(k, str) and isinstance(v, _SCALARS) and "\n" not in str(v)
            for k, v in value.items()):
        return None
    try:
        text = f"{line} {_flow(value)}"
    except ValueError:
        return None
    return text if len(text) <= width else None


def _entry(prefix: str, value: Any, eol: str, indent: int, out: list[str],
           width: int = 0) -> None:
    """``prefix`` (``key:`` or ``-``) followed by ``value``, at ``indent``; ``width``: write
    a short mapping of scalars on its line when it fits in that many columns (0: never)."""
    pad = " " * indent
    if isinstance(value, Alias):
        out.append(f"{pad}{prefix} *{_anchor_name(value.name)}{_eol(eol)}")
        return
    if isinstance(value, Anchor):
        held, _, held_eol = _unwrap(value.value)
        name = _anchor_name(value.name)
        if not isinstance(held, (dict, list)) or not held or prefix == "-":
            raise TypeError("an anchor here marks a non-empty mapping or sequence under a key")
        out.append(f"{pad}{prefix} &{name}{_eol('; '.join(filter(None, (eol, held_eol))))}")
        if isinstance(held, dict):
            _mapping(held, indent + 2, out, width)
        else:
            _sequence(held, indent + 2, out, width)
        return
    if isinstance(value, Flow):
        out.append(f"{pad}{prefix} {_flow(value.items)}{_eol(eol)}")
    elif isinstance(value, dict) and value and prefix != "-" and not eol and \
            (line := _inline(value, f"{pad}{prefix}", width)) is not None:
        out.append(line)
    elif isinstance(value, dict) and value:
        if prefix == "-":
            inner: list[str] = []
            _mapping(value, indent + 2, inner, width)
            first = next(i for i, line in enumerate(inner) if not line.lstrip().startswith("#"))
            inner[first] = f"{pad}- {inner[first][indent + 2:]}{_eol(eol)}"
            out.extend(inner)
        else:
            out.append(f"{pad}{prefix}{_eol(eol)}")
            _mapping(value, indent + 2, out, width)
    elif isinstance(value, list) and value:
        if prefix == "-":
            raise TypeError("a sequence directly inside a sequence is not written here")
        out.append(f"{pad}{prefix}{_eol(eol)}")
        _sequence(value, indent + 2, out, width)
    elif isinstance(value, (dict, list)):
        out.append(f"{pad}{prefix} {'{}' if isinstance(value, dict) else '[]'}{_eol(eol)}")
    else:
        lines = _scalar(value)
        if len(lines) > 1 and eol and not lines[0].startswith(("|", ">")):
            raise ValueError("an end-of-line comment goes after a block scalar's header only")
        out.append(f"{pad}{prefix} {lines[0]}{_eol(eol)}")
        out.extend(f"{pad}{line}" if line else "" for line in lines[1:])


def _mapping(data: dict[Any, Any], indent: int, out: list[str], width: int = 0) -> None:
    pad = " " * indent
    for key, raw in data.items():
        value, before, eol = _unwrap(raw)
        out.extend(_comment_lines(before, pad))
        _entry(f"{_key(key)}:", value, eol, indent, out, width)


def _sequence(items: list[Any], indent: int, out: list[str], width: int = 0) -> None:
    pad = " " * indent
    for raw in items:
        value, before, eol = _unwrap(raw)
        out.extend(_comment_lines(before, pad))
        _entry("-", value, eol, indent, out, width)


def plain(value: Any) -> Any:
    """The data without its comments: what parsing the document gives back."""
    value, _, _ = _unwrap(value)
    if isinstance(value, (Anchor, Alias)):
        return plain(value.value)
    if isinstance(value, Flow):
        if isinstance(value.items, dict):
            return {k: plain(v) for k, v in value.items.items()}
        return [plain(v) for v in value.items]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


class RoundTripError(ValueError):
    """The written document does not parse back to its data (a bug here, never shipped)."""


def dump(data: dict[str, Any], header: tuple[str, ...] = (), *, blank_between: int = 0,
         width: int = 0) -> str:
    """``data`` (a mapping, values may be :class:`Note`/:class:`Flow`) as a YAML document,
    ``header`` as its first comment lines. ``blank_between``: top-level keys up to this
    depth are separated by an empty line (1: between top-level keys, 2: also between the
    entries of a top-level mapping such as ``jobs``). ``width``: a short mapping of up to
    six scalars (a step's ``with:``) is written on its key's line when the line fits."""
    out: list[str] = _comment_lines(header, "")
    for i, (key, raw) in enumerate(data.items()):
        value, before, eol = _unwrap(raw)
        if i and blank_between >= 1:
            out.append("")
        out.extend(_comment_lines(before, ""))
        if blank_between >= 2 and isinstance(value, dict) and value and \
                all(isinstance(_unwrap(v)[0], dict) for v in value.values()):
            out.append(f"{_key(key)}:{_eol(eol)}")
            for j, (sub, subraw) in enumerate(value.items()):
                if j:
                    out.append("")
                _mapping({sub: subraw}, 2, out, width)
        else:
            _entry(f"{_key(key)}:", value, eol, 0, out, width)
    text = "\n".join(out) + "\n"
    check(text, plain(data))
    return text


def check(text: str, expected: Any) -> None:
    """Parse ``text`` back and require exactly ``expected`` (see :class:`RoundTripError`)."""
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RoundTripError(f"the generated YAML does not parse: {exc}") from None
    if parsed != expected:
        raise RoundTripError("the generated YAML does not parse back to its data")
