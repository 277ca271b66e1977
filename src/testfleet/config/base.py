"""What every configuration section is built from: the strict model base, names, relative
paths, pull request labels and regular expressions, each checked the same way wherever a
section uses it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from testfleet.ci_keys import _control_char

NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_NAME = re.compile(NAME_RE)
MAX_NAME = 100


class _Strict(BaseModel):
    # allow_inf_nan=False: TOML has inf and nan, and a timeout or target of inf crashed
    # planning and `run` with an OverflowError instead of being reported here.
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True,
                              allow_inf_nan=False)


def _compiles(patterns: list[str]) -> list[str]:
    """A pattern list is checked when the config loads, not when a job first needs it."""
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
    return patterns


# Regular expressions (runner retry/fatal patterns, check reference patterns).
RegexList = Annotated[list[str], AfterValidator(_compiles)]


def _check_pr_label(label: str) -> None:
    """A PR label named in config (a gate) must be one GitHub could attach."""
    if not label.strip() or len(label) > MAX_NAME or _control_char(label) is not None:
        raise ValueError(f"{label[:40]!r} is not a usable pull request label (non-empty, at "
                         f"most {MAX_NAME} characters, no control characters)")


def _unsafe_in_ci_path(raw: str, path: str) -> str | None:
    """What in a path would not stay a path in an actions/cache ``path`` input."""
    bad = _control_char(raw)
    if bad is not None:
        return f"a control character ({bad!r})"
    if "${{" in raw:
        return "'${{', which GitHub would evaluate as an expression"
    glob = next((c for c in raw if c in "*?[]"), None)
    if glob is not None:
        return f"{glob!r}, which the CI cache action would read as a pattern"
    if path.startswith("!"):
        return "a leading '!', which the CI cache action would read as an exclusion"
    return None


def _relative_path(v: str) -> str:
    p = v.replace("\\", "/").strip("/")
    if not p or v.startswith("/") or any(part == ".." for part in p.split("/")):
        raise ValueError(f"{v!r} must be a relative path inside the project")
    return p


def _did_you_mean(value: str, choices: Iterable[str]) -> str:
    import difflib

    close = difflib.get_close_matches(value, sorted(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
