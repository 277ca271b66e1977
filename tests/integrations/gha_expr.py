"""A small evaluator of GitHub Actions expressions, for testing the conditions the
generated workflow relies on (label gating, concurrency groups, wave gating).

It implements the subset the workflow uses, with GitHub's semantics: ``&&``/``||``
return an operand, ``==`` compares strings case-insensitively and coerces mixed
types to numbers, falsy values are ``false``, ``0``, ``''`` and ``null``;
functions ``startsWith``, ``format``, ``join``, ``fromJSON`` and the status
functions, whose results the caller supplies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

_TOKEN = re.compile(r"\s*(?:(?P<num>-?\d+(?:\.\d+)?)|(?P<str>'(?:[^']|'')*')|(?P<op>==|!=|<=|>=|&&|\|\||[!<>().,\[\]*])|(?P<id>[A-Za-z_][A-Za-z0-9_-]*))")


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise SyntaxError(f"bad expression at {text[pos:pos + 20]!r}")
        pos = m.end()
        if m.group("num") is not None:
            out.append(("lit", float(m.group("num"))))
        elif m.group("str") is not None:
            out.append(("lit", m.group("str")[1:-1].replace("''", "'")))
        elif m.group("op") is not None:
            out.append(("op", m.group("op")))
        else:
            word = m.group("id")
            if word in ("true", "false"):
                out.append(("lit", word == "true"))
            elif word == "null":
                out.append(("lit", None))
            else:
                out.append(("id", word))
    return out


def truthy(v: Any) -> bool:
    return v not in (False, 0, "", None) and not (isinstance(v, float) and v != v)


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


def _eq(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if type(a) is type(b) or (a is None and b is None):
        return a == b
    return _num(a) == _num(b)


def _str(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (dict, list)):
        return json.dumps(v)
    return str(v)


class _Parser:
    def __init__(self, text: str, ctx: dict[str, Any], status: dict[str, bool]) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.ctx = ctx
        self.status = status

    def peek(self) -> tuple[str, Any] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, Any]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise SyntaxError(f"expected {value!r}, got {tok!r}")
        self.i += 1
        return tok

    def parse(self) -> Any:
        v = self.or_()
        if self.peek() is not None:
            raise SyntaxError(f"trailing {self.peek()!r}")
        return v

    def or_(self) -> Any:
        v = self.and_()
        while self.peek() == ("op", "||"):
            self.take()
            rhs = self.and_()
            v = v if truthy(v) else rhs
        return v

    def and_(self) -> Any:
        v = self.cmp()
        while self.peek() == ("op", "&&"):
            self.take()
            rhs = self.cmp()
            v = rhs if truthy(v) else v
        return v

    def cmp(self) -> Any:
        v = self.unary()
        while self.peek() in (("op", "=="), ("op", "!=")):
            op = self.take()[1]
            rhs = self.unary()
            v = _eq(v, rhs) if op == "==" else not _eq(v, rhs)
        return v

    def unary(self) -> Any:
        if self.peek() == ("op", "!"):
            self.take()
            return not truthy(self.unary())
        return self.primary()

    def primary(self) -> Any:
        kind, value = self.take()
        if kind == "lit":
            return value
        if (kind, value) == ("op", "("):
            v = self.or_()
            self.take(")")
            return v
        if kind != "id":
            raise SyntaxError(f"unexpected {value!r}")
        if self.peek() == ("op", "("):
            self.take()
            args = []
            while self.peek() != ("op", ")"):
                args.append(self.or_())
                if self.peek() == ("op", ","):
                    self.take()
            self.take(")")
            obj: Any = self.call(value, args)  # fromJSON(...)['key'].field
        else:
            obj = self.ctx.get(value)
        while self.peek() in (("op", "."), ("op", "[")):
            if self.take()[1] == ".":
                tok = self.take()
                if tok == ("op", "*"):
                    obj = list(obj.values()) if isinstance(obj, dict) else []
                    rest = self._rest_of_path()
                    return [self._follow(o, rest) for o in obj]
                obj = obj.get(tok[1]) if isinstance(obj, dict) else None
            else:
                key = self.or_()
                self.take("]")
                obj = obj.get(key) if isinstance(obj, dict) else None
        return obj

    def _rest_of_path(self) -> list[str]:
        rest = []
        while self.peek() == ("op", "."):
            self.take()
            rest.append(self.take()[1])
        return rest

    @staticmethod
    def _follow(obj: Any, path: list[str]) -> Any:
        for key in path:
            obj = obj.get(key) if isinstance(obj, dict) else None
        return obj

    def call(self, name: str, args: list[Any]) -> Any:
        fns: dict[str, Callable[..., Any]] = {
            "startswith": lambda a, b: _str(a).lower().startswith(_str(b).lower()),
            "format": lambda f, *xs: re.sub(r"\{(\d+)\}", lambda m: _str(xs[int(m.group(1))]),
                                            _str(f).replace("{{", "\0").replace("}}", "\1"))
            .replace("\0", "{").replace("\1", "}"),
            "join": lambda xs, sep=",": _str(sep).join(_str(x) for x in xs)
            if isinstance(xs, list) else _str(xs),
            "fromjson": lambda s: json.loads(s),
        }
        lname = name.lower()
        if lname in ("always", "cancelled", "failure", "success"):
            return self.status[lname]
        return fns[lname](*args)


def evaluate(text: str, ctx: dict[str, Any], status: dict[str, bool] | None = None) -> Any:
    """Evaluate an expression (with or without ``${{ }}``) against ``ctx``."""
    inner = text.strip()
    m = re.fullmatch(r"\$\{\{(.*)\}\}", inner, re.DOTALL)
    if m:
        inner = m.group(1)
    st = {"always": True, "cancelled": False, "failure": False, "success": True}
    st.update(status or {})
    return _Parser(inner, ctx, st).parse()


def interpolate(text: str, ctx: dict[str, Any], status: dict[str, bool] | None = None) -> str:
    """A string with ``${{ }}`` parts, as GitHub renders it (e.g. a concurrency group)."""
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: _str(evaluate(m.group(1), ctx, status)), text)
