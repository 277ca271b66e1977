"""Which known CI label a PR label that selects nothing was probably meant to be. Pure.

A pull request carries every label its repository uses (``bug``, ``documentation``,
``size/XL``...), so a label that means nothing to testfleet is normal and must stay
silent; a label that *almost* names a CI label is a person's mistake that silently
schedules nothing, and must say so. The comparison ignores case and treats the
prefix's punctuation loosely (``Run_CI_megatron``), and a bare registered name
(``megatron``) is matched against its prefixed form (``run-ci-megatron``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: How close a label must be to count as a typo: prefixed labels are CI labels already,
#: so a looser match helps; a bare label may be any repository label, so only a close
#: one warns (``megatorn`` -> ``megatron`` is 0.88, ``docs`` -> ``fsdp`` is 0.5).
PREFIXED_CUTOFF = 0.6
BARE_CUTOFF = 0.8

DEFAULT_PREFIX = "run-ci-"
_SEPARATORS = re.compile(r"[\s_:./-]+")


def fold(label: str) -> str:
    """The form labels are compared in: lower case, any run of separators one ``-``."""
    return _SEPARATORS.sub("-", label.strip().lower())


def closest_label(raw: str, known: Iterable[str], *, prefix: str,
                  cutoff: float | None = None) -> str | None:
    """The known label ``raw`` was most likely meant to be, or ``None``.

    ``known`` are full labels (``run-ci-megatron``, ``run-ci-all``, ``nightly``). ``raw``
    matches a known label when the two are equal after :func:`fold`, when ``raw`` is the
    known label without ``prefix``, or when :mod:`difflib` finds them ``cutoff`` close;
    a prefixed ``raw`` is compared by the part after the prefix, so that the shared
    prefix does not make every ``run-ci-x`` look like ``run-ci-all``. ``cutoff`` defaults
    to :data:`PREFIXED_CUTOFF` or :data:`BARE_CUTOFF`.
    """
    import difflib  # only a label that selects nothing pays for it

    labels = sorted(set(known))
    folded = {fold(k): k for k in labels}
    key = fold(raw)
    if key in folded:
        return folded[key]
    bare = {fold(k[len(prefix):]): k for k in labels if k.startswith(prefix) and k != prefix}
    if key in bare:
        return bare[key]
    # a label with this project's prefix, or with the default one in a project that chose
    # another (a habit from another repository), is compared by its name
    for head in dict.fromkeys((fold(prefix), DEFAULT_PREFIX)):
        if head and key.startswith(head) and len(key) > len(head):
            found = difflib.get_close_matches(key[len(head):], list(bare), n=1,
                                              cutoff=PREFIXED_CUTOFF if cutoff is None else cutoff)
            if found or head == fold(prefix):
                return bare[found[0]] if found else None
    # a bare name is compared with every known label and every prefixed one's name
    candidates = {**{k: v for k, v in folded.items() if not v.startswith(prefix)}, **bare}
    found = difflib.get_close_matches(key, list(candidates), n=1,
                                      cutoff=BARE_CUTOFF if cutoff is None else cutoff)
    return candidates[found[0]] if found else None
