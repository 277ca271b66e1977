"""The one configuration line that makes a stage dormant for an infrastructure incident,
and the edit that writes it, changing that line and no other byte. Pure functions
over text; ``testfleet incident dormant`` reads and writes the file.

A stage without variants is the table ``[stages.<stage>]`` (``[tool.testfleet.stages.
<stage>]`` in ``pyproject.toml``); a variant is ``[stages.<stage>.variants.<variant>]``.
The line is ``disabled = "<reason>"``: the reason names the incident (its id, what it
is, how much of the stage it took, in which CI run) and its reference (the CI run's
link, and an issue when one is given), so the ledger and ``check``'s
``dormant_requires_reference`` read it like any other dormant stage.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from testfleet.incidents.group import Incident, LaneShare

REASON_MAX = 300
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029`]|\$\{\{")


class DormancyError(Exception):
    """The line cannot be written safely; the file is unchanged."""


def table_path(stage: str, variant: str = "", *, pyproject: bool = False) -> list[str]:
    """The keys of the lane's table, outermost first."""
    keys = ["stages", stage] + (["variants", variant] if variant else [])
    return (["tool", "testfleet"] if pyproject else []) + keys


def table_header(path: list[str]) -> str:
    return "[" + ".".join(k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)
                          for k in path) + "]"


def dormant_reason(incident: Incident, share: LaneShare, *, url: str | None = None,
                   ref: str | None = None) -> str:
    """``infrastructure incident <id>: <label> on <n> of <m> files in CI run <run>, see
    <link or ref>``; characters a reason must not hold (control characters, backticks,
    ``${{``) are left out, and it is cut to :data:`REASON_MAX` characters."""
    label = _UNSAFE.sub(" ", incident.signature.label or incident.signature.text)[:80]
    where = f"CI run {incident.ci_run_id}" if incident.ci_run_id else incident.run
    refs = ", ".join(r for r in (ref, url) if r)
    reason = (f"infrastructure incident {incident.id}: {label} on {share.files} of {share.ran} "
              f"file(s) in {_UNSAFE.sub('', where)}" + (f", see {refs}" if refs else ""))
    return " ".join(reason.split())[:REASON_MAX]


def dormant_line(reason: str) -> str:
    """``disabled = "<reason>"`` as TOML writes it."""
    import tomlkit

    return f"disabled = {tomlkit.string(reason).as_string()}"


@dataclass(frozen=True)
class Edit:
    text: str  # the whole new file
    line: int  # 1-based line of the ``disabled`` key in it
    old: str | None  # the line it replaced (None: inserted)
    new: str


def set_disabled(text: str, path: list[str], reason: str) -> Edit:
    """``text`` with ``disabled = "<reason>"`` in the table at ``path``: the key's line
    replaced when the table has one, else inserted after the table's last key line.
    Every other line is kept byte for byte (checked); anything else (no such table, a
    table written inline or by dotted keys, a file tomlkit would rewrite) is a
    :class:`DormancyError` and nothing is written."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise DormancyError(f"cannot parse the configuration: {exc}") from None
    table = _table(doc, path)
    current = table.get("disabled")
    if current is not None and str(current) == reason:
        raise DormancyError(f"{table_header(path)} is dormant already with this reason")
    table["disabled"] = reason
    new_text = tomlkit.dumps(doc)
    edit = _one_line_changed(text, new_text)
    if edit is not None and edit[1] is None:
        new_text, edit = _after_last_key(text, edit)
    if edit is None:
        raise DormancyError(f"writing 'disabled' into {table_header(path)} would change more "
                            "than its line (the table is inline, dotted or unusually laid "
                            "out); add the line by hand")
    check = _table(tomlkit.parse(new_text), path).get("disabled")
    if check is None or str(check) != reason:  # pragma: no cover - tomlkit round trip
        raise DormancyError("the edit did not produce the expected value; file left unchanged")
    return Edit(new_text, *edit)


def _table(doc: object, path: list[str]) -> dict[str, object]:
    from tomlkit.items import Table

    node: object = doc
    for i, key in enumerate(path):
        if not isinstance(node, dict) or key not in node:
            raise DormancyError(f"no table {table_header(path[:i + 1])} in the configuration")
        node = node[key]
    if not isinstance(node, Table) or node.is_super_table():
        raise DormancyError(f"{table_header(path)} is not written as a [table] of its own; "
                            "add the line by hand")
    return node


def _after_last_key(old: str, edit: tuple[int, str | None, str]) -> tuple[str, tuple[int, None, str]]:
    """An inserted line moved up over the comments and blank lines that end the table
    (they belong to what follows): right after the table's last line with content."""
    lines = old.splitlines(keepends=True)
    at = edit[0] - 1
    while at > 0 and (not lines[at - 1].strip() or lines[at - 1].lstrip().startswith("#")):
        at -= 1
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    if at > 0 and not lines[at - 1].endswith(("\n", "\r")):
        at = edit[0] - 1  # the previous line has no line end: keep tomlkit's place
    lines.insert(at, edit[2] + newline)
    return "".join(lines), (at + 1, None, edit[2])


def _one_line_changed(old: str, new: str) -> tuple[int, str | None, str] | None:
    """(line, old line or None, new line) when ``new`` is ``old`` with exactly one line
    replaced or inserted, else None."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    if len(b) == len(a):
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        if len(diff) == 1 and b[diff[0]].lstrip().startswith("disabled"):
            i = diff[0]
            return i + 1, a[i].rstrip("\r\n"), b[i].rstrip("\r\n")
        return None
    if len(b) != len(a) + 1:
        return None
    i = next((j for j, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(a))
    if a[i:] == b[i + 1:] and b[i].lstrip().startswith("disabled"):
        return i + 1, None, b[i].rstrip("\r\n")
    return None
