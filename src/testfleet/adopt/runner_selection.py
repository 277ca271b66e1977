"""A project's runner's saved ``--list-only`` output, one block per trigger and stage,
parsed for the adoption report (docs/adopt.md).
"""

from __future__ import annotations

import re

from testfleet.adopt.triggers import CASE_IDS
from testfleet.listing_text import ListingLines

_BLOCK = re.compile(r"^==\s*trigger=(\S+)\s+stage=(\S+)\s*==\s*$")


def parse_runner_selection(text: str, source: str) -> dict[tuple[str, str], set[str]]:
    """A saved selection of the project's runner: ``(trigger id, stage) -> files``.

    The file is the runner's own ``--list-only`` / dry-run output for each trigger and
    stage, each preceded by a line ``== trigger=<id> stage=<stage> ==`` (docs/adopt.md).
    Inside a block every ``path.py`` on a line counts as selected, except on the lines of
    a list introduced by a line that starts with "skip" (``Skipped 2 test(s):``) and
    ending at the next line that is not indented and not a bullet. Raises
    :class:`~testfleet.errors.UsageError` naming the line for a malformed header, an
    unknown trigger id, a block given twice or text before the first header.
    """
    from testfleet.errors import UsageError

    out: dict[tuple[str, str], set[str]] = {}
    current: ListingLines | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r"==\s*trigger=", line):  # a runner's own '=====' rules are text
            m = _BLOCK.match(line)
            if m is None:
                raise UsageError(f"{source}:{number}: expected '== trigger=<id> stage=<stage> ==', "
                                 f"got {line[:80]!r}")
            case, stage = m.groups()
            if case not in CASE_IDS:
                raise UsageError(f"{source}:{number}: unknown trigger {case!r}; valid: "
                                 f"{', '.join(CASE_IDS)}")
            if (case, stage) in out:
                raise UsageError(f"{source}:{number}: trigger={case} stage={stage} is given twice")
            current = ListingLines()
            out[(case, stage)] = current.files
            continue
        if not line.strip():
            continue
        if current is None:
            raise UsageError(f"{source}:{number}: text before the first "
                             "'== trigger=<id> stage=<stage> ==' line")
        current.feed(line)
    return out
