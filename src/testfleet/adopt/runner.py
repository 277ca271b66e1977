"""What a project's own runner script does with a file, read statically for adoption.

A stage job of the existing CI usually starts the project's runner
(``cd test && python3 run_suite.py --hw cuda --suite S``), and that runner -- not the
workflow -- decides how each file is started and which registrations a run takes.
Adoption reads both from the runner's code with :mod:`ast` (never imports or runs it):

- **the per-file command**: the argv list the runner (or a function it imports from the
  project, such as SGLang's ``ci_utils.run_unittest_files``) starts each file with,
  ``["python3", full_path, "-f"]`` -> ``python3 {file} -f``;
- **an exact nightly split**: a ``--nightly`` switch and a filter that keeps a
  registration only when ``t.nightly == nightly`` (per-commit runs take no nightly
  registration, nightly runs take nothing else), as SGLang's ``filter_tests`` does.
  A runner whose ``--nightly`` only widens the selection (miles' alias for
  ``--cadence nightly``) is not exact.

Anything the code does not say as literals is not used.
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

_MAX_BYTES = 1 << 20
_PYTHON = re.compile(r"^python(?:3(?:\.\d+)?)?$")
_MODULE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
PLACEHOLDERS = ("{file}", "{python}")


@dataclass(frozen=True)
class RunnerRead:
    """What adoption takes from one runner script."""

    script: str
    #: how the runner starts a file: "python" or a template ("python3 {file} -f"); None
    #: when the code does not say it as one literal argv list
    file_command: str | None = None
    #: where that argv list is written (``python/sglang/test/ci/ci_utils.py:412``)
    file_command_at: str | None = None
    #: several different argv lists start files: none is adopted
    file_commands_seen: tuple[str, ...] = ()
    #: the runner keeps nightly and per-commit registrations apart (``--nightly``)
    exact_nightly: bool = False
    nightly_flag: str | None = None
    #: backends whose files the runner hands to one pytest call (``pytest *files -v``,
    #: miles' CPU suites), the literal options of that call, and where it is written
    batch_backends: tuple[str, ...] = ()
    batch_args: tuple[str, ...] = ()
    batch_at: str | None = None


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_bytes()[:_MAX_BYTES])
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _inside(repo: Path, path: Path) -> bool:
    try:
        return path.is_file() and repo.resolve() in path.resolve().parents
    except OSError:
        return False


def _module_file(repo: Path, script: Path, module: str) -> Path | None:
    """``<module>.py`` next to the script, at the repository's top or one directory down
    (``python/sglang/...``, ``src/pkg/...``); never searched deeper."""
    if not _MODULE.fullmatch(module):
        return None
    rel = module.replace(".", "/") + ".py"
    tops = [script.parent, repo, *sorted(p for p in repo.iterdir() if p.is_dir()
                                         and not p.is_symlink() and not p.name.startswith("."))]
    for top in tops:
        path = top / rel
        if _inside(repo, path):
            return path
    return None


def _argv_template(node: ast.List | ast.Tuple) -> str | None:
    """``["python3", path, "-f"]`` -> ``python3 {file} -f``: a Python program, the file
    (any non-literal), then literal arguments only."""
    elts = node.elts
    if len(elts) < 2 or isinstance(elts[1], (ast.Constant, ast.Starred)):
        return None
    head = elts[0]
    if isinstance(head, ast.Constant) and isinstance(head.value, str) and _PYTHON.match(head.value):
        program = head.value
    elif (isinstance(head, ast.Attribute) and head.attr == "executable"
          and isinstance(head.value, ast.Name) and head.value.id == "sys"):
        program = "{python}"
    else:
        return None
    rest: list[str] = []
    for e in elts[2:]:
        if not (isinstance(e, ast.Constant) and isinstance(e.value, str)) or "{" in e.value \
                or any(ord(c) < 32 for c in e.value):
            return None
        rest.append(e.value)
    words = [program, "{file}", *rest]
    return " ".join(w if w in PLACEHOLDERS else shlex.quote(w) for w in words)


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _called_names(node: ast.AST) -> set[str]:
    return {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def _file_commands(repo: Path, script: Path, tree: ast.Module) -> dict[str, str]:
    """template -> where it is written, over the runner script and the functions it calls
    that the project defines (its own or imported ``from <module> import name``)."""
    found: dict[str, str] = {}
    called = _called_names(tree)
    sources: list[tuple[Path, ast.AST]] = [(script, tree)]
    for stmt in tree.body:
        if not isinstance(stmt, ast.ImportFrom) or not stmt.module or stmt.level:
            continue
        wanted = {a.name for a in stmt.names if (a.asname or a.name) in called}
        if not wanted:
            continue
        path = _module_file(repo, script, stmt.module)
        module = _parse(path) if path is not None else None
        if module is None or path is None:
            continue
        defs = _functions(module)
        for name in sorted(wanted & set(defs)):
            sources.append((path, defs[name]))
    for path, root in sources:
        rel = path.relative_to(repo).as_posix()
        for node in ast.walk(root):
            if isinstance(node, (ast.List, ast.Tuple)):
                template = _argv_template(node)
                if template is not None:
                    found.setdefault(template, f"{rel}:{node.lineno}")
    return found


def _exact_nightly(tree: ast.Module) -> str | None:
    """The ``--nightly`` flag when the runner selects ``t.nightly == nightly``: an equality
    between two values both named ``nightly`` (a registration's and the run's)."""
    flag = None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument" and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value == "--nightly"):
            action = next((k.value for k in node.keywords if k.arg == "action"), None)
            dest = next((k.value for k in node.keywords if k.arg == "dest"), None)
            if (isinstance(action, ast.Constant) and action.value == "store_true"
                    and (dest is None or (isinstance(dest, ast.Constant) and dest.value == "nightly"))):
                flag = "--nightly"
    if flag is None:
        return None

    def named_nightly(e: ast.expr) -> bool:
        return ((isinstance(e, ast.Name) and e.id == "nightly")
                or (isinstance(e, ast.Attribute) and e.attr == "nightly"))

    for node in ast.walk(tree):
        if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)
                and named_nightly(node.left) and named_nightly(node.comparators[0])):
            return flag
    return None


def read_runner(repo: Path, script: str) -> RunnerRead | None:
    """Read the runner script ``script`` (repository-relative); None when it cannot be parsed."""
    path = repo / script
    if not _inside(repo, path):
        return None
    tree = _parse(path)
    if tree is None:
        return None
    commands = _file_commands(repo, path, tree)
    command = at = None
    if len(commands) == 1:
        template, at = next(iter(commands.items()))
        argv = template.split()
        command = "python" if len(argv) == 2 else template
    flag = _exact_nightly(tree)
    backends, args, batch_at = _batch(tree, script)
    return RunnerRead(script=script, file_command=command, file_command_at=at,
                      file_commands_seen=tuple(sorted(commands)), exact_nightly=flag is not None,
                      nightly_flag=flag, batch_backends=backends, batch_args=args, batch_at=batch_at)


def _pytest_argv(node: ast.AST) -> bool:
    """``["pytest", *files, ...]`` (or ``["python", "-m", "pytest", *files]``)."""
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        return False
    words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
    head = 1 if words[:1] == ["pytest"] else 3 if words[1:3] == ["-m", "pytest"] else 0
    return bool(head) and any(isinstance(e, ast.Starred) for e in node.elts[head:])


def _batch(tree: ast.Module, script: str) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    """Backends the runner runs as one pytest session per shard: an ``if hw ==
    Backend.CPU:`` branch that builds ``["pytest", *files, ...]`` (itself or through a
    function of the script), the literal options of that argv and of the flags the function
    appends to it."""
    functions = _functions(tree)
    builders: dict[str, tuple[ast.AST, ast.AST]] = {}
    for name, fn in functions.items():
        found = next((n for n in ast.walk(fn) if _pytest_argv(n)), None)
        if found is not None:
            builders[name] = (fn, found)
    backends: list[str] = []
    args: list[str] = []
    at: str | None = None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                and len(node.test.ops) == 1 and isinstance(node.test.ops[0], ast.Eq)
                and isinstance(node.test.comparators[0], ast.Attribute)):
            continue
        body = ast.Module(body=node.body, type_ignores=[])
        argv = next((n for n in ast.walk(body) if _pytest_argv(n)), None)
        scope: ast.AST | None = body if argv is not None else None
        for name in _called_names(body) & set(builders):
            scope, argv = builders[name]
        if argv is None or scope is None:
            continue
        backend = node.test.comparators[0].attr.lower()
        backends.append({"amd": "rocm"}.get(backend, backend))
        assert isinstance(argv, (ast.List, ast.Tuple))
        args = [e.value for e in argv.elts[1:] if isinstance(e, ast.Constant)
                and isinstance(e.value, str) and e.value.startswith("-") and e.value != "-m"]
        args += [c.args[0].value for c in ast.walk(scope) if isinstance(c, ast.Call)
                 and isinstance(c.func, ast.Attribute) and c.func.attr == "append" and c.args
                 and isinstance(c.args[0], ast.Constant) and isinstance(c.args[0].value, str)
                 and c.args[0].value.startswith("-")]
        at = f"{script}:{argv.lineno}"
    return tuple(dict.fromkeys(backends)), tuple(dict.fromkeys(args)), at


_SCRIPT = re.compile(r"\bpython3?(?:\s+-[A-Za-z]+)*\s+([\w./-]+\.py)(?![\w/])")
#: where a command runs the script from: ``cd DIR``, or a wrapper's ``-w DIR`` (``docker
#: exec -w``, SGLang's ``amd_ci_exec.sh -w "/sglang-checkout/test"``)
_DIRS = re.compile(r"(?:\bcd|(?<!\S)-w|--workdir)[ \t=]+[\"']?([\w./-]+)")


def script_candidates(commands: str, rel: str) -> list[str]:
    """Where ``python3 REL`` may be in the repository: as written, or under a directory the
    command changes into; a directory inside a container (``/sglang-checkout/test``) is
    tried without its leading components, so it lands on the checkout's ``test``."""
    out = [rel]
    for d in _DIRS.findall(commands):
        parts = [p for p in d.strip("/").split("/") if p and p != "."]
        for i in range(len(parts)):
            if ".." in parts[i:]:
                continue
            candidate = "/".join([*parts[i:], rel])
            if candidate not in out:
                out.append(candidate)
    return out


def runner_script(repo: Path, commands: str) -> str | None:
    """The script a stage job's test command starts: on the line that names the suite
    (``python3 run_suite.py --hw cuda --suite S``), after a ``cd DIR`` of the job."""
    for line in commands.splitlines():
        if "--suite" not in line:
            continue
        for m in _SCRIPT.finditer(line):
            for candidate in script_candidates(commands, m.group(1).removeprefix("./")):
                if _inside(repo, repo / candidate):
                    return candidate
    return None
