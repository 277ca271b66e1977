"""One frozen plan per CI run, for the paths that plan in process.

``testfleet run --stage S --shard I/N`` and ``pytest --testfleet-stage S --testfleet-shard
I/N`` have no plan file: they plan where they run. If each shard planned from the history
the shards before it had just written, shard membership would change under the run and
files would run twice or never. So the first in-process plan of a run is frozen, and every
later one on the same machine executes that frozen plan instead of planning again.

A frozen plan is keyed by everything the plan depends on *except* history: the plan the
same config, registry and trigger give without any history (its digest covers the
stages, the files, their literals, the trigger and the policy), the commit, and the CI run
(``GITHUB_RUN_ID`` / ``BUILDKITE_BUILD_NUMBER``; none outside CI). Same key, same plan:
whatever history was recorded meanwhile. A new commit, a changed config or registration,
another trigger or another CI run is another key, planned afresh from the history of the
moment.

The first writer wins (a hard link, atomic on every local file system): two shards that
start together on one machine both end up with the same plan. Keyed file names are pure
(:func:`frozen_key`); the rest is the file I/O, kept small.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from testfleet.canonical import canonical_bytes
from testfleet.errors import UsageError
from testfleet.planning.model import Plan, load_plan, plan_bytes

#: under the project's ``cache_dir``
FROZEN_DIR = "plans"
#: frozen plans kept per machine (the oldest beyond it are removed when one is added)
KEEP = 64


def frozen_key(literal_digest: str, commit: str | None, ci_run: str | None) -> str:
    """The key of a run's frozen plan: 64 hex digits over the history-free plan's digest,
    the commit and the CI run id."""
    body = canonical_bytes({"plan": literal_digest, "commit": commit, "ci_run": ci_run})
    return hashlib.sha256(body).hexdigest()


def frozen_path(cache: Path, key: str) -> Path:
    return cache / FROZEN_DIR / f"{key}.json"


def load_frozen(path: Path) -> Plan | None:
    """The frozen plan at ``path``, or None when there is none yet. A damaged one is an
    error: a plan made again now could split differently from the shards already run."""
    import stat

    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # none yet, or no cache directory at all
        return None
    except OSError as exc:
        raise UsageError(f"cannot read the frozen plan of this run {path}: "
                         f"{exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):  # a symlink or a FIFO is no plan testfleet froze
        raise UsageError(f"{path} is not a regular file, so not a frozen plan testfleet "
                         "wrote; delete it to plan again")
    try:
        return load_plan(path)
    except UsageError as exc:
        raise UsageError(f"the frozen plan of this run is unusable: {exc}. Shards already run "
                         f"from it cannot be matched by a new plan; delete {path} to plan "
                         "again (and re-run every shard of this run)") from None


def freeze(path: Path, plan: Plan) -> Plan:
    """Store ``plan`` as the frozen plan at ``path`` unless one is already there; return
    the frozen plan (the one that was there first). Raises ``OSError`` when it cannot be
    written."""
    import errno
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.parent.is_symlink():
        raise OSError(errno.ELOOP, "is a symlink; nothing is written through it", str(path.parent))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(plan_bytes(plan))
        os.chmod(tmp, 0o644)
        try:
            os.link(tmp, path)
        except FileExistsError:
            first = load_frozen(path)
            if first is not None:
                return first
            raise
        except OSError:  # no hard links here (some network file systems): exclusive create
            try:
                out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                first = load_frozen(path)
                if first is not None:
                    return first
                raise
            with os.fdopen(out, "wb") as fh:
                fh.write(plan_bytes(plan))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    _prune(path.parent, keep=path)
    return plan


def _prune(directory: Path, keep: Path) -> None:
    """Remove the oldest frozen plans beyond :data:`KEEP` (never ``keep``)."""
    with contextlib.suppress(OSError):
        plans = [p for p in directory.glob("*.json") if p.name != keep.name]
        if len(plans) < KEEP:
            return
        plans.sort(key=lambda p: p.stat().st_mtime)
        for old in plans[:len(plans) - KEEP + 1]:
            with contextlib.suppress(OSError):
                old.unlink()
