"""Values a stage job computes at run time from data the repository keeps, read statically.

Large fleets do not write runner labels, install scripts or partition counts into each
job: a job passes a key (SGLang's ``runner_config: 1-gpu-large``) to a reusable workflow,
whose ``runs-on`` indexes a map another job built from a data file
(``fromJson(fromJson(inputs.check_changes).runs_on_map)[inputs.runner_config]``, the map
printed by ``scripts/ci/runner_configs.py --map`` from ``scripts/ci/runner_configs.yml``),
and whose steps read the same entry through a step's outputs (``steps.rc.outputs.install``).
Left unresolved, every such stage would be adopted on placeholder runners without its
install. This module follows those references to the data they index, without running
anything:

* a caller's ``with:`` bundle (``check_changes: ${{ toJson(needs.J.outputs) }}``, or one
  output ``${{ needs.J.outputs.O }}``) is read as the job outputs it carries;
* a job output is followed to the step that writes it, through a reusable workflow's
  ``on.workflow_call.outputs`` when the job calls one;
* a step that runs a repository script into ``$GITHUB_OUTPUT`` is read as the data file the
  script names (a ``.yml``/``.yaml``/``.json`` string in its source): an output ``<f>_map``
  is ``{key: entry[f]}``, a step called with a literal key gives that entry's fields;
* a ``$name`` sentinel in the data (``$b200_runner``) is the value the step passes for it,
  read from the step that writes ``name``: a value chosen by a shell ``if`` is its ``else``
  value (the value when the condition is false), said in a note;
* an output of ``dorny/paths-filter`` is ``'false'`` (no matching path changed), said too;
* a script that computes the partition count (SGLang's ``compute_partitions.py``) is read
  with ``ast`` for what decides it: the fraction of the stage's timeout a shard may fill,
  the divisor of its parallelism throttle and fixed per-suite counts.

The results are contexts for :func:`testfleet.adopt.expr.evaluate`; a value the data does
not settle stays unknown, and the caller says so.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testfleet.adopt.ci_model import PartitionRule as PartitionRule
from testfleet.adopt.workflow_yaml import EXPR, on_of, text_of

#: ``python3 path/to/script.py ARGS >> "$GITHUB_OUTPUT"``
_SCRIPT_TO_OUTPUT = re.compile(
    r"^\s*python3?\s+(?:-\w+\s+)*([\w./-]+\.py)\b(.*?)>>\s*\"?\$GITHUB_OUTPUT\"?\s*$", re.MULTILINE)
_DATA_SUFFIXES = (".yml", ".yaml", ".json")
_SENTINEL = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)$")
_NEEDS_OUTPUT = re.compile(r"^\s*needs\.([\w-]+)\.outputs\.([\w-]+)\s*$")
_JOBS_OUTPUT = re.compile(r"^\s*jobs\.([\w-]+)\.outputs\.([\w-]+)\s*$")
_STEPS_OUTPUT = re.compile(r"^\s*steps\.([\w-]+)\.outputs\.([\w-]+)\s*$")
_MAX_DEPTH = 3
_MAX_DATA_BYTES = 1 << 20


@dataclass
class JobLookups:
    """Contexts for one stage job's expressions, and what was assumed to get them."""

    contexts: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: (step id, data file) of the job's own steps whose outputs were read from data
    resolved_steps: dict[str, str] = field(default_factory=dict)
    #: ``fromJson(inputs.A).O`` / ``inputs.A`` -> ``needs.J.outputs.O``
    rewrites: list[tuple[re.Pattern[str], str]] = field(default_factory=list)
    #: the data file a lookup key was read from (for the stage's notes)
    data_files: set[str] = field(default_factory=set)
    partition_rule: PartitionRule | None = None

    def rewrite(self, expression: str) -> str:
        for pattern, repl in self.rewrites:
            expression = pattern.sub(repl, expression)
        return expression


def _run_text(step: Mapping[str, Any]) -> str:
    run = step.get("run")
    return run.replace("\\\n", " ") if isinstance(run, str) else ""


def _stat(path: Path) -> tuple[str, int, int]:
    """The cache key of a file: its path and stat, so an edited file is read again."""
    try:
        st = path.stat()
    except OSError:
        return str(path), -1, -1
    return str(path), st.st_mtime_ns, st.st_size


def _load_data(path: Path) -> Any:
    """A data file's parsed content, read once per version (callers never mutate it)."""
    return _load_data_at(*_stat(path))


@functools.lru_cache(maxsize=32)
def _load_data_at(path: str, mtime_ns: int, size: int) -> Any:
    import yaml

    try:
        raw = Path(path).read_bytes()[:_MAX_DATA_BYTES]
        return yaml.safe_load(raw)
    except (OSError, ValueError, yaml.YAMLError, RecursionError):
        return None


def _script_source(path: str) -> ast.Module | None:
    return _script_source_at(*_stat(Path(path)))


@functools.lru_cache(maxsize=32)
def _script_source_at(path: str, mtime_ns: int, size: int) -> ast.Module | None:
    try:
        return ast.parse(Path(path).read_bytes()[:_MAX_DATA_BYTES])
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def script_data_files(repo: Path, script: str) -> list[str]:
    """The data files (``.yml``/``.yaml``/``.json``) a repository script names in its
    source and that exist, relative to the script's directory or the repository root."""
    root = repo.resolve()
    path = (repo / script).resolve()
    if root not in path.parents or not path.is_file():
        return []
    tree = _script_source(str(path))
    if tree is None:
        return []
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value.endswith(_DATA_SUFFIXES) and "\n" not in node.value:
            for base in (path.parent, root):
                candidate = (base / node.value).resolve()
                if root in candidate.parents and candidate.is_file():
                    rel = candidate.relative_to(root).as_posix()
                    if rel not in out:
                        out.append(rel)
                    break
    return out


def _tables(data: Any) -> list[Mapping[str, Any]]:
    """The mappings of a data file whose values are entries (mappings), at its top level or
    one level down (``runner_configs: {1-gpu-small: {...}}``)."""
    out: list[Mapping[str, Any]] = []
    if not isinstance(data, Mapping):
        return out
    for candidate in (data, *[v for v in data.values() if isinstance(v, Mapping)]):
        if any(isinstance(v, Mapping) for v in candidate.values()):
            out.append(candidate)
    return out


def _entry(repo: Path, files: list[str], key: str) -> tuple[str, Mapping[str, Any], set[str]] | None:
    """(data file, the entry of ``key``, every field any entry of its table has)."""
    for rel in files:
        for table in _tables(_load_data(repo / rel)):
            entry = table.get(key)
            if isinstance(entry, Mapping):
                fields = {str(f) for v in table.values() if isinstance(v, Mapping) for f in v}
                return rel, entry, fields
    return None


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def _shell_choice(step: Mapping[str, Any], name: str) -> tuple[str, list[str], str] | None:
    """(the value a step writes for output ``name`` when its shell ``if`` is false, the
    other values it may write, the condition) -- or the one value it always writes."""
    run = _run_text(step)
    writes: list[tuple[int, str]] = []
    lines = run.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r'^\s*echo\s+"?' + re.escape(name) + r'=([^"$\s]*)"?\s*>>\s*"?\$GITHUB_OUTPUT"?\s*$',
                     line)
        if m:
            writes.append((i, m.group(1)))
    if not writes:
        return None
    if len(writes) == 1:
        return writes[0][1], [], ""
    conditions = [ln.strip() for ln in lines if re.match(r"^\s*if\s", ln)]
    elses = [i for i, ln in enumerate(lines) if ln.strip() == "else"]
    if len(writes) != 2 or len(conditions) != 1 or len(elses) != 1 \
            or not writes[0][0] < elses[0] < writes[1][0]:
        return None
    return writes[1][1], [writes[0][1]], conditions[0].removesuffix("; then").strip()


class _Resolver:
    """Follows job outputs to the steps and data that produce them."""

    def __init__(self, repo: Path, cache: dict[str, Any]) -> None:
        self.repo = repo
        self.cache = cache
        self.notes: list[str] = []
        self.data_files: set[str] = set()
        self.partition_rule: PartitionRule | None = None

    def _workflow_jobs(self, uses: str) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
        """(jobs, workflow_call outputs) of a same-repository reusable workflow."""
        from testfleet.adopt.workflow_yaml import load_workflow

        if not uses.startswith("./"):
            return {}, {}
        path = (self.repo / uses[2:]).resolve()
        if self.repo.resolve() not in path.parents or not path.is_file():
            return {}, {}
        data = load_workflow(path, uses[2:], [], self.cache)
        if not isinstance(data, Mapping):
            return {}, {}
        on = on_of(data)
        call = on.get("workflow_call") if isinstance(on, Mapping) else None
        outputs = call.get("outputs") if isinstance(call, Mapping) else None
        jobs = data.get("jobs")
        return (jobs if isinstance(jobs, Mapping) else {}), (outputs if isinstance(outputs, Mapping) else {})

    def job_output(self, jobs: Mapping[str, Any], job_id: str, output: str, depth: int = 0,
                   workflow: str = "") -> Any:
        """The static value of ``needs.<job_id>.outputs.<output>``, or None (``workflow``:
        the reusable workflow ``jobs`` belong to, for the notes)."""
        job = jobs.get(job_id)
        if not isinstance(job, Mapping) or depth > _MAX_DEPTH:
            return None
        uses = job.get("uses")
        if isinstance(uses, str):
            inner_jobs, outputs = self._workflow_jobs(uses)
            decl = outputs.get(output)
            value = decl.get("value") if isinstance(decl, Mapping) else None
            whole = EXPR.fullmatch(value.strip()) if isinstance(value, str) else None
            ref = _JOBS_OUTPUT.match(whole.group(1)) if whole else None
            return self.job_output(inner_jobs, ref.group(1), ref.group(2), depth + 1,
                                   uses[2:]) if ref else None
        own = job.get("outputs")
        value = own.get(output) if isinstance(own, Mapping) else None
        whole = EXPR.fullmatch(value.strip()) if isinstance(value, str) else None
        ref = _STEPS_OUTPUT.match(whole.group(1)) if whole else None
        steps = job.get("steps")
        if ref is None or not isinstance(steps, list):
            return None
        step = next((s for s in steps if isinstance(s, Mapping) and s.get("id") == ref.group(1)), None)
        if step is None:
            return None
        return self.step_output(f"{workflow} job {job_id}" if workflow else f"job {job_id}",
                                steps, step, ref.group(2))

    def step_output(self, owner: str, steps: list[Any], step: Mapping[str, Any], output: str) -> Any:
        """The static value of one step's output (``owner``: its job, for the notes)."""
        uses = step.get("uses")
        if isinstance(uses, str) and uses.split("@", 1)[0] == "dorny/paths-filter":
            self.notes.append(f"{owner}'s output {output!r} is true only when a changed file "
                              f"matches its paths filter {output!r}; read as 'false' (no such change)")
            return "false"
        m = _SCRIPT_TO_OUTPUT.search(_run_text(step))
        if m is None:
            return None
        script, args = m.group(1).removeprefix("./"), m.group(2)
        files = script_data_files(self.repo, script)
        if output.endswith("_map") and files:
            return self._map_output(owner, steps, script, args, files, output[:-len("_map")])
        rule = partition_rule(self.repo, script)
        if rule is not None:
            self.partition_rule = rule
        return None

    def _map_output(self, owner: str, steps: list[Any], script: str, args: str,
                    files: list[str], fld: str) -> str | None:
        """``{key: entry[fld]}`` over the data file's table, as the JSON text a step would
        write; a key whose value stays unknown is left out (its lookup stays unresolved)."""
        for rel in files:
            for table in _tables(_load_data(self.repo / rel)):
                entries = {k: v for k, v in table.items() if isinstance(v, Mapping) and fld in v}
                if not entries:
                    continue
                out: dict[str, Any] = {}
                for key, entry in entries.items():
                    value = entry[fld]
                    sentinel = _SENTINEL.match(value) if isinstance(value, str) else None
                    if sentinel:
                        value = self._sentinel(owner, steps, args, rel, sentinel.group(1))
                        if value is None:
                            continue  # unknown: the key stays out, so its lookup stays unresolved
                    out[str(key)] = value
                self.data_files.add(rel)
                return json.dumps(out)
        return None

    def _sentinel(self, owner: str, steps: list[Any], args: str, rel: str, name: str) -> str | None:
        """The value a script substitutes for ``$name``: what the step passes it, when that is
        a step output of the same job chosen by a shell ``if`` between literals."""
        for m in EXPR.finditer(args):
            ref = _STEPS_OUTPUT.match(m.group(1))
            if ref is None or ref.group(2) != name:
                continue
            step = next((s for s in steps if isinstance(s, Mapping) and s.get("id") == ref.group(1)), None)
            choice = _shell_choice(step, name) if isinstance(step, Mapping) else None
            if choice is None:
                return None
            default, others, condition = choice
            if others:
                self.notes.append(
                    f"{rel}'s '${name}' is chosen at run time by step {ref.group(1)} of {owner} "
                    f"({', '.join(repr(o) for o in others)} when {condition}, else {default!r}); "
                    f"adopted {default!r}, its value when that condition is false")
            return default
        return None


def job_lookups(repo: Path, caller: Mapping[str, Any], inner: Mapping[str, Any] | None,
                workflow_jobs: Mapping[str, Any] | None, cache: dict[str, Any]) -> JobLookups:
    """Contexts for the expressions of one stage job (``inner``, the called workflow's
    job, when ``caller`` calls one; else ``caller`` itself)."""
    out = JobLookups()
    jobs = workflow_jobs or {}
    resolver = _Resolver(repo, cache)
    with_ = caller.get("with") if inner is not None else None
    for name, value in (with_.items() if isinstance(with_, Mapping) else []):
        whole = EXPR.fullmatch(value.strip()) if isinstance(value, str) else None
        if whole is None:
            continue
        bundle = re.fullmatch(r"toJson\(\s*needs\.([\w-]+)\.outputs\s*\)", whole.group(1), re.IGNORECASE)
        if bundle:
            out.rewrites.append((re.compile(r"fromJson\(\s*inputs\." + re.escape(str(name))
                                            + r"\s*\)\.([\w-]+)", re.IGNORECASE),
                                 f"needs.{bundle.group(1)}.outputs.\\1"))
        elif _NEEDS_OUTPUT.match(whole.group(1)):
            out.rewrites.append((re.compile(r"\binputs\." + re.escape(str(name)) + r"\b(?![\w-])"),
                                 whole.group(1).strip()))
    literal_inputs = inner.get("\0inputs", {}) if inner is not None else {}
    for name, value in (literal_inputs.items() if isinstance(literal_inputs, Mapping) else []):
        if _scalar(value) is not None:
            out.contexts[f"inputs.{name}"] = value
    body = inner if inner is not None else caller
    text = text_of({k: v for k, v in body.items() if not str(k).startswith("\0")})
    for expr in EXPR.finditer(text):
        for m in re.finditer(r"needs\.([\w-]+)\.outputs\.([\w-]+)", out.rewrite(expr.group(1))):
            path = m.group(0)
            if path in out.contexts:
                continue
            value = resolver.job_output(jobs, m.group(1), m.group(2))
            if value is not None:
                out.contexts[path] = value
    steps = body.get("steps")
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, Mapping) or not isinstance(step.get("id"), str):
            continue
        call = _SCRIPT_TO_OUTPUT.search(_run_text(step))
        if call is None or "${{" in call.group(2):
            continue
        files = script_data_files(repo, call.group(1).removeprefix("./"))
        keys = [w.strip("'\"") for w in call.group(2).split() if not w.startswith("-")]
        found = next((e for k in keys if (e := _entry(repo, files, k)) is not None), None)
        if found is None:
            continue
        rel, entry, fields = found
        for key in sorted(fields):
            # a field this entry lacks is an output the step never writes: empty
            text_value = _scalar(entry[key]) if key in entry else ""
            if text_value is not None:
                out.contexts[f"steps.{step['id']}.outputs.{key}"] = text_value
        out.resolved_steps[str(step["id"])] = rel
        out.data_files.add(rel)
    out.notes += resolver.notes
    out.data_files |= resolver.data_files
    out.partition_rule = resolver.partition_rule
    return out


def resolve_value(value: Any, lookups: JobLookups) -> Any:
    """``value`` with each ``${{ }}`` the lookups settle replaced by its text (a whole
    expression keeps a list or number as it is); the rest left as written (and a table's
    value under a ``\0`` key, which adoption keeps raw). A list or table reached twice (a
    YAML alias) is resolved once."""
    from testfleet.workflow_calls import map_tree

    return map_tree(value, lambda leaf: _resolve_text(leaf, lookups),
                    keep=lambda key: str(key).startswith("\0"))


def _resolve_text(value: Any, lookups: JobLookups) -> Any:
    from testfleet.adopt.expr import Unknown, Unresolved, evaluate

    if not isinstance(value, str) or "${{" not in value:
        return value

    def one(expression: str) -> Any:
        try:
            values, _, _ = evaluate(lookups.rewrite(expression), {}, lookups.contexts)
        except Unresolved:
            return Unknown(expression)
        if len(values) != 1 or isinstance(values[0], Unknown):
            return Unknown(expression)
        return values[0]

    whole = EXPR.fullmatch(value.strip())
    if whole:
        got = one(whole.group(1))
        return value if isinstance(got, Unknown) else got

    def sub(m: re.Match[str]) -> str:
        got = one(m.group(1))
        if isinstance(got, (Unknown, list, Mapping)):
            return m.group(0)
        text = _scalar(got)
        return m.group(0) if text is None else ("" if got is None else text)

    return EXPR.sub(sub, value)


def resolve_condition(condition: Any, lookups: JobLookups) -> Any:
    """A step's bare ``if:`` settled by the lookups (True/False), else as written."""
    from testfleet.adopt.expr import Unknown, Unresolved, evaluate

    if not isinstance(condition, str):
        return condition
    text = condition.strip()
    whole = EXPR.fullmatch(text)
    try:
        values, _, _ = evaluate(lookups.rewrite(whole.group(1) if whole else text), {}, lookups.contexts)
    except Unresolved:
        return condition
    if len(values) != 1 or isinstance(values[0], Unknown):
        return condition
    v = values[0]
    return not (v is None or v is False or v == "" or v == 0)


@functools.lru_cache(maxsize=16)
def _partition_rule_at(path: str, mtime_ns: int, size: int, rel: str) -> PartitionRule | None:
    tree = _script_source(path)
    if tree is None:
        return None
    fraction: float | None = None
    divisor: int | None = None
    fixed: dict[str, int] = {}
    for node in ast.walk(tree):
        if fraction is None and isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for const, other in ((node.left, node.right), (node.right, node.left)):
                if isinstance(const, ast.Constant) and isinstance(const.value, float) \
                        and 0 < const.value < 1 and "timeout" in ast.unparse(other).lower():
                    fraction = const.value
        if isinstance(node, ast.FunctionDef) and "parallel" in node.name.lower() and divisor is None:
            for inner in ast.walk(node):
                if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.FloorDiv) \
                        and isinstance(inner.right, ast.Constant) and isinstance(inner.right.value, int) \
                        and not isinstance(inner.right.value, bool) and inner.right.value >= 1:
                    divisor = inner.right.value
                    break
    for stmt in tree.body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
        if isinstance(target, ast.Name) and isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Dict):
            try:
                table = ast.literal_eval(stmt.value)
            except (ValueError, TypeError, SyntaxError):
                continue
            if table and all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                             and 1 <= v <= 256 for k, v in table.items()) \
                    and any(isinstance(n, ast.Name) and n.id == target.id
                            for fn in tree.body if isinstance(fn, ast.FunctionDef) for n in ast.walk(fn)):
                fixed.update(table)
    if fraction is None and divisor is None:
        return None
    return PartitionRule(rel, fraction, divisor, fixed)


def partition_rule(repo: Path, script: str) -> PartitionRule | None:
    """What a partition script (one the stage's partition count comes from) decides the
    count with, read with ast: ``0.75 * run_timeouts[suite]`` gives the fraction, a
    ``*parallel*`` function's ``size // 3`` the throttle, a module-level ``{suite: n}``
    table that a function reads the fixed counts. None when it shows neither of the first
    two."""
    path = (repo / script).resolve()
    if repo.resolve() not in path.parents or not path.is_file():
        return None
    return _partition_rule_at(*_stat(path), script)
