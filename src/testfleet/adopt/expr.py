"""A job's ``runs-on`` resolved statically, for adoption: the runner labels a
``${{ }}`` expression can only take one way, without running anything.

``runs_on`` takes literal labels, never an expression. Many workflows compute theirs
from values that are literals after all: a matrix dimension or an ``include`` list
(``runs-on: ${{ matrix.runner }}``), a fork guard written as a ternary of literals
(``${{ github.repository == 'org/x' && 'h100' || 'ubuntu-latest' }}``). This module
evaluates the expression over every matrix combination, with GitHub's semantics
(``&&``/``||`` return an operand; ``''``, ``0``, ``false`` and ``null`` are falsy),
keeping each value a run-time context could give (``needs.*``, ``inputs.*``,
``github.event_name``, ...) as *unknown*. A result is adopted only when it is one
literal label list per combination; anything else comes back with the reason.

Pure functions: the caller passes the parsed YAML values.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<str>'(?:[^']|'')*')"
                    r"|(?P<op>==|!=|<=|>=|&&|\|\||[!<>().,\[\]*])|(?P<id>[A-Za-z_][A-Za-z0-9_-]*))")
_EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
MAX_COMBINATIONS = 256
#: the repository a workflow runs in: a fork guard compares it with the project's own name
_REPOSITORY = ("github.repository", "github.repository_owner")


@dataclass(frozen=True)
class Unknown:
    """A value known only at run time (its context path names it)."""

    ref: str


class Unresolved(Exception):
    """The expression cannot be read statically (its message says why)."""


@dataclass
class _Eval:
    combo: Mapping[str, Any]
    #: context paths with a value for this evaluation (``github.event_name``, ...)
    contexts: Mapping[str, Any] = field(default_factory=dict)
    refs: list[str] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)
    tokens: list[tuple[str, Any]] = field(default_factory=list)
    pos: int = 0

    # -- tokens ---------------------------------------------------------------------
    def peek(self) -> tuple[str, Any] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, kind: str | None = None, value: Any = None) -> tuple[str, Any]:
        tok = self.peek()
        if tok is None or (kind and tok[0] != kind) or (value is not None and tok[1] != value):
            raise Unresolved("an expression this reader does not understand")
        self.pos += 1
        return tok

    def at(self, value: str) -> bool:
        tok = self.peek()
        return tok is not None and tok[0] == "op" and tok[1] == value

    # -- grammar: or := and ('||' and)*; and := cmp ('&&' cmp)*; cmp := unary (op unary)? ----
    def parse_or(self) -> list[Any]:
        left = self.parse_and()
        while self.at("||"):
            self.take()
            right = self.parse_and()
            out: list[Any] = []
            for v in left:
                truth = _truth(v)
                if True in truth:
                    out.append(v)
                if False in truth:
                    out += right
            left = _unique(out)
        return left

    def parse_and(self) -> list[Any]:
        left = self.parse_cmp()
        while self.at("&&"):
            self.take()
            right = self.parse_cmp()
            out: list[Any] = []
            for v in left:
                truth = _truth(v)
                if False in truth:
                    out.append(v)
                if True in truth:
                    out += right
            left = _unique(out)
        return left

    def parse_cmp(self) -> list[Any]:
        left = self.parse_unary()
        tok = self.peek()
        if tok and tok[0] == "op" and tok[1] in ("==", "!=", "<", ">", "<=", ">="):
            op = self.take()[1]
            right = self.parse_unary()
            out: list[Any] = []
            for a in left:
                for b in right:
                    out += self.compare(op, a, b)
            return _unique(out)
        return left

    def compare(self, op: str, a: Any, b: Any) -> list[Any]:
        if isinstance(a, Unknown) or isinstance(b, Unknown):
            known = b if isinstance(a, Unknown) else a
            ref = a.ref if isinstance(a, Unknown) else b.ref
            if ref in _REPOSITORY and isinstance(known, str) and op in ("==", "!="):
                self.assumed.append(f"{ref} == {known!r}")
                return [op == "=="]
            return [True, False]
        if op in ("==", "!="):
            same = (a.lower() == b.lower() if isinstance(a, str) and isinstance(b, str)
                    else _num(a) == _num(b) if type(a) is not type(b) else a == b)
            return [same if op == "==" else not same]
        x, y = _num(a), _num(b)
        return [{"<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y}[op]]

    def parse_unary(self) -> list[Any]:
        if self.at("!"):
            self.take()
            return _unique([not t for v in self.parse_unary() for t in _truth(v)])
        return self.parse_postfix()

    def parse_postfix(self) -> list[Any]:
        values, path = self.parse_primary()
        while self.at(".") or self.at("["):
            if self.take()[1] == ".":
                if self.at("*"):  # an object filter: labels.*.name
                    self.take()
                    keys: list[Any] = []
                    path = f"{path}.*" if path else None
                    values = [Unknown(path or "a value")]
                    continue
                name = self.take("id")[1]
                keys = [name]
                path = f"{path}.{name}" if path else None
            else:
                keys = self.parse_or()
                self.take("op", "]")
                path = None
            if path is not None and path.startswith("matrix.") and path.count(".") == 1:
                key = path.split(".", 1)[1]
                if key not in self.combo:
                    raise Unresolved(f"{path} is not a dimension of the job's matrix")
                values, path = [self.combo[key]], None
                continue
            out: list[Any] = []
            for v in values:
                for k in keys:
                    if isinstance(v, Mapping) and isinstance(k, str):
                        out.append(v.get(k))
                    elif (isinstance(v, list) and isinstance(k, (int, float))
                          and not isinstance(k, bool) and 0 <= int(k) < len(v)):
                        out.append(v[int(k)])
                    else:
                        out.append(Unknown(path or (v.ref if isinstance(v, Unknown) else "a value")))
            values = _unique(out)
        if path is not None and path in self.contexts:
            return [self.contexts[path]]
        for v in values:
            if isinstance(v, Unknown):
                self.refs.append(v.ref)
        return values

    def unknown(self, ref: str) -> Unknown:
        self.refs.append(ref)
        return Unknown(ref)

    def parse_primary(self) -> tuple[list[Any], str | None]:
        kind, value = self.take()
        if kind == "lit":
            return [value], None
        if kind == "op" and value == "(":
            inner = self.parse_or()
            self.take("op", ")")
            return inner, None
        if kind != "id":
            raise Unresolved("an expression this reader does not understand")
        if self.at("("):
            self.take()
            args: list[list[Any]] = []
            while not self.at(")"):
                args.append(self.parse_or())
                if self.at(","):
                    self.take()
            self.take("op", ")")
            return self.call(str(value), args), None
        return [Unknown(str(value))], str(value)

    def call(self, name: str, args: list[list[Any]]) -> list[Any]:
        lowered = name.lower()
        if lowered in ("always", "success", "failure", "cancelled") and not args:
            return [lowered in ("always", "success")]  # the jobs it needs went well
        known = all(len(a) == 1 and not isinstance(a[0], Unknown) for a in args)
        if lowered == "fromjson" and len(args) == 1 and known and isinstance(args[0][0], str):
            try:
                return [json.loads(args[0][0])]
            except ValueError as exc:
                raise Unresolved(f"fromJSON of a string that is not JSON: {exc}") from None
        if lowered in ("contains", "startswith", "endswith") and len(args) == 2:
            if not known:
                return [True, False]
            a, b = args[0][0], args[1][0]
            if lowered == "contains":
                return [any(str(x).lower() == str(b).lower() for x in a) if isinstance(a, list)
                        else str(b).lower() in str(a).lower()]
            method = str.startswith if lowered == "startswith" else str.endswith
            return [method(str(a).lower(), str(b).lower())]
        if lowered == "format" and args and known and isinstance(args[0][0], str):
            text = args[0][0]
            for i, a in enumerate(args[1:]):
                text = text.replace("{" + str(i) + "}", _string(a[0]))
            return [text]
        return [self.unknown(f"{name}(...)")]


def _num(v: Any) -> float:
    if v is None:
        return 0.0
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip()) if v.strip() else 0.0
        except ValueError:
            return float("nan")
    return float("nan")


def _truth(v: Any) -> set[bool]:
    if isinstance(v, Unknown):
        return {True, False}
    return {not (v is None or v is False or v == "" or (isinstance(v, (int, float)) and _num(v) == 0))}


def _key(v: Any) -> str:
    return f"?{v.ref}" if isinstance(v, Unknown) else json.dumps(v, sort_keys=True, default=str)


def _unique(values: list[Any]) -> list[Any]:
    seen: dict[str, Any] = {}
    for v in values:
        seen.setdefault(_key(v), v)
    return list(seen.values())


def _string(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return "" if v is None else str(v)


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise Unresolved("an expression this reader does not understand")
        pos = m.end()
        if m.group("num") is not None:
            out.append(("lit", float(m.group("num"))))
        elif m.group("str") is not None:
            out.append(("lit", m.group("str")[1:-1].replace("''", "'")))
        elif m.group("op") is not None:
            out.append(("op", m.group("op")))
        else:
            word = m.group("id")
            lit = {"true": True, "false": False, "null": None}
            out.append(("lit", lit[word]) if word in lit else ("id", word))
    return out


def evaluate(expression: str, combo: Mapping[str, Any],
             contexts: Mapping[str, Any] | None = None) -> tuple[list[Any], list[str], list[str]]:
    """Every value ``expression`` (the text inside ``${{ }}``) can take for one matrix
    combination, the run-time contexts it depends on, and the assumptions made."""
    ev = _Eval(combo=combo, contexts=contexts or {}, tokens=_tokens(expression))
    values = ev.parse_or()
    if ev.pos != len(ev.tokens):
        raise Unresolved("an expression this reader does not understand")
    return values, ev.refs, ev.assumed


def job_condition(condition: str, contexts: Mapping[str, Any]) -> list[Any]:
    """Every value a job's ``if:`` can take given some contexts (``github.event_name``,
    ``github.event.pull_request.labels.*.name``, ...), with the jobs it needs succeeding.
    Raises :class:`Unresolved` when the expression cannot be read."""
    text = condition.strip()
    whole = _EXPR.fullmatch(text)
    ev = _Eval(combo={}, contexts=contexts, tokens=_tokens(whole.group(1) if whole else text))
    values = ev.parse_or()
    if ev.pos != len(ev.tokens):
        raise Unresolved("an expression this reader does not understand")
    return values


def matrix_combinations(strategy: Any) -> list[dict[str, Any]]:
    """The job's matrix combinations (dimensions crossed, ``exclude`` removed, ``include``
    merged or added, as GitHub expands them); ``[{}]`` without a matrix."""
    matrix = strategy.get("matrix") if isinstance(strategy, Mapping) else None
    if matrix is None:
        return [{}]
    if not isinstance(matrix, Mapping):
        raise Unresolved("the job's matrix is computed at run time")
    dims: dict[str, list[Any]] = {}
    for key, values in matrix.items():
        if key in ("include", "exclude"):
            continue
        if not isinstance(values, list) or "${{" in json.dumps(values, default=str):
            raise Unresolved(f"matrix.{key} is computed at run time")
        dims[str(key)] = values
    combos: list[dict[str, Any]] = []
    if dims:
        n = 1
        for values in dims.values():
            n *= max(1, len(values))
        if n > MAX_COMBINATIONS:
            raise Unresolved(f"the matrix has more than {MAX_COMBINATIONS} combinations")
        combos = [dict(zip(dims, values, strict=True)) for values in itertools.product(*dims.values())]
    for entry in _entries(matrix.get("exclude")):
        combos = [c for c in combos if not all(c.get(k) == v for k, v in entry.items())]
    for entry in _entries(matrix.get("include")):
        fixed = {k: v for k, v in entry.items() if k in dims}
        matching = [c for c in combos if all(c.get(k) == v for k, v in fixed.items())] if dims else []
        if matching:
            for c in matching:
                c.update({k: v for k, v in entry.items() if k not in dims})
        else:
            combos.append(dict(entry))
    return combos or [{}]


def _entries(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(e, Mapping) for e in value) \
            or "${{" in json.dumps(value, default=str):
        raise Unresolved("the matrix's include/exclude list is computed at run time")
    return [{str(k): v for k, v in e.items()} for e in value]


def _text_value(text: str, combo: Mapping[str, Any], assumed: list[str],
                contexts: Mapping[str, Any] | None = None) -> Any:
    """A string with ``${{ }}`` parts, as its one possible value."""
    whole = _EXPR.fullmatch(text.strip())
    parts = [whole.group(1)] if whole else None
    if parts is not None:
        values, refs, used = evaluate(parts[0], combo, contexts)
        assumed += used
        return _one(values, refs)
    out, last = [], 0
    for m in _EXPR.finditer(text):
        out.append(text[last:m.start()])
        values, refs, used = evaluate(m.group(1), combo, contexts)
        assumed += used
        value = _one(values, refs)
        if isinstance(value, (list, Mapping)):
            raise Unresolved("a list inside a longer label")
        out.append(_string(value))
        last = m.end()
    out.append(text[last:])
    return "".join(out)


def _one(values: list[Any], refs: list[str]) -> Any:
    if any(isinstance(v, Unknown) for v in values) or not values:
        names = sorted({r for r in refs} | {v.ref for v in values if isinstance(v, Unknown)})
        raise Unresolved(f"computed at run time from {', '.join(names[:4])}")
    if len(values) > 1:
        shown = ", ".join(repr(_string(v)) if not isinstance(v, list) else json.dumps(v) for v in values[:4])
        depends = sorted(set(refs))
        raise Unresolved(f"one of {shown}, depending on {', '.join(depends[:4]) or 'the run'}")
    return values[0]


def _labels(value: Any) -> list[str]:
    if isinstance(value, str) and value.strip():
        return [value.strip()]
    if isinstance(value, list) and value and all(isinstance(x, str) and x.strip() for x in value):
        return [x.strip() for x in value]
    raise Unresolved(f"not runner labels: {json.dumps(value, default=str)[:60]}")


def resolve_runs_on(runs_on: Any, strategy: Any,
                    contexts: Mapping[str, Any] | None = None) -> tuple[list[list[str]], list[str]]:
    """The distinct label lists ``runs_on`` takes over the job's matrix combinations (in
    order of first use), and the assumptions made (a fork guard's repository name).
    ``contexts`` are values known for the run (``inputs.x``: null outside a manual run).
    Raises :class:`Unresolved` with the reason when any combination's labels are not
    literals after evaluation."""
    assumed: list[str] = []
    found: dict[str, list[str]] = {}
    for combo in matrix_combinations(strategy):
        if isinstance(runs_on, str):
            labels = _labels(_text_value(runs_on, combo, assumed, contexts))
        elif isinstance(runs_on, list):
            labels = []
            for item in runs_on:
                value = _text_value(item, combo, assumed, contexts) if isinstance(item, str) else item
                labels += _labels(value)
        else:
            raise Unresolved("not a label, a list of labels or a matrix value")
        found.setdefault(json.dumps(labels), labels)
    return list(found.values()), sorted(set(assumed))
