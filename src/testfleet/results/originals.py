"""What a registration's ``disabled=`` argument was before ``disable`` set it (#36).

``disable`` writes a reason over an explicit ``disabled=None`` or inserts the argument
where there was none; both give the same text (``f(a, disabled="r")``), so the file alone
cannot say which ``enable`` should restore. The repository can: the version of the file
before the reason was written. :func:`was_none` asks git for it, read-only and bounded
in time: the last commit if the disable is not committed yet, else the parent of the
commit that wrote the reason (``git log -S``). Without git, or when git cannot say,
``enable`` removes the argument (the same meaning: ``None`` is the default).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

#: The longest one git command may take (seconds); past it the answer is "unknown".
GIT_TIMEOUT = 20.0


def was_none(root: Path, rel: str, markers: set[str], suite: str, reason: str) -> bool:
    """Whether the call of ``suite`` in ``rel`` had ``disabled=None`` before ``reason``
    was written into it (False when that cannot be told)."""
    head = _show(root, f"HEAD:./{rel}")
    if head is None:
        return False
    before = _disabled_in(head, markers, suite)
    if before != reason:  # not committed yet: HEAD has the call as it was
        return before is None
    literal = json.dumps(reason, ensure_ascii=False)
    commit = _git(root, "log", "-1", "--format=%H", "-S", literal, "--", rel)
    if not commit:
        return False
    older = _show(root, f"{commit.decode().strip()}^:./{rel}")
    return older is not None and _disabled_in(older, markers, suite) is None


_ABSENT = object()


def _disabled_in(source: bytes, markers: set[str], suite: str) -> object:
    """The ``disabled=`` value of the call (None, a string), or :data:`_ABSENT` when the
    call has no such argument, has another value, or cannot be read."""
    import ast

    from testfleet.results.disabling import EditError, _disabled_value, _pick

    try:
        node = _disabled_value(_pick(source, markers, suite, 0))
    except EditError:
        return _ABSENT
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str)):
        return node.value
    return _ABSENT


def _show(root: Path, spec: str) -> bytes | None:
    return _git(root, "show", spec)


def _git(root: Path, *argv: str) -> bytes | None:
    """stdout of a read-only git command in ``root``, or None (no git, not a repository,
    no such object, too slow)."""
    try:
        proc = subprocess.run(["git", "-C", str(root), *argv], capture_output=True,
                              timeout=GIT_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None
