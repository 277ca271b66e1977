"""What ``testfleet run`` needs beyond the core install, checked before anything runs.

pytest and psutil are the ``runner`` extra: a pre-commit hook or a plan job (``check``,
``list``, ``plan``) never needs them, so the core install leaves them out. A runner without
them must say so at once, naming the install that fixes it, not fail on its first file.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable

from testfleet.errors import UsageError

INSTALL_HINT = "pip install 'testfleet[runner]'"


def missing_modules(commands: Iterable[str]) -> list[str]:
    """The runner's modules this interpreter lacks: psutil always, pytest when a file runs
    under the ``pytest`` shorthand (``<this python> -m pytest``; a template names its own
    interpreter, which is not ours to check)."""
    wanted = ["psutil"]
    if any(c == "pytest" for c in commands):
        wanted.append("pytest")
    return [name for name in wanted if importlib.util.find_spec(name) is None]


def require_runner(commands: Iterable[str]) -> None:
    """Refuse to start a job this environment cannot run (exit 2, nothing run)."""
    missing = missing_modules(commands)
    if missing:
        raise UsageError(
            f"testfleet run needs {' and '.join(missing)}, which {sys.executable} does not have; "
            f"install the runner extra: {INSTALL_HINT}")
