"""YAML text shared by the composite action and the Buildkite bootstrap: scalars,
expression literals and pinned ``uses:`` references. (The workflows are written from data
by :mod:`testfleet.integrations.yaml_doc`.)
"""

from __future__ import annotations

import json
import re

#: Actions pinned to the commit of a release (``# vX.Y.Z`` comments let Dependabot
#: and Renovate update them). Verified against the actions' published release tags.
PINNED_ACTIONS: dict[str, tuple[str, str]] = {
    "actions/checkout": ("11bd71901bbe5b1630ceea73d27597364c9af683", "v4.2.2"),
    "actions/setup-python": ("a26af69be951a213d495a4c3e4e4022e16d87065", "v5.6.0"),
    "actions/upload-artifact": ("ea165f8d65b6e75b540449e92b4886f43607fa02", "v4.6.2"),
    "actions/download-artifact": ("d3f86a106a0bac45b974a628896c90dbdf5c8093", "v4.3.0"),
    "actions/cache/restore": ("5a3ec84eff668545956fd18022155c47e93e2684", "v4.2.3"),
    "actions/cache/save": ("5a3ec84eff668545956fd18022155c47e93e2684", "v4.2.3"),
    "astral-sh/setup-uv": ("d0cc045d04ccac9d8b7881df0226f9e82c39688e", "v6.8.0"),
}

_PLAIN = re.compile(r"^[A-Za-z0-9_./-][A-Za-z0-9_./ -]*$")


def yaml_str(value: str) -> str:
    """A YAML scalar for ``value``: plain when unambiguous, else double-quoted JSON
    (JSON strings are valid YAML double-quoted scalars)."""
    reserved = {"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"}
    if (_PLAIN.match(value) and value.lower() not in reserved and not value.endswith(" ")
            and not re.fullmatch(r"[-+.0-9eE_]+", value)):
        return value
    return json.dumps(value, ensure_ascii=False)


def expr_str(value: str) -> str:
    """A string literal inside a ``${{ }}`` expression (single quotes, doubled)."""
    return "'" + value.replace("'", "''") + "'"


def uses(action: str) -> str:
    sha, version = PINNED_ACTIONS[action]
    return f"{action}@{sha} # {version}"
