"""What a project's runner lists (miles' and SGLang's ``run_suite.py --list-only``, a
dry-run flag) read as the files it selects: one rule, shared by the adoption report's
``--runner-selection`` and shadow mode's records, so both read a listing the same way.
"""

from __future__ import annotations

import re

_PY_PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w.-]+\.py)(?![\w/])")


class ListingLines:
    """Feed a listing's lines one by one; :attr:`files` holds what it selects.

    Every ``path.py`` on a line counts, except on the lines of a list introduced by a
    line that starts with "skip" (``Skipped 2 test(s):``), which ends at the next line
    that is neither indented nor a bullet: runners list what they leave out too.
    """

    def __init__(self) -> None:
        self.files: set[str] = set()
        self._skipping = False

    def feed(self, line: str) -> None:
        if not line.strip():
            return
        stripped = line.lstrip()
        if line == stripped and not stripped.startswith(("-", "*", "+")):
            self._skipping = stripped.lower().startswith("skip")
        if not self._skipping:
            self.files.update(p.removeprefix("./") for p in _PY_PATH.findall(line))
