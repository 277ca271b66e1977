"""Read the files of ``command = "auto"`` stages to tell script-style from pytest-style.

The only file reading planning does, kept apart so that :func:`make_plan` stays a
function of values when the caller passes the styles in. Files are parsed, never
imported or executed (see :func:`testfleet.commands.file_style`). Parsing a large
end-to-end script takes milliseconds, and a plan runs on every CI event, so each
file's style is kept by content digest in the cache ``check`` uses for the same facts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from testfleet.commands import Style


def read_styles(root: Path, files: Iterable[str], *, digests: Mapping[str, bytes] | None = None,
                cache_dir: str | None = None) -> dict[str, Style | None]:
    """File -> its style; None when it cannot be read or parsed (``check`` reports why;
    the planner then falls back to pytest, whose "collected nothing" is a loud failure).

    ``digests`` (collection's, file -> content digest) find kept styles without reading
    the files; ``cache_dir``: keep styles there (None: parse every file, keep nothing).
    """
    from testfleet.registry.collectable import file_facts, save_facts, style_cache

    kept = style_cache(root, cache_dir or ".", use_cache=cache_dir is not None)
    known = digests or {}
    out: dict[str, Style | None] = {}
    for rel in files:
        try:
            facts = file_facts(kept, root, rel, known.get(rel), auto=True)
        except ValueError:
            facts = None
        out[rel] = None if facts is None else facts[1]
    if kept.displaced is None:  # something else stands there: ``check`` says so; leave it
        save_facts(kept, known, partial=True)
    return out
