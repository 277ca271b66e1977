"""Start-up failure patterns per backend: the built-in defaults, the safety screen for
configured ones, and matching that is bounded in time.

A pattern is a regular expression searched in each line of a failure's output (``^``
and ``$`` match at line ends). When one matches, the failure is an infrastructure
failure whatever else it printed, and the matched line is its signature's key line.

The defaults come from failure texts seen in public issue threads (the citations are
in ``tests/fixtures/incidents/real_texts.py``): a device that is not there, a driver that
does not match its library, NCCL/RCCL transport errors, memory that another process
held before the test allocated anything, and container start or pull failures.

Configured patterns come from ``[backends.<name>] infra_patterns``, which a fork's pull
request can edit. They are screened when the configuration loads (length, nesting of
counted repeats, which is what makes a pattern expensive to compile) and matched with
the ``regex`` engine under a per-search timeout: a pattern that times out once is
switched off for the rest of the process with a warning, so a hostile pattern costs at
most ``SEARCH_TIMEOUT`` seconds, once. The defaults are matched with the standard
library, each only when its literal needle is in the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Each default: (needle, pattern). The needle must occur in the text (same case: the
#: patterns are case-sensitive, as the tools print these messages) for the pattern to be
#: tried, so a clean output costs a few substring searches.
Default = tuple[str, str]

_DEVICE_CUDA: tuple[Default, ...] = (
    ("CUDA-capable", r"no CUDA-capable device is detected"),
    ("NVIDIA driver", r"Found no NVIDIA driver on your system"),
    ("driver version is insufficient", r"CUDA driver version is insufficient for CUDA runtime version"),
    ("initialize NVML", r"Failed to initialize NVML"),
    ("nvml error", r"nvml error: driver/library version mismatch"),
    ("NVIDIA-SMI has failed", r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"),
    ("cudaError", r"\bcudaError(?:NoDevice|InsufficientDriver|DevicesUnavailable|SystemDriverMismatch)\b"),
    ("unknown error", r"CUDA error: unknown error|Cuda failure 999 'unknown error'"),
)
_DEVICE_ROCM: tuple[Default, ...] = (
    ("No HIP GPUs", r"No HIP GPUs are available"),
    ("hipError", r"\bhipError(?:NoDevice|InvalidDevice|NotInitialized|InsufficientDriver)\b"),
    ("HSA_STATUS_ERROR", r"\bHSA_STATUS_ERROR_(?:OUT_OF_RESOURCES|INVALID_AGENT|NOT_INITIALIZED)\b"),
    ("hsa api call failure", r"hsa api call failure"),
    ("ROCk module", r"ROCk module is NOT loaded"),
    ("/dev/kfd", r"(?:Unable to open|Failed to open|cannot open) /dev/kfd"),
    ("amdgpu", r"amdgpu not found in modules|Driver not initialized \(amdgpu"),
)
# NCCL and RCCL (RCCL prints NCCL's prefixes) transport and system errors.
_COLLECTIVES: tuple[Default, ...] = (
    ("ncclSystemError", r"\bncclSystemError\b"),
    ("ncclUnhandledCudaError", r"\bncclUnhandledCudaError\b"),
    ("ncclRemoteError", r"\bncclRemoteError\b"),
    ("NCCL error", r"NCCL error\b.*\bunhandled (?:system|cuda) error"),
    ("NCCL WARN", r"\bNCCL WARN\b.*(?:Cuda failure|NET/|[Ss]ocket|Connect|hipError)"),
)
# Memory the test never allocated: a context that cannot be created, or an allocator
# that finds the device full while this process holds nothing (a leftover process).
_OOM_AT_START_CUDA: tuple[Default, ...] = (
    ("CUDA error: out of memory", r"CUDA error: out of memory"),
    ("CUDA_ERROR_OUT_OF_MEMORY", r"\bCUDA_ERROR_OUT_OF_MEMORY\b"),
)
_OOM_AT_START_ROCM: tuple[Default, ...] = (
    ("HIP error: out of memory", r"HIP error: out of memory"),
    ("hipErrorOutOfMemory", r"\bhipErrorOutOfMemory\b"),
)
_OOM_HELD_ELSEWHERE: tuple[Default, ...] = (
    ("out of memory",
     r"out of memory\..*of which [\d.]+ (?:bytes|KiB|MiB) is free\.(?: Process \d+ has"
     r"| Including non-PyTorch memory, this process has [\d.]+ (?:bytes|KiB|MiB) memory in use"
     r"\. Of the allocated memory 0 bytes)"),
    ("out of memory", r"out of memory\..*; 0 bytes already allocated; [\d.]+ (?:bytes|KiB|MiB) free"),
)
# Containers that do not start, images that cannot be pulled, runners without disk.
_CONTAINER: tuple[Default, ...] = (
    ("Error response from daemon", r"Error response from daemon"),
    ("with capabilities", r"could not select device driver .* with capabilities"),
    ("OCI runtime", r"OCI runtime (?:create|exec) failed"),
    ("nvidia-container-cli", r"nvidia-container-cli: (?:initialization|mount|detection) error"),
    ("toomanyrequests", r"toomanyrequests: You have reached your (?:unauthenticated )?pull rate limit"),
    ("ImagePull", r"\b(?:ErrImagePull|ImagePullBackOff)\b"),
    ("ailed to pull image", r"[Ff]ailed to pull image"),
    ("No space left on device", r"No space left on device"),
)

DEFAULT_PATTERNS: dict[str, tuple[Default, ...]] = {
    "cuda": _DEVICE_CUDA + _COLLECTIVES + _OOM_AT_START_CUDA + _OOM_HELD_ELSEWHERE + _CONTAINER,
    "rocm": _DEVICE_ROCM + _COLLECTIVES + _OOM_AT_START_ROCM + _OOM_HELD_ELSEWHERE + _CONTAINER,
}
#: Any other backend (cpu, a configured npu): container and disk failures only.
OTHER_BACKENDS: tuple[Default, ...] = _CONTAINER


def defaults_for(backend: str) -> tuple[Default, ...]:
    return DEFAULT_PATTERNS.get(backend, OTHER_BACKENDS)


# -- screening configured patterns -------------------------------------------------------

MAX_PATTERN = 300  # characters
MAX_PATTERNS = 50  # per backend
#: The largest product of nested counted repeats (``(a{100}){100}`` is 10,000): the
#: ``regex`` engine expands them when compiling, for minutes and gigabytes past this.
MAX_REPEAT_PRODUCT = 1000


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` may not be used (None: it may). Pure, standard library only."""
    if not isinstance(pattern, str) or not pattern:
        return "a pattern must be a non-empty string"
    if len(pattern) > MAX_PATTERN:
        return f"longer than {MAX_PATTERN} characters"
    if any(ord(c) < 32 and c != "\t" for c in pattern):
        return "contains a control character"
    try:
        parsed = _parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"invalid regular expression: {exc}"
    product = _repeat_product(parsed)
    if product > MAX_REPEAT_PRODUCT:
        return (f"its counted repeats nest to {product} repetitions (at most "
                f"{MAX_REPEAT_PRODUCT}); write the repetition once")
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"invalid regular expression: {exc}"
    return None


def _parse(pattern: str) -> object:
    try:
        import re._parser as parser  # type: ignore[import-not-found]  # Python >= 3.11
    except ImportError:  # pragma: no cover - Python 3.10
        import sre_parse as parser
    return parser.parse(pattern)


def _repeat_product(items: object) -> int:
    """The largest product of finite repeat bounds along any nesting path (an unbounded
    repeat counts its lower bound)."""
    try:
        import re._constants as consts  # type: ignore[import-not-found]  # Python >= 3.11
    except ImportError:  # pragma: no cover - Python 3.10
        import sre_constants as consts
    repeats = {consts.MAX_REPEAT, consts.MIN_REPEAT, getattr(consts, "POSSESSIVE_REPEAT", None)}

    def subpatterns(arg: object) -> Iterable[object]:
        if hasattr(arg, "data"):
            yield arg
        elif isinstance(arg, (tuple, list)):
            for part in arg:
                yield from subpatterns(part)

    def walk(seq: object) -> int:
        best = 1
        for op, arg in seq:  # type: ignore[attr-defined]
            if op in repeats:
                low, high, sub = arg
                bound = low if high == consts.MAXREPEAT else high
                best = max(best, max(int(bound), 1) * walk(sub))
            else:
                best = max([best, *(walk(sub) for sub in subpatterns(arg))])
        return best

    return walk(items)


def patterns_problems(patterns: Sequence[str]) -> list[str]:
    """Every problem of a configured list, each naming its pattern."""
    out = [] if len(patterns) <= MAX_PATTERNS else [
        f"{len(patterns)} patterns; at most {MAX_PATTERNS} per backend"]
    for i, pattern in enumerate(patterns):
        problem = pattern_problem(pattern)
        if problem is not None:
            out.append(f"[{i}] {str(pattern)[:60]!r}: {problem}")
    return out


# -- matching ------------------------------------------------------------------------------

SEARCH_TIMEOUT = 0.05  # seconds per search of one configured pattern in one text


@dataclass(frozen=True)
class Match:
    """Which pattern matched, what it matched, and the whole line it matched in."""

    pattern: str
    matched: str
    line: str
    configured: bool


@dataclass
class InfraMatcher:
    """The patterns of one backend, compiled once per process (see :func:`matcher_for`)."""

    defaults: tuple[tuple[str, re.Pattern[str]], ...] = ()
    configured: list[tuple[str, Any]] = field(default_factory=list)  # regex.Pattern
    warnings: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.defaults and not self.configured

    def first(self, text: str) -> Match | None:
        """The match that starts earliest in ``text`` (the cause comes before its echoes)."""
        if not text:
            return None
        best: tuple[int, str, bool, int] | None = None
        for needle, compiled in self.defaults:
            if needle not in text:
                continue
            m = compiled.search(text)
            if m is not None and (best is None or m.start() < best[0]):
                best = (m.start(), compiled.pattern, False, m.end())
        for pattern, rx in list(self.configured):
            try:
                m = rx.search(text, timeout=SEARCH_TIMEOUT)
            except TimeoutError:
                self.configured = [(p, c) for p, c in self.configured if p != pattern]
                self.warnings.append(
                    f"infra pattern {pattern[:80]!r} took longer than {SEARCH_TIMEOUT * 1000:g} ms "
                    "on one output and is switched off for this run; simplify it")
                continue
            if m is not None and (best is None or m.start() < best[0]):
                best = (m.start(), pattern, True, m.end())
        if best is None:
            return None
        start = text.rfind("\n", 0, best[0]) + 1
        end = text.find("\n", best[3])
        return Match(best[1], text[best[0]:best[3]], text[start:end if end >= 0 else len(text)],
                     best[2])


_CACHE: dict[tuple[str, tuple[str, ...], bool], InfraMatcher] = {}


def matcher_for(backend: str, configured: Iterable[str] = (), use_defaults: bool = True) -> InfraMatcher:
    """The matcher of a backend's defaults (unless switched off) and configured patterns.
    Configured patterns that fail the screen or the ``regex`` compiler are left out with a
    warning: config validation refused them already, so this only happens to a caller
    that built the list by hand."""
    key = (backend, tuple(configured), use_defaults)
    found = _CACHE.get(key)
    if found is not None:
        return found
    defaults = tuple((needle, re.compile(p, re.MULTILINE)) for needle, p in defaults_for(backend)) \
        if use_defaults else ()
    matcher = InfraMatcher(defaults)
    if key[1]:
        import regex

        for pattern in key[1]:
            problem = pattern_problem(pattern)
            if problem is None:
                try:
                    matcher.configured.append((pattern, regex.compile(pattern, regex.MULTILINE)))
                    continue
                except (regex.error, RecursionError, OverflowError) as exc:
                    problem = str(exc)
            matcher.warnings.append(f"infra pattern {pattern[:80]!r} not used: {problem}")
    _CACHE[key] = matcher
    return matcher
