"""Turn one file's scan into registrations, gate calls and findings.

Pure functions of (path, scan, rules): the result of a file depends on nothing
else, which is what lets :mod:`testfleet.registry.cache` store it per file.
Every problem of a call is reported, not only the first, each with the line and
column of the argument at fault and what would be valid.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from testfleet.findings import Finding
from testfleet.registry import scan as sc
from testfleet.registry.model import MAX_EST_TIME, GateCall, InvalidRegistration, Registration
from testfleet.registry.result import FileResult
from testfleet.registry.rules import Rules, Signature

_MISSING = object()


class _Sink:
    """Collects one file's findings; calling it records one."""

    __slots__ = ("errors", "findings", "rel")

    def __init__(self, rel: str, findings: list[Finding]) -> None:
        self.rel = rel
        self.findings = findings
        self.errors = 0

    def __call__(self, line: int, col: int, code: str, message: str, severity: str = "error") -> None:
        self.findings.append(Finding(self.rel, line, col, severity, code, message))  # type: ignore[arg-type]
        if severity == "error":
            self.errors += 1


# A user value echoed in a message is cut beyond this many characters: a 5,000-character
# label would otherwise fill the terminal (and a CI annotation) with itself.
ECHO_LIMIT = 80
ECHO_KEEP = 60


def echo(value: object) -> str:
    """``repr(value)`` for a message, short values exactly; a long one cut to its first
    ``ECHO_KEEP`` characters and its length (``'aaaa…'… (5000 characters)``)."""
    if isinstance(value, str):
        if len(value) <= ECHO_LIMIT:
            return repr(value)
        return f"{value[:ECHO_KEEP]!r}… ({len(value)} characters)"
    text = repr(value)
    if len(text) <= ECHO_LIMIT:
        return text
    return f"{text[:ECHO_KEEP]}… ({len(text)} characters)"


def did_you_mean(value: str, choices: list[str] | tuple[str, ...]) -> str:
    import difflib  # only when there is a mistake to explain

    close = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def validate_file(rel: str, scanned: sc.FileScan, rules: Rules) -> FileResult:
    """Registrations, gates and findings for one discovered file."""
    out = FileResult()
    if (not scanned.calls and not scanned.others and not scanned.syntax_errors
            and scanned.decode_error is None and not scanned.suppressions):
        return _unreadable(rel, scanned, _without_markers(rel, scanned, rules, out))
    err = _Sink(rel, out.findings)
    out.suppressions = scanned.suppressions

    if scanned.decode_error is not None:
        err(0, 0, "encoding", f"file is not UTF-8 ({scanned.decode_error}); testfleet reads test files as UTF-8")
        return out
    for line, col, message in scanned.syntax_errors:
        err(line, col, "syntax", message)

    implicit = rules.implicit_for(rel)
    called_backends: set[str] = set()
    # (backend, stage) -> (line, marker) of the registration that took it: a file registers
    # once per stage, but may register several times for one backend (#12).
    taken: dict[tuple[str, str], tuple[int, str]] = {}
    explicit: list[Registration] = []
    for call in scanned.calls:
        if call.name == rules.gate_marker:
            out.gates.append(_gate(rel, call))
            continue
        backend = rules.marker_backend[call.name]
        called_backends.add(backend)
        first = len(out.findings)
        reg: Registration | None = None
        if implicit is not None and backend != implicit.backend:
            err(call.line, call.col, "backend-in-implicit",
                f"{call.name}(...) in {implicit.path!r}, an implicit {implicit.backend} directory "
                f"(every file there runs on {implicit.backend} in {implicit.suite!r}); move this "
                f"{backend} test out of {implicit.path!r}")
            suite = _suite_guess(call)
        else:
            reg, suite = _registration(rel, call, backend, rules, err)
        if reg is not None:
            prev = taken.get((backend, reg.suite))
            if prev is not None:
                shown = echo(reg.suite) if reg.suite else "'' (run by path only)"
                err(call.line, call.col, "duplicate-stage",
                    f"second {backend} registration of this file for stage {shown} ({call.name} here, "
                    f"{prev[1]} at line {prev[0]}); a file registers at most once per stage "
                    "(register it for another stage, or remove one)")
                reg = None
            else:
                taken[(backend, reg.suite)] = (call.line, call.name)
                explicit.append(reg)
        if reg is None:
            _invalid(rel, call, backend, suite, out, first)

    _explain_unread(scanned, rules, called_backends, out.gates, err)

    out.registrations.extend(explicit)
    if implicit is not None and implicit.backend not in called_backends:
        out.registrations.append(Registration(
            file=rel, backend=implicit.backend, suite=implicit.suite, est_time=implicit.est_time,
            labels=implicit.labels, implicit=True,
        ))
    if not out.registrations and not called_backends and not any(
        f.severity == "error" for f in out.findings
    ):
        err(0, 0, "unregistered", _unregistered_message(rules))
    _python_main(rel, scanned, rules, out)
    out.registrations.sort(key=lambda r: (r.backend, r.suite))
    return _unreadable(rel, scanned, out)


def _unreadable(rel: str, scanned: sc.FileScan, out: FileResult) -> FileResult:
    """A file Python cannot read (a NUL byte, a bad encoding cookie) runs nowhere: one
    error where it breaks, and every registration it makes, explicit or implicit, is
    invalid with that error, so ``list`` shows, ``plan`` skips and ``check`` fails the
    same file (#36)."""
    if scanned.unreadable is None:
        return out
    line, col, code, message = scanned.unreadable
    out.findings = [f for f in out.findings if f.code != "no-main-call"]  # it never runs
    out.findings.append(Finding(rel, line, col, "error", code, message))
    for reg in out.registrations:
        out.invalid.append(InvalidRegistration(rel, reg.backend, reg.suite, reg.line or line,
                                               reg.col if reg.line else col, code, message))
    out.registrations = []
    return out


def _invalid(rel: str, call: sc.MarkerCall, backend: str, suite: str, out: FileResult, first: int) -> None:
    """Record a rejected call with its first error: it becomes the fate ``invalid``."""
    error = next((f for f in out.findings[first:] if f.severity == "error"), None)
    if error is None:  # every path that rejects a call reports an error; keep the call visible anyway
        return
    out.invalid.append(InvalidRegistration(rel, backend, suite, call.line, call.col, error.code, error.message))


def _suite_guess(call: sc.MarkerCall) -> str:
    """The suite a rejected call names, when it is written as a plain string (else '')."""
    node = call.node
    for kw in node.keywords:
        if kw.arg == "suite" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            return kw.value.value
    if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
        return node.args[1].value
    return ""


def _without_markers(rel: str, scanned: sc.FileScan, rules: Rules, out: FileResult) -> FileResult:
    """The commonest case by far (an implicit-directory file), without the general machinery."""
    implicit = rules.implicit_for(rel)
    if implicit is None:
        out.findings.append(Finding(rel, 0, 0, "error", "unregistered", _unregistered_message(rules)))
        return out
    out.registrations.append(Registration(
        file=rel, backend=implicit.backend, suite=implicit.suite, est_time=implicit.est_time,
        labels=implicit.labels, implicit=True,
    ))
    _python_main(rel, scanned, rules, out)
    return out


def _unregistered_message(rules: Rules) -> str:
    markers = ", ".join(sorted(m for m in rules.markers if m != rules.gate_marker))
    where = f"; implicit directories: {', '.join(r.path for r in rules.implicit)}" if rules.implicit else ""
    return ("test file has no registration: add a top-level call such as "
            "register_cpu_ci(est_time=..., suite=...) (markers: " + markers + "), move it into an "
            "implicit directory, or add it to 'exclude'" + where)


def runs_as_script(command: str) -> bool:
    """``python`` or a template that is not pytest (``python3 {file} -f``, ``torchrun ...``)."""
    from testfleet.commands import AUTO, is_pytest

    return command != AUTO and not is_pytest(command)


def _python_main(rel: str, scanned: sc.FileScan, rules: Rules, out: FileResult) -> None:
    """A ``python FILE`` stage passes a file with no main block without running a test."""
    if not rules.python_main_check or scanned.has_main_call:
        return
    for reg in out.registrations:
        if reg.disabled:
            continue  # it does not run: a missing main block changes nothing until it is enabled
        stage = rules.stages.get(reg.suite)
        if stage is not None and runs_as_script(stage.command):
            out.findings.append(Finding(
                rel, reg.line, reg.col, "warning", "no-main-call",
                f"stage {reg.suite!r} runs files as "
                f"{'`python FILE`' if stage.command == 'python' else repr(stage.command)}, "
                "but this file has no "
                "`if __name__ == \"__main__\":` block that calls anything: it would exit 0 "
                "without running a test",
            ))
            return


def _explain_unread(scanned: sc.FileScan, rules: Rules, called: set[str],
                    gates: list[GateCall], err: _Sink) -> None:
    """A marker named in code without a top-level call for its backend: say why."""
    by_backend: dict[str, list[sc.Occurrence]] = {}
    for occ in scanned.others:
        key = rules.gate_marker if occ.name == rules.gate_marker else rules.marker_backend[occ.name]
        by_backend.setdefault(key, []).append(occ)
    for key, occs in sorted(by_backend.items()):
        reported = False
        for occ in occs:
            if occ.kind == sc.MENTION:
                continue
            reported = True
            if occ.in_function:
                # A unit test of the marker itself, most likely: nothing to register, but say it.
                err(occ.line, occ.col, "marker-in-function",
                    _unread_message(occ) + " (inside a function: fine for a test of the marker itself)",
                    "warning")
                continue
            err(occ.line, occ.col, "marker-not-read", _unread_message(occ))
        has_call = bool(gates) if key == rules.gate_marker else key in called
        if not reported and not has_call:
            occ = occs[0]
            err(occ.line, occ.col, "marker-not-called",
                f"{occ.name} is named here but this file has no top-level {occ.name}(...) call; "
                "add the call at module level or remove the unused name")


def _unread_message(occ: sc.Occurrence) -> str:
    tail = "testfleet reads only top-level statements `name(...)` and would ignore this"
    if occ.kind == sc.INDENTED_CALL:
        return f"{occ.name}(...) is called inside {occ.detail}, not at module level; {tail}"
    if occ.kind == sc.ATTRIBUTE_CALL:
        return (f"attribute call {occ.detail}(...); {tail}: import the name "
                f"(from ... import {occ.name}) and call {occ.name}(...)")
    if occ.kind == sc.ALIASED_IMPORT:
        return (f"{occ.name} is imported as {echo(occ.detail)}; markers are recognised by their own "
                f"name, so calls to {occ.detail}(...) would be ignored: import it without 'as'")
    return (f"{occ.name}(...) is part of a larger statement or expression ({echo(occ.detail)}); "
            f"{tail}: write it as a statement of its own at module level")


def _quick_literal(node: ast.AST) -> Any:
    """The shapes registrations actually use, without ``literal_eval``'s generality;
    anything else raises ``LookupError`` and goes the long way."""
    kind = type(node)
    if kind is ast.Constant:
        return node.value  # type: ignore[attr-defined]
    if kind is ast.List or kind is ast.Tuple:
        values = []
        for elt in node.elts:  # type: ignore[attr-defined]
            if type(elt) is not ast.Constant:
                raise LookupError
            values.append(elt.value)
        return values if kind is ast.List else tuple(values)
    raise LookupError


def _literal(call: sc.MarkerCall, node: ast.AST, what: str, err: _Sink) -> Any:
    try:
        return _quick_literal(node)
    except LookupError:
        pass
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        err(getattr(node, "lineno", call.line), getattr(node, "col_offset", 0) + 1, "non-literal",
            f"{what} of {call.name} must be a literal, got `{call.segment(node)[:60]}`: testfleet "
            "reads registrations without running the file")
        return _MISSING


_DEFAULTS = {"labels": "None", "nightly": "False", "disabled": "None"}


def _and(names: list[str] | tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _shape(marker: str, sig: Signature) -> str:
    """The call signature a message quotes, e.g. ``m(est_time, suite, *, labels=None, ...)``."""
    kw_only = [k for k in sig.keywords if k not in sig.positional and k not in sig.ignore]
    tail = ", ".join(f"{k}={_DEFAULTS.get(k, 'None')}" for k in kw_only)
    return f"{marker}({', '.join(sig.positional)}" + (f", *, {tail}" if tail else "") + ")"


def _registration(rel: str, call: sc.MarkerCall, backend: str, rules: Rules,
                  err: _Sink) -> tuple[Registration | None, str]:
    """The registration a call makes (None if it is invalid) and the suite it names ('' if unknown)."""
    node = call.node
    sig = rules.signature_of(call.name)
    positional = sig.positional
    keywords = sig.keywords
    before = err.errors
    values: dict[str, Any] = {}
    where: dict[str, ast.AST] = {}
    for i, arg in enumerate(node.args):
        if isinstance(arg, ast.Starred):
            err(arg.lineno, arg.col_offset + 1, "starred-argument",
                f"*{call.segment(arg.value)[:40]} in {call.name}(...): arguments must be written out "
                "as literals")
            continue
        if i >= len(positional):
            rest = [k for k in keywords if k not in positional and k not in sig.ignore]
            err(arg.lineno, arg.col_offset + 1, "too-many-positional",
                f"{call.name}(...) takes at most {len(positional)} positional argument"
                f"{'s' * (len(positional) != 1)} ({', '.join(positional)})"
                + (f"; {_and(rest)} {'are' if len(rest) > 1 else 'is'} keyword-only" if rest else ""))
            continue
        values[positional[i]] = _literal(call, arg, f"argument {positional[i]!r}", err)
        where[positional[i]] = arg
    for kw in node.keywords:
        if kw.arg is None:
            err(kw.lineno, kw.col_offset + 1, "starred-argument",
                f"**{call.segment(kw.value)[:40]} in {call.name}(...): arguments must be written out "
                "as literals")
            continue
        if kw.arg not in keywords:
            err(kw.lineno, kw.col_offset + 1, "unknown-keyword",
                f"unknown keyword {echo(kw.arg)}{did_you_mean(kw.arg, keywords)}; valid: "
                f"{_cut_list(keywords)}" + ("" if sig.extra or sig.ignore else
                                            " (a project's own keywords are declared in "
                                            f"[tool.testfleet.markers.{call.name}] or "
                                            "[tool.testfleet.backends."
                                            f"{rules.marker_backend.get(call.name, '<name>')}"
                                            ".signature])"))
            continue
        if kw.arg in where:
            how = "twice" if not any(a is where[kw.arg] for a in node.args) else "positionally and as keyword"
            err(kw.lineno, kw.col_offset + 1, "duplicate-keyword", f"{echo(kw.arg)} is given {how}")
            continue
        where[kw.arg] = kw.value
        if kw.arg in sig.ignore:
            continue  # declared as ignored: not read, so it need not even be a literal
        values[kw.arg] = _literal(call, kw.value, f"argument {kw.arg!r}", err)

    def at(name: str) -> tuple[int, int]:
        n = where[name]
        return n.lineno, n.col_offset + 1  # type: ignore[attr-defined]

    fields = sig.template_fields
    composed = [f for f in fields if f in where]
    if composed and "suite" in where:
        err(*at("suite"), "suite-conflict",
            f"{call.name}(...) gives both suite and {_and(composed)}, which compose the suite "
            f"({sig.suite_template!r}); give one or the other")
    elif composed and len(composed) < len(fields):
        missing = [f for f in fields if f not in where]
        err(call.line, call.col, "missing-argument",
            f"{call.name}(...) gives {_and(composed)} but not {_and(missing)}: the suite is composed as "
            f"{sig.suite_template!r}")
    required = ("est_time",) if composed else ("est_time", "suite")
    for name in required:
        if name not in where and not _any_starred(node):
            either = f" (or {_and(fields)})" if name == "suite" and fields else ""
            err(call.line, call.col, "missing-argument",
                f"{call.name}(...) is missing {name!r}{either} (signature: {_shape(call.name, sig)})")

    est = values.get("est_time", _MISSING)
    if est is not _MISSING:
        if isinstance(est, bool) or not isinstance(est, (int, float)):
            err(*at("est_time"), "wrong-type", f"est_time must be a number of seconds, got {echo(est)}")
        elif sig.allow_zero_est_time and _finite_zero(est):
            pass
        elif not _finite_positive(est):
            floor = ">= 0" if sig.allow_zero_est_time else "> 0"
            err(*at("est_time"), "est-time-range", f"est_time must be a finite number {floor}, got {_short(est)}")
        elif est > MAX_EST_TIME:
            err(*at("est_time"), "est-time-range",
                f"est_time must be at most {MAX_EST_TIME:.0f} seconds (7 days), got {_short(est)}")
    for name, kind in sig.extra:
        value = values.get(name, _MISSING)
        if value is not _MISSING and value is not None and not _is_type(value, kind):
            err(*at(name), "wrong-type", f"{name} must be {_TYPE_WORDS[kind]} or None, got {echo(value)}")
    suite: Any = _MISSING
    suite_at = at("suite") if "suite" in where else (call.line, call.col)
    types = dict(sig.extra)
    if composed and len(composed) == len(fields) and "suite" not in where:
        parts = {f: values.get(f, _MISSING) for f in fields}
        if all(_is_type(v, types[f]) for f, v in parts.items()):
            suite = sig.suite_template.format(**parts)  # type: ignore[union-attr]
        suite_at = at(composed[0])
    elif not composed:
        suite = values.get("suite", _MISSING)
    guess = suite if isinstance(suite, str) else ""
    if suite is not _MISSING:
        if not isinstance(suite, str):
            err(*suite_at, "wrong-type", f"suite must be a string naming a stage, got {echo(suite)}")
        elif suite == "" and sig.allow_empty_suite:
            pass  # run by path only: no stage schedules it, only an explicit --file request
        else:
            _check_suite(suite, backend, call.name, rules, suite_at, err)
    labels = values.get("labels")
    label_tuple: tuple[str, ...] = ()
    if labels is not _MISSING and labels is not None:
        if not isinstance(labels, (list, tuple)):
            err(*at("labels"), "wrong-type", f"labels must be a list of strings or None, got {echo(labels)}")
        else:
            label_tuple = _check_labels(labels, where["labels"], rules, err)
    if (labels is None or (isinstance(labels, (list, tuple)) and not labels)) and rules.labels_required.get(backend):
        line, col = at("labels") if "labels" in where else (call.line, call.col)
        err(line, col, "labels-required",
            f"{backend} registrations need at least one label (labels=[...]); valid labels: "
            f"{_label_list(rules)}")
    nightly = values.get("nightly", False)
    if nightly is not _MISSING and nightly is not None and not isinstance(nightly, bool):
        err(*at("nightly"), "wrong-type", f"nightly must be True or False, got {echo(nightly)}")
    disabled = values.get("disabled")
    if disabled is not _MISSING and disabled is not None:
        if not isinstance(disabled, str):
            err(*at("disabled"), "wrong-type",
                f"disabled must be a reason string or None, got {echo(disabled)}")
        elif not disabled.strip():
            err(*at("disabled"), "empty-disabled",
                "disabled needs a non-empty reason (say why and how it comes back), or remove it")
        elif not _encodable(disabled):
            # a lone surrogate ("\ud800") passes Python but no UTF-8 output can hold it:
            # list, plan and the HTML report would crash on it later
            err(*at("disabled"), "bad-text",
                f"disabled holds a lone surrogate ({echo(disabled)}), which no output can "
                "encode; write the reason as plain text")
    disabled_on: tuple[str, ...] = ()
    disabled_on_reason: str | None = None
    runners = values.get(sig.disabled_on_runners) if sig.disabled_on_runners else None
    if runners is not None and runners is not _MISSING and _is_type(runners, "list[str]") and runners \
            and sig.runner_disable_of_its_own:
        given = values.get(sig.disabled_on_runners_reason) if sig.disabled_on_runners_reason else None
        if isinstance(given, str) and not given.strip():
            err(*at(str(sig.disabled_on_runners_reason)), "empty-disabled",
                f"{sig.disabled_on_runners_reason} needs a non-empty reason, or remove it (the "
                "default reason is used then)")
        else:
            disabled_on = tuple(runners)
            disabled_on_reason = given if isinstance(given, str) else \
                (sig.disabled_on_runners_default or DEFAULT_RUNNER_REASON)
    elif runners is not None and runners is not _MISSING and _is_type(runners, "list[str]") and runners:
        if not isinstance(disabled, str) or not disabled.strip():
            err(*at(str(sig.disabled_on_runners)), "missing-argument",
                f"{sig.disabled_on_runners}={echo(runners)} narrows disabled to those runners: "
                "give the reason too (disabled=\"why, and how it comes back\")")
        else:
            disabled_on = tuple(runners)
    if err.errors != before:
        return None, guess
    return Registration(
        file=rel, backend=backend, suite=suite, est_time=float(est), line=call.line, col=call.col,
        labels=label_tuple, nightly=bool(nightly), disabled=disabled, implicit=False,
        disabled_on=disabled_on, disabled_on_reason=disabled_on_reason,
    ), guess


#: the reason of a per-runner disable when neither the call nor the signature gives one
DEFAULT_RUNNER_REASON = "disabled on runner matching '{pattern}'"

_TYPE_WORDS = {"str": "a string", "int": "an integer", "number": "a number", "bool": "True or False",
               "list[str]": "a list of strings"}


def _is_type(value: Any, kind: str) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "int":
        return isinstance(value, int)
    if kind == "number":
        return isinstance(value, (int, float))
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


# Lists of valid names in a message stop after this many, with a count of the rest.
LIST_LIMIT = 12


def _cut_list(names: list[str] | tuple[str, ...], limit: int = LIST_LIMIT) -> str:
    """``a, b, c`` or, past ``limit`` names, the first ones and ``... (N more)``."""
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown}, ... ({len(names) - limit} more)"


def _finite_zero(value: float) -> bool:
    try:
        return math.isfinite(value) and value == 0
    except OverflowError:
        return False


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _short(value: object) -> str:
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else f"an int of {len(str(abs(value)))} digits"
    return text if len(text) <= 80 else text[:77] + "..."


def _finite_positive(value: float) -> bool:
    try:
        return math.isfinite(value) and value > 0
    except OverflowError:  # an int too large for a float
        return False


def _any_starred(node: ast.Call) -> bool:
    return any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords)


def _check_suite(suite: str, backend: str, marker: str, rules: Rules, at: tuple[int, int], err: _Sink) -> None:
    stage = rules.stages.get(suite)
    if stage is not None and backend in (stage.backends or (stage.backend,)):
        return
    own = rules.stages_of(backend)
    valid = f"valid {backend} stages: {_cut_list(own)}" if own else (
        f"no stage is configured for backend {backend!r} (add one with backend = {backend!r})")
    if stage is None:
        hint = did_you_mean(suite, own) or did_you_mean(suite, sorted(rules.stages))
        empty = (f"; an empty suite (run by path only) needs allow_empty_suite = true in "
                 f"[tool.testfleet.markers.{marker}]") if suite == "" else ""
        err(*at, "unknown-suite", f"suite {echo(suite)} is not a configured stage{hint}; {valid}{empty}")
    else:
        err(*at, "suite-backend",
            f"suite {echo(suite)} is a {'/'.join(stage.backends or (stage.backend,))} stage, but "
            f"{marker} registers for {backend}; {valid} (one suite name under two backends: give "
            f"stage {echo(suite)} a variant with backend = {backend!r})")


def _label_list(rules: Rules) -> str:
    return _cut_list(rules.labels) if rules.labels else "(none configured: add [tool.testfleet.labels])"


def _check_labels(labels: list[Any] | tuple[Any, ...], node: ast.AST, rules: Rules, err: _Sink) -> tuple[str, ...]:
    elts = getattr(node, "elts", None) or [node] * len(labels)
    seen: list[str] = []
    for value, elt in zip(labels, elts, strict=False):
        line, col = getattr(elt, "lineno", 0), getattr(elt, "col_offset", 0) + 1
        if not isinstance(value, str):
            err(line, col, "wrong-type", f"label {echo(value)} is not a string")
            continue
        if value not in rules.labels:
            err(line, col, "unknown-label",
                f"unknown label {echo(value)}{did_you_mean(value, rules.labels)}; valid labels: {_label_list(rules)}")
            continue
        if value in seen:
            err(line, col, "duplicate-label", f"label {echo(value)} is listed twice", "warning")
            continue
        seen.append(value)
    return tuple(seen)


def _gate(rel: str, call: sc.MarkerCall) -> GateCall:
    kwargs: dict[str, Any] = {}
    non_literal: list[str] = []
    for kw in call.node.keywords:
        name = kw.arg if kw.arg is not None else "**"
        try:
            kwargs[name] = _gate_literal(kw.value, 0)
        except LookupError:
            try:
                kwargs[name] = ast.literal_eval(kw.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                non_literal.append(name)
    return GateCall(file=rel, line=call.line, col=call.col, kwargs=kwargs,
                    positional=len(call.node.args), non_literal=tuple(non_literal),
                    duplicate_keys=duplicate_constraint_keys(call.node))


_NUMBERS = (int, float, complex)
_SIGNS = (ast.USub, ast.UAdd)


def _gate_literal(node: ast.AST, depth: int) -> Any:
    """What ``literal_eval`` gives for the shapes gate arguments use (constants, and lists,
    tuples and string-keyed dicts of them, signed numbers), at a fraction of its cost: a
    gate-heavy tree declares tens of thousands of gates. Anything else (sets, a ``**`` in a
    dict, a complex sum, deep nesting) raises ``LookupError`` and goes to ``literal_eval``,
    which decides, errors included."""
    kind = type(node)
    if kind is ast.Constant:
        return node.value  # type: ignore[attr-defined]
    if depth > 8:
        raise LookupError
    if kind is ast.List:
        return [_gate_literal(e, depth + 1) for e in node.elts]  # type: ignore[attr-defined]
    if kind is ast.Tuple:
        return tuple(_gate_literal(e, depth + 1) for e in node.elts)  # type: ignore[attr-defined]
    if kind is ast.Dict:
        out = {}
        for key, value in zip(node.keys, node.values, strict=True):  # type: ignore[attr-defined]
            if type(key) is not ast.Constant:
                raise LookupError
            out[key.value] = _gate_literal(value, depth + 1)
        return out
    if kind is ast.UnaryOp and type(node.op) in _SIGNS:  # type: ignore[attr-defined]
        operand = node.operand  # type: ignore[attr-defined]
        number = operand.value if type(operand) is ast.Constant else None
        if isinstance(number, _NUMBERS) and type(number) in _NUMBERS:  # not bool
            return -number if type(node.op) is ast.USub else +number  # type: ignore[attr-defined]
    raise LookupError


def duplicate_constraint_keys(node: ast.Call) -> tuple[str, ...]:
    """``repr`` of each key a literal ``constraint={...}`` writes more than once."""
    dups: list[str] = []
    for kw in node.keywords:
        if kw.arg != "constraint" or not isinstance(kw.value, ast.Dict):
            continue
        seen: set[object] = set()
        for key in kw.value.keys:
            if isinstance(key, ast.Constant):
                if key.value in seen:
                    dups.append(repr(key.value))
                seen.add(key.value)
    return tuple(dups)
