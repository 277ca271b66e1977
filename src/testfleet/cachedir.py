"""The one rule for ``<root>/<cache_dir>`` (``.testfleet`` by default): a real directory.

Everything testfleet keeps between runs lands there: the collection caches, the config
snapshot, the default SQLite history (``history.db``) and the run records (``runs/``).
A pull request can commit ``.testfleet`` as a symlink to any directory the CI runner
can write (another checkout, the runner's home); following it would write history and
records there, and read caches planted there. So a symlink anywhere on that path is
refused by every reader and writer alike, with this one message.
(A regular file in its place is reported by each command, see ``history_location_problem``.)
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def cache_dir_problem(root: Path, cache_dir: str) -> str | None:
    """Why ``<root>/<cache_dir>`` must not be used (a component of it is a symlink), or
    None; a path that does not exist yet is fine (it is created)."""
    here = root
    for part in Path(cache_dir).parts:
        here = here / part
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"cache_dir {cache_dir!r}: cannot inspect {_rel(root, here)} ({exc.strerror or exc})"
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(here)
            except OSError:
                target = "?"
            return (f"cache_dir {cache_dir!r}: {_rel(root, here)} is a symlink (-> {target!r}); "
                    "testfleet keeps its caches, history and run records only in a real "
                    "directory inside the project: remove the link")
        if not stat.S_ISDIR(st.st_mode):
            return None  # a file in the way: each command says so in its own terms
    return None


def _rel(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
