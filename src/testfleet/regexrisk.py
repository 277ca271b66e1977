"""Which configured regular expressions backtrack catastrophically, found before a run.

The runner bounds every search of a retriable or fatal pattern (runner/capture.py:
0.25 s a search, 2 s a job, then the pattern is dropped with a warning), and the report
bounds its reference patterns likewise; but a pattern that is cut off at run time has
silently stopped doing its job, on whichever test printed the unlucky line. ``check``
says so beforehand (#36).

Two steps, so that a finding is never a guess:

1. Static candidates, from the pattern's parse tree (``re``'s own parser): a repeat
   without a small upper bound whose body either holds another such repeat (``(a+)+``,
   ``(\\w+\\s?)*``) or an alternation (``(a|a)*``, ``(a|aa)+``). Only those can match one
   string in exponentially many ways; a pattern without them is accepted at once.
2. A trial for each candidate, with the runner's own engine (the ``regex`` package):
   a string that reaches the repeat (the shortest text matching what precedes it),
   then the repeat's body many times over, then a character that makes the rest fail,
   searched under :data:`TRIAL_TIMEOUT`. A pattern whose trial times out is reported
   with how it was caught; a candidate the trials cannot slow down (``(foo\\s+)+``,
   where each round must start with ``foo``) is accepted.

The trial strings are short (:data:`PUMP` repetitions), so a linear or polynomial
pattern finishes them in microseconds and only exponential backtracking exceeds the
limit.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

#: How long one trial search may take before the pattern counts as catastrophic (seconds).
#: Far above what a pattern that does not backtrack exponentially needs on these strings
#: (microseconds), far below the runner's per-search bound.
TRIAL_TIMEOUT = 0.05
#: How many times a candidate repeat's body is repeated in a trial string: 2**28 ways
#: to split it for a doubly nested repeat, out of reach of any time bound.
PUMP = 28
#: Upper bounds up to this are small enough not to count as "repeated" (``a{0,3}``).
SMALL_REPEAT = 4
#: Characters tried after the pumped text: each makes a typical rest (``$``, a literal)
#: fail, forcing the engine to try every split before it gives up.
_SPOILERS = ("!", "\x00", " ", "", "\n", "0")


def catastrophic(pattern: str) -> str | None:
    """How ``pattern`` was caught backtracking catastrophically, or None when it was not.

    A pattern that does not compile is None here (the configuration's own validation
    reports it). Never raises."""
    import importlib
    import sys

    # re's own parser: re._parser since 3.11 (sre_parse, its old name, warns there)
    sre_parse = importlib.import_module("re._parser" if sys.version_info >= (3, 11)
                                        else "sre_parse")
    try:
        import regex

        parsed = sre_parse.parse(pattern)
        compiled = regex.compile(pattern, flags=regex.VERSION0)
    except Exception:  # any parse failure: the configuration's validation reports it
        return None
    for prefix, body in _candidates(list(parsed), sre_parse):
        lead = _sample(prefix, sre_parse)
        pumped = _sample(body, sre_parse) or _sample(body, sre_parse, longest=True)
        if lead is None or not pumped:
            continue
        for spoiler in _SPOILERS:
            text = lead + pumped * PUMP + spoiler
            start = time.monotonic()
            try:
                compiled.search(text, timeout=TRIAL_TIMEOUT)
            except TimeoutError:
                return (f"a search of {len(text)} characters ({pumped[:20]!r} repeated "
                        f"{PUMP} times) took more than {TRIAL_TIMEOUT:g} s")
            except Exception:  # an engine limit (recursion, memory) is no catastrophe
                break
            if time.monotonic() - start > TRIAL_TIMEOUT:
                return (f"a search of {len(text)} characters took "
                        f"{time.monotonic() - start:.2f} s")
    return None


def _candidates(items: list[Any], sre: Any) -> Iterator[tuple[list[Any], list[Any]]]:
    """(what precedes it in its sequence, its body) for every repeat that may backtrack
    exponentially: unbounded (or large) repeats holding a repeat or an alternation."""
    for index, (op, av) in enumerate(items):
        before = items[:index]
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, _possessive(sre)):
            _low, high, body = av
            body = list(body)
            if (high is sre.MAXREPEAT or high > SMALL_REPEAT) and _ambiguous(body, sre):
                yield before, body
            for inner_before, inner in _candidates(body, sre):
                yield before + inner_before, inner
        for child in _children(op, av, sre):
            for inner_before, inner in _candidates(child, sre):
                yield before + inner_before, inner


def _possessive(sre: Any) -> Any:
    return getattr(sre, "POSSESSIVE_REPEAT", object())


def _ambiguous(body: list[Any], sre: Any) -> bool:
    """A body holding a repeat (not bounded small) or an alternation of several ways."""
    for op, av in body:
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and (av[1] is sre.MAXREPEAT or av[1] > 1):
            return True
        if op is sre.BRANCH:
            return True
        if any(_ambiguous(child, sre) for child in _children(op, av, sre)):
            return True
    return False


def _children(op: Any, av: Any, sre: Any) -> list[list[Any]]:
    """The sub-sequences of one parse item (groups, branches, lookarounds)."""
    if op is sre.SUBPATTERN:
        return [list(av[-1])]
    if op is sre.BRANCH:
        return [list(b) for b in av[1]]
    if op in (sre.ASSERT, sre.ASSERT_NOT):
        return [list(av[1])]
    if op is getattr(sre, "ATOMIC_GROUP", None):
        return [list(av)]
    if op is sre.GROUPREF_EXISTS:
        return [list(b) for b in av[1:] if b is not None]
    return []


_CATEGORY_SAMPLES = {"DIGIT": "0", "NOT_DIGIT": "a", "SPACE": " ", "NOT_SPACE": "a",
                     "WORD": "a", "NOT_WORD": " ", "LINEBREAK": "\n", "NOT_LINEBREAK": "a"}


def _sample(items: list[Any], sre: Any, *, longest: bool = False) -> str | None:
    """A short string the sequence matches (None: none found); ``longest`` takes one
    round of an optional repeat instead of none, so that a body of ``a*`` is ``a``."""
    out = []
    for op, av in items:
        if op is sre.LITERAL:
            out.append(chr(av))
        elif op is sre.NOT_LITERAL:
            out.append("a" if av != ord("a") else "b")
        elif op is sre.ANY:
            out.append("a")
        elif op is sre.IN:
            char = _class_sample(av, sre)
            if char is None:
                return None
            out.append(char)
        elif op is sre.CATEGORY:
            out.append(_CATEGORY_SAMPLES.get(str(av).removeprefix("CATEGORY_"), "a"))
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, _possessive(sre)):
            low, _high, body = av
            inner = _sample(list(body), sre, longest=longest)
            if inner is None:
                return None
            out.append(inner * max(low, 1 if longest else 0))
        elif op is sre.SUBPATTERN:
            inner = _sample(list(av[-1]), sre, longest=longest)
            if inner is None:
                return None
            out.append(inner)
        elif op is sre.BRANCH:
            inner = next((s for b in av[1] if (s := _sample(list(b), sre, longest=longest))
                          is not None), None)
            if inner is None:
                return None
            out.append(inner)
        elif op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
            continue  # zero width: the trial still works if it holds, and it may not
        else:
            return None  # back-references, conditionals: no trial
    return "".join(out)


def _class_sample(members: list[Any], sre: Any) -> str | None:
    """One character of a character class (``[^...]``: one outside what it lists)."""
    if members and members[0][0] is sre.NEGATE:
        listed = {chr(av) for op, av in members[1:] if op is sre.LITERAL}
        return next((c for c in "a0 !Z_" if c not in listed), None)
    for op, av in members:
        if op is sre.LITERAL:
            return chr(av)
        if op is sre.RANGE:
            return chr(av[0])
        if op is sre.CATEGORY:
            return _CATEGORY_SAMPLES.get(str(av).removeprefix("CATEGORY_"), "a")
    return None
