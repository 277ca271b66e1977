"""The collection cache: reused when valid, ignored and rebuilt when anything is off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testfleet.config import load_project
from testfleet.registry import cache, collect
from testfleet.registry import scan as sc
from testfleet.registry.collector import registry_key, registry_path

from .conftest import BASE_CONFIG


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every file the collector actually scans (i.e. did not take from the cache)."""
    seen: list[str] = []
    real = sc.scan_source

    def spy(data: bytes, pattern, needles):  # type: ignore[no-untyped-def]
        seen.append(data[:60].decode(errors="replace"))
        return real(data, pattern, needles)

    monkeypatch.setattr(sc, "scan_source", spy)
    return seen


def _split(digests: bytes) -> list[bytes]:
    n = cache.DIGEST_SIZE
    return [digests[k:k + n] for k in range(0, len(digests), n)]


def summary(registry) -> tuple:
    return (registry.registrations, registry.gates, sorted(registry.findings), registry.files)


def test_warm_run_reuses_and_matches_cold(tree, scans) -> None:
    project = tree({"tests/unit/test_bad.py": "from testfleet import register_cpu_ci\nregister_cpu_ci(0, 'x')\n"})
    cold = collect(project)
    n = len(scans)
    assert n == 4 and registry_path(project).is_file()
    warm = collect(project)
    assert len(scans) == n  # nothing re-scanned
    assert summary(warm) == summary(cold) == summary(collect(project, use_cache=False))


def test_changed_file_is_rescanned(tree, scans) -> None:
    project = tree()
    collect(project)
    target = project.root / "tests/unit/test_good.py"
    text = target.read_text().replace("est_time=10", "est_time=20")
    st = target.stat()
    target.write_text(text)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime: ctime/digest still catch it
    scans.clear()
    registry = collect(project)
    assert len(scans) == 1
    assert next(r for r in registry.registrations if r.file.endswith("test_good.py")).est_time == 20.0


def test_racy_entry_is_verified_by_content(tree, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tree()
    collect(project)  # files were just written: every entry is racy and carries a digest
    target = project.root / "tests/unit/test_good.py"
    key = registry_key(project.config_path, project.raw_config_text)
    header, body = cache.load_blob(registry_path(project), key, cache.KIND)
    paths, stats, digests, gates, elements = cache.decode_table(header, body)
    i = paths.index("tests/unit/test_good.py")
    assert isinstance(elements[i], list) and elements[i][0] is True  # racy: its digest is checked
    # Simulate an edit the stat key cannot see: rewrite the table with the new file's key.
    target.write_text(target.read_text().replace("est_time=10", "est_time=30"))
    st = target.stat()
    new_stats = [tuple(stats[5 * j:5 * j + 5]) for j in range(len(paths))]
    new_stats[i] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino & cache._MASK, st.st_dev & cache._MASK)
    body, extra = cache.encode_table(paths, new_stats, _split(digests), gates, elements)
    cache.save_blob(registry_path(project), key, cache.KIND, body, extra)
    registry = collect(project)
    assert next(r for r in registry.registrations if r.file.endswith("test_good.py")).est_time == 30.0


def test_config_change_invalidates_everything(tree, scans) -> None:
    project = tree()
    collect(project)
    (project.root / "testfleet.toml").write_text(project.raw_config_text + "\n# a comment\n")
    scans.clear()
    collect(load_project(project.root))
    assert len(scans) == 3


def test_deleted_and_added_files(tree) -> None:
    project = tree()
    collect(project)
    (project.root / "tests/unit/test_good.py").unlink()
    (project.root / "tests/fast/test_new.py").write_text("def test():\n    pass\n")
    registry = collect(project)
    assert registry.files == ["tests/fast/test_new.py", "tests/fast/test_quick.py", "tests/gpu/test_good_gpu.py"]
    assert summary(registry) == summary(collect(project, use_cache=False))


def damage_cases(raw: bytes) -> dict[str, bytes]:
    head, _, body = raw.partition(b"\n")
    header = json.loads(head)
    flipped = bytearray(body)
    flipped[len(flipped) // 2] ^= 0xFF
    foreign = dict(header, key="0" * 64)
    wrong_kind = dict(header, kind="something-else")
    return {
        "garbage": b"\x00\xffnot a cache at all",
        "empty": b"",
        "truncated": raw[: len(raw) // 2],
        "header-only": head + b"\n",
        "no-newline": head,
        "bit-flip": head + b"\n" + bytes(flipped),
        "foreign-key": json.dumps(foreign).encode() + b"\n" + body,
        "other-kind": json.dumps(wrong_kind).encode() + b"\n" + body,
        "header-not-object": b"[1, 2]\n" + body,
        "json-bomb": b"[" * 100000 + b"\n",
    }


@pytest.mark.parametrize("case", ["garbage", "empty", "truncated", "header-only", "no-newline", "bit-flip",
                                  "foreign-key", "other-kind", "header-not-object", "json-bomb"])
def test_damaged_cache_is_ignored_and_rebuilt(case: str, tree, scans) -> None:
    project = tree()
    expected = summary(collect(project))
    path = registry_path(project)
    path.write_bytes(damage_cases(path.read_bytes())[case])
    scans.clear()
    assert summary(collect(project)) == expected
    assert len(scans) == 3  # nothing was trusted
    scans.clear()
    collect(project)
    assert scans == []  # and it was rebuilt


def forge(project, elements_for: dict[str, object], gates_for: dict[str, bytes] | None = None) -> None:
    """A cache with a valid header and CRC whose per-file elements (or gate texts) are hostile."""
    key = registry_key(project.config_path, project.raw_config_text)
    header, body = cache.load_blob(registry_path(project), key, cache.KIND)
    paths, stats, digests, gates, elements = cache.decode_table(header, body)
    for rel, value in elements_for.items():
        elements[paths.index(rel)] = value
    for rel, text in (gates_for or {}).items():
        gates[paths.index(rel)] = text
    body, extra = cache.encode_table(paths, [tuple(stats[5 * j:5 * j + 5]) for j in range(len(paths))],
                                     _split(digests), gates, elements)
    cache.save_blob(registry_path(project), key, cache.KIND, body, extra)


@pytest.mark.parametrize("element", [
    "string", None, [None], 1, -1, 0.0, False, True, [123, 0], [None, 7], [None, "x"],
    # racy marks other than true (schema 3 kept the digest there): never trusted as "not racy"
    ["9c67f1268cda9048e275ac8f944e6f82", [[["cpu", "stage-a-cpu", 5.0, 1, 1, [], False, None, False]]]],
    [1, [[["cpu", "stage-a-cpu", 5.0, 1, 1, [], False, None, False]]]],
    [False, [[["cpu", "stage-a-cpu", 5.0, 1, 1, [], False, None, False]]]],
    [None, {"r": [], "g": [], "f": []}],  # an older payload shape
    [None, [[[1, 2, 3]]]],
    [None, [[], [], [[1, 1, "fatal", "x", "y"]]]],
    [None, [[["cpu", "stage-a-cpu", True, 1, 1, [], False, None, False]]]],
    [None, [[["cpu", "stage-a-cpu", 1e308 * 10, 1, 1, [], False, None, False]]]],
    [None, [[["cpu", "no-such-stage", 5.0, 1, 1, [], False, None, False]]]],
    [None, [[["tpu", "stage-a-cpu", 5.0, 1, 1, [], False, None, False]]]],
    [None, [[["cpu", "stage-a-cpu", 5.0, 1, 1, [3], False, None, False]]]],
    [None, [[], [[1, 1, {"k": "x"}, 0, []]], []]],  # schema 3's payload, with the gates inline
    [None, [[], '[[1, 1, {"metric_key": "m"}, 0, [], []]]', [], [], []]],  # schema 3, 5 items
    [None, [[], [], []]],
    0,  # "implicit file" for a file that is not in an implicit directory
])
def test_well_formed_but_wrong_entries_are_not_trusted(element: object, tree, scans) -> None:
    project = tree()
    expected = summary(collect(project, use_cache=False))
    collect(project)
    forge(project, {"tests/unit/test_good.py": element})
    scans.clear()
    assert summary(collect(project)) == expected
    assert len(scans) == 1


ONE_GATE = ("from testfleet import register_cpu_ci, register_ci_gate\n"
            "register_cpu_ci(5, 'stage-a-cpu')\n"
            "register_ci_gate(metric_key='loss', steps=[1, 2], constraint={'rel_up': 0.1, 'rel_down': 0.1})\n")


@pytest.mark.parametrize("text", [
    b"not json", b'{"a": 1}', b"[1]", b"[[1, 1, {}, 0]]", b"\xff\xfe",
    b'[[1, 1, {"metric_key": ["x", 1]}, 0, [], []]]',  # unknown literal tag
    b'[[1, 1, {"steps": ["d", 1]}, 0, [], []]]',  # a dict without its value
    b'[["1", 1, {"metric_key": "m"}, 0, [], []]]',  # a line that is not a number
    b'[[1, 1, {"metric_key": "m"}, 0, [7], []]]',  # a non-literal name that is not a string
    b'[[1, 1, ["j", 5], 0, [], []]]',  # whole-call arguments that are not an object
    b'[[1, 1, ["k", {"metric_key": "m"}], 0, [], []]]',  # an unknown tag
])
def test_a_hostile_gate_text_is_not_trusted(text: bytes, tree, scans) -> None:
    """Gate arguments live in the table's own region (schema 4): damage there costs a scan
    of that file, never a wrong or missing gate."""
    project = tree({"tests/unit/test_gated.py": ONE_GATE})
    expected = summary(collect(project, use_cache=False))
    assert [g.kwargs["metric_key"] for g in expected[1]] == ["loss"]
    collect(project)
    forge(project, {}, {"tests/unit/test_gated.py": text})
    scans.clear()
    assert summary(collect(project)) == expected
    assert len(scans) == 1


def test_list_and_plan_never_parse_gate_texts(tree, scans, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that does not want gates slices past their region: even text that is not JSON
    there is neither parsed nor a reason to scan the file, and is kept for the next run."""
    project = tree({"tests/unit/test_gated.py": ONE_GATE})
    expected = summary(collect(project, use_cache=False))
    collect(project)
    forge(project, {}, {"tests/unit/test_gated.py": b"not json"})
    scans.clear()
    without = collect(project, gates=False)
    assert scans == [] and without.gates == [] and without.registrations == expected[0]
    key = registry_key(project.config_path, project.raw_config_text)
    table = cache.decode_table(*cache.load_blob(registry_path(project), key, cache.KIND))
    assert table.gates[table.paths.index("tests/unit/test_gated.py")] == b"not json"
    assert summary(collect(project)) == expected and len(scans) == 1  # wanted: damage found, rescanned


def test_concurrent_collectors_leave_a_valid_cache(tree) -> None:
    project = tree({f"tests/fast/test_f{i}.py": "def test():\n    pass\n" for i in range(40)})
    code = (
        "import sys; from pathlib import Path; from testfleet.config import load_project;"
        "from testfleet.registry import collect;"
        "r = collect(load_project(Path(sys.argv[1]))); print(len(r.registrations))"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(project.root)], stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(set(outs)) == 1
    assert summary(collect(project)) == summary(collect(project, use_cache=False))
    leftovers = [p.name for p in registry_path(project).parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_symlinked_cache_dir_is_not_written_through(tree, tmp_path: Path) -> None:
    project = tree()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, project.root / ".testfleet")
    collect(project)
    assert list(elsewhere.iterdir()) == []


def test_unwritable_cache_location_still_collects(tree) -> None:
    project = tree()
    (project.root / ".testfleet").write_text("a file where the cache directory should be")
    registry = collect(project)
    assert len(registry.registrations) == 4


def test_cache_dir_gets_a_gitignore(tree) -> None:
    project = tree()
    collect(project)
    assert (project.root / ".testfleet" / ".gitignore").read_text().splitlines()[-1] == "*"


def test_header_records_a_crc_of_the_body(tree) -> None:
    project = tree()
    collect(project)
    head, _, body = registry_path(project).read_bytes().partition(b"\n")
    header = json.loads(head)
    assert header["crc"] == zlib.crc32(body) and header["size"] == len(body) and header["schema"] == cache.SCHEMA == 5


def test_no_cache_flag_writes_nothing(tree) -> None:
    project = tree()
    collect(project, use_cache=False)
    assert not (project.root / ".testfleet").exists()


def test_syntax_cache_is_keyed_by_content(tree, monkeypatch: pytest.MonkeyPatch) -> None:
    from testfleet.registry import syntax

    project = tree({"tests/unit/test_s.py": "from testfleet import register_cpu_ci\n"
                    "register_cpu_ci(5, 'stage-a-cpu')\ndef f(:\n"})
    calls: list[str] = []
    real = syntax.syntax_error
    monkeypatch.setattr(syntax, "syntax_error", lambda data, rel: calls.append(rel) or real(data, rel))
    first = [f for f in collect(project, thorough=True).findings if f.code == "syntax"]
    assert len(calls) == 4 and [(f.file, f.line) for f in first] == [("tests/unit/test_s.py", 3)]
    calls.clear()
    second = [f for f in collect(project, thorough=True).findings if f.code == "syntax"]
    assert calls == [] and second == first


def test_racy_digests_are_dropped_once_files_are_old_enough(tree, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tree()
    collect(project)
    key = registry_key(project.config_path, project.raw_config_text)

    def digests() -> list[object]:
        _paths, _stats, _digests, _gates, elements = cache.decode_table(
            *cache.load_blob(registry_path(project), key, cache.KIND))
        return [e[0] for e in elements if isinstance(e, list)]

    assert digests() and all(d is True for d in digests())  # just written: all racy
    monkeypatch.setattr(cache, "RACY_NS", -10**18)  # as if the files were old now
    first = collect(project)
    assert digests() == [None] * len(digests())
    opened: list[str] = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda f, *a, **k: opened.append(str(f)) or real_open(f, *a, **k))
    assert summary(collect(project)) == summary(first)
    assert not [f for f in opened if "/tests/" in f]  # nothing re-read to verify


def test_parallel_syntax_check_matches_sequential(tree, monkeypatch: pytest.MonkeyPatch) -> None:
    from testfleet.registry import syntax

    files = {f"tests/fast/test_s{i}.py": ("def f(:\n" if i % 3 == 0 else "x = 1\n") for i in range(9)}
    project = tree(files)
    monkeypatch.setattr(syntax, "PARALLEL_MIN", 10**9)
    sequential = [f for f in collect(project, use_cache=False, thorough=True).findings if f.code == "syntax"]
    monkeypatch.setattr(syntax, "PARALLEL_MIN", 1)
    parallel = [f for f in collect(project, use_cache=False, thorough=True).findings if f.code == "syntax"]
    assert parallel == sequential and len(sequential) == 3


def test_cache_dir_below_a_symlinked_directory_is_not_written(tree, tmp_path: Path) -> None:
    project = tree(config='cache_dir = "build/cache"\n' + BASE_CONFIG)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, project.root / "build")
    registry = collect(project)
    assert list(elsewhere.iterdir()) == [] and len(registry.registrations) == 4


GATED = {"tests/unit/test_gated.py": (
    "from testfleet import register_cpu_ci, register_ci_gate\n"
    "register_cpu_ci(est_time=5, suite='stage-a-cpu')\n"
    "register_ci_gate(metric_key='train/loss', steps=(10, 20), hard_max=1e9,\n"
    "                 constraint={'rel_up': 0.1, 'abs_floor_up': 0.001}, reason=b'x', enforce=None)\n"
    "register_ci_gate(metric_key='train/kl', steps='last', min_history=-0.0)\n"
)}


def test_warm_run_parses_no_python(tree, monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm run decodes cached data: no compile, no literal_eval (issue #15's 4,282 compiles)."""
    import ast
    import builtins

    project = tree(GATED)
    cold = collect(project)
    assert len(cold.gates) == 2 and cold.gates[0].kwargs["steps"] == (10, 20)

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("the warm path parsed Python")

    monkeypatch.setattr(builtins, "compile", forbidden)
    monkeypatch.setattr(ast, "literal_eval", forbidden)
    monkeypatch.setattr(ast, "parse", forbidden)
    warm = collect(project)
    assert summary(warm) == summary(cold)
    assert [g.kwargs for g in warm.gates] == [g.kwargs for g in cold.gates]
    assert type(warm.gates[0].kwargs["steps"]) is tuple and warm.gates[0].kwargs["reason"] == b"x"


def test_without_gates_the_registry_has_no_gate_calls(tree) -> None:
    project = tree(GATED)
    cold = collect(project, gates=False)
    warm = collect(project, gates=False)
    full = collect(project)
    for reg in (cold, warm):
        assert reg.gates == []
        assert (reg.registrations, sorted(reg.findings)) == (full.registrations, sorted(full.findings))
    assert len(full.gates) == 2


_SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
            | st.text(max_size=5) | st.binary(max_size=4) | st.complex_numbers(allow_nan=False)
            | st.just(Ellipsis))
_HASHABLE = st.recursive(_SCALARS, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
                         max_leaves=6)
_LITERALS = st.recursive(
    _SCALARS,
    lambda inner: (st.lists(inner, max_size=3) | st.tuples(inner, inner) | st.sets(_HASHABLE, max_size=3)
                   | st.dictionaries(_HASHABLE, inner, max_size=3)),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_LITERALS)
def test_literals_survive_the_cache_exactly(value: object) -> None:
    data = json.loads(json.dumps(cache.pack_literal(value)))
    back = cache.unpack_literal(data)
    assert back == value and _shape(back) == _shape(value)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=4), _LITERALS | st.sampled_from([float("inf"), -0.0, 2**70]), max_size=4))
def test_call_arguments_survive_the_cache_exactly(kwargs: dict[str, object]) -> None:
    """Arguments of JSON's own types are kept whole (one tag per call), the rest value by
    value; either way they come back equal and of the same types all the way down."""
    text = json.dumps(cache.pack_kwargs(kwargs), separators=(",", ":"), ensure_ascii=False)
    back = cache.unpack_kwargs(json.loads(text.encode("utf-8", "surrogatepass")))
    assert back == kwargs and _shape(back) == _shape(kwargs)


@pytest.mark.parametrize("data", [["j", 5], ["j", {"a": 1}, 3], ["k", {"a": 1}], [], "j", 7, None])
def test_malformed_call_arguments_are_refused(data: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        cache.unpack_kwargs(data)


def _shape(value: object) -> object:
    """Types all the way down (``1 == 1.0 == True`` would hide a wrong type)."""
    if isinstance(value, (list, tuple)):
        return (type(value), [_shape(v) for v in value])
    if isinstance(value, dict):
        return (dict, [(_shape(k), _shape(v)) for k, v in value.items()])
    if isinstance(value, (set, frozenset)):
        return (type(value), sorted(repr(_shape(v)) for v in value))
    return type(value)


def test_a_value_that_is_not_a_literal_is_not_packed() -> None:
    with pytest.raises(TypeError):
        cache.pack_literal(object())


def test_duplicate_constraint_keys_survive_the_cache(tree, scans) -> None:  # type: ignore[no-untyped-def]
    """A warm run reports a repeated constraint key without parsing the file again."""
    from testfleet.gate.spec import parse_gate_specs

    project = tree({"tests/test_g.py": (
        "from testfleet import register_ci_gate, register_cpu_ci\n"
        'register_cpu_ci(est_time=5, suite="stage-a-cpu")\n'
        "register_ci_gate(metric_key='train/loss', steps='last',\n"
        "                 constraint={'rel_up': 0.1, 'rel_down': 0.1, 'rel_up': 5.0})\n"
        "def test_x():\n    pass\n")})
    scanned = []
    for run in ("cold", "warm"):
        registry = collect(project)
        scanned.append(len(scans))
        assert [g.duplicate_keys for g in registry.gates] == [("'rel_up'",)], run
        _, findings = parse_gate_specs(project, registry.gates)
        assert [(f.line, f.code) for f in findings] == [(3, "gate-duplicate-key")], run
    assert scanned[0] > 0 and scanned[1] == scanned[0]  # the warm run scanned nothing


def test_a_fresh_checkout_reuses_entries_whose_content_is_unchanged(tree, scans) -> None:  # type: ignore[no-untyped-def]
    """Every stat key changes (new inodes and times, as after a checkout or a cache restored
    in CI); the content digests prove the files unchanged, so none is scanned again, and the
    one whose bytes did change is."""
    import shutil

    project = tree()
    first = collect(project)
    assert scans
    copy = project.root.parent / "copy"
    shutil.copytree(project.root, copy)
    shutil.rmtree(project.root)
    shutil.copytree(copy, project.root)  # new inode, mtime and ctime for every file
    edited = project.root / "tests/unit/test_good.py"
    edited.write_text(edited.read_text().replace("est_time=10", "est_time=30"))
    scans.clear()
    again = collect(project)
    assert len(scans) == 1  # only the edited file
    changed = {r.file: r.est_time for r in again.registrations}
    assert changed["tests/unit/test_good.py"] == 30.0
    assert ({r.file: r.est_time for r in first.registrations} | {"tests/unit/test_good.py": 30.0}) == changed
    assert sorted(first.findings) == sorted(again.findings)
    scans.clear()
    assert summary(collect(project)) == summary(again) and scans == []  # the new keys were kept


def test_a_tree_copied_to_another_path_keeps_its_cache(tree, scans, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A CI runner restores the collection cache into a workspace at another path (self-hosted
    runners each have their own): no file is scanned again, the digests vouch for them all,
    and the result is the one a scan gives there."""
    import shutil

    project = tree()
    collect(project)
    moved = tmp_path / "elsewhere" / "checkout"
    shutil.copytree(project.root, moved)
    there = load_project(moved)
    scans.clear()
    registry = collect(there)
    assert scans == []
    assert summary(registry) == summary(collect(there, use_cache=False))
    assert {r.file for r in registry.registrations} == {r.file for r in collect(project).registrations}


def test_the_key_follows_testfleets_source_content_not_its_mtimes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """pip writes a wheel's files anew on every install: the same testfleet installed again
    (a CI job) must give the same key, and any edit to its sources a new one."""
    import shutil

    from testfleet.registry import settings as settings_mod

    src = Path(settings_mod.__file__).resolve().parent.parent
    first, second = tmp_path / "a" / "testfleet", tmp_path / "b" / "testfleet"
    for dest in (first, second):
        for rel in settings_mod._SOURCES:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / rel, dest / rel)
    for path in second.rglob("*.py"):
        os.utime(path, ns=(1, 1_000_000_000))
    assert settings_mod.sources_digest(first) == settings_mod.sources_digest(second)
    assert settings_mod.sources_digest(first) == settings_mod.code_fingerprint()
    scan_py = second / "registry" / "scan.py"
    scan_py.write_bytes(scan_py.read_bytes() + b"\n")
    assert settings_mod.sources_digest(first) != settings_mod.sources_digest(second)
    scan_py.unlink()
    assert settings_mod.sources_digest(second) not in (settings_mod.sources_digest(first), "")


def test_a_digest_that_does_not_match_the_bytes_is_never_trusted(tree, scans) -> None:  # type: ignore[no-untyped-def]
    """A restored cache whose digests are wrong (forged, or another tree's) costs a scan,
    never a wrong registration."""
    project = tree()
    collect(project)
    key = registry_key(project.config_path, project.raw_config_text)
    header, body = cache.load_blob(registry_path(project), key, cache.KIND)
    paths, stats, digests, gates, elements = cache.decode_table(header, body)
    i = paths.index("tests/unit/test_good.py")
    reg = elements[i][1][0][0] if isinstance(elements[i], list) else None
    assert reg is not None
    reg[2] = 999.0  # the forged result
    moved = [tuple(stats[5 * j:5 * j + 5]) for j in range(len(paths))]
    moved[i] = (0, 0, 0, 0, 0)  # a key that cannot match: only the digest could vouch
    forged = _split(digests)
    forged[i] = bytes(cache.DIGEST_SIZE)
    body, extra = cache.encode_table(paths, moved, forged, gates, elements)
    cache.save_blob(registry_path(project), key, cache.KIND, body, extra)
    scans.clear()
    registry = collect(project)
    assert next(r for r in registry.registrations if r.file == "tests/unit/test_good.py").est_time == 10.0
    assert len(scans) == 1


def test_a_table_with_a_short_digest_column_is_ignored(tree) -> None:  # type: ignore[no-untyped-def]
    project = tree()
    collect(project)
    key = registry_key(project.config_path, project.raw_config_text)
    header, body = cache.load_blob(registry_path(project), key, cache.KIND)
    assert cache.decode_table({**header, "digests": header["digests"] - 1}, body) is None
    with pytest.raises(ValueError):
        cache.encode_table(["a"], [(1, 2, 3, 4, 5)], [b"short"], [b""], [0])
    with pytest.raises(ValueError):
        cache.encode_table(["a"], [(1, 2, 3, 4, 5)], [bytes(cache.DIGEST_SIZE)], [], [0])


@pytest.mark.parametrize("lengths", [[-1, 1], [1, 0], [0, 0], [2**62, 0]])
def test_a_table_whose_gate_lengths_do_not_add_up_is_ignored(lengths: list[int]) -> None:
    from array import array

    body, extra = cache.encode_table(["a", "b"], [(1, 2, 3, 4, 5)] * 2, [bytes(cache.DIGEST_SIZE)] * 2,
                                     [b"[]", b""], [[None, [[]]], 0])
    assert cache.decode_table(extra, body) is not None
    at = extra["paths"] + extra["stats"] + extra["digests"]
    forged = body[:at] + array("q", lengths).tobytes() + body[at + 16:]
    assert cache.decode_table(extra, forged) is None
