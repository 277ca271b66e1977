"""``check FILES`` reads only FILES, and parsed file styles are cached by content (#15)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testfleet.cli.check import run_check
from testfleet.config import load_project
from testfleet.registry import cache, collectable, syntax

CONFIG = """\
roots = ["tests"]

[stages.unit]
backend = "cpu"
command = "pytest"
"""

MARK = 'from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=5, suite="unit")\n'
SCRIPT = 'if __name__ == "__main__":\n    print("ran")\n'


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    (root / "tests").mkdir(parents=True)
    (root / "testfleet.toml").write_text(CONFIG)
    (root / "tests" / "test_ok.py").write_text(MARK + "def test_a():\n    pass\n")
    (root / "tests" / "test_script.py").write_text(MARK + SCRIPT)
    (root / "tests" / "test_broken.py").write_text(MARK + "def test_b(:\n    pass\n")
    return root


def _compiled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = syntax.syntax_error

    def spy(data: bytes, rel: str) -> tuple[int, int, str] | None:
        seen.append(rel)
        return real(data, rel)

    monkeypatch.setattr(syntax, "syntax_error", spy)
    monkeypatch.setattr(syntax, "PARALLEL_MIN", 10**9)  # in this process, where the spy is
    return seen


def test_check_files_compiles_only_those_files(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _compiled(monkeypatch)
    _, findings = run_check(load_project(root), only=frozenset({"tests/test_ok.py"}))
    assert seen == ["tests/test_ok.py"]
    assert not [f for f in findings if f.code == "syntax"]

    seen.clear()
    _, findings = run_check(load_project(root), only=frozenset({"tests/test_broken.py"}))
    assert seen == ["tests/test_broken.py"]
    assert [f.file for f in findings if f.code == "syntax"] == ["tests/test_broken.py"]


def test_a_partial_check_keeps_what_a_full_one_cached(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _compiled(monkeypatch)
    _, full = run_check(load_project(root))
    assert sorted(seen) == ["tests/test_broken.py", "tests/test_ok.py", "tests/test_script.py"]
    seen.clear()
    run_check(load_project(root), only=frozenset({"tests/test_ok.py"}))
    assert seen == []  # cached by the full run
    _, again = run_check(load_project(root))
    assert seen == []  # the partial run did not drop the other files' entries
    assert [f for f in again if f.code == "syntax"] == [f for f in full if f.code == "syntax"]


def test_check_files_does_not_judge_the_style_of_other_files(root: Path) -> None:
    _, scoped = run_check(load_project(root), only=frozenset({"tests/test_ok.py"}), use_cache=False)
    assert not [f for f in scoped if f.code == "no-tests-collected"]
    _, whole = run_check(load_project(root), use_cache=False)
    assert [f.file for f in whole if f.code == "no-tests-collected"] == ["tests/test_script.py"]


def test_file_styles_are_parsed_once_per_content(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[bytes] = []
    real = collectable.file_style

    def spy(source: str | bytes):  # type: ignore[no-untyped-def]
        parsed.append(source if isinstance(source, bytes) else source.encode())
        return real(source)

    monkeypatch.setattr(collectable, "file_style", spy)
    project = load_project(root)
    _, first = run_check(project)
    assert len(parsed) == 1 and b"__main__" in parsed[0]
    _, second = run_check(project)
    assert len(parsed) == 1, "the style of an unchanged file is read from the cache"
    assert [f for f in second if f.code == "no-tests-collected"] == \
        [f for f in first if f.code == "no-tests-collected"]

    script = root / "tests" / "test_script.py"
    old = cache.content_digest(script.read_bytes())
    script.write_text(MARK + "def test_now_a_test():\n    pass\n" + SCRIPT)
    _, third = run_check(project)
    assert len(parsed) == 1  # it has a test now: the regex says so, no parse needed
    assert not [f for f in third if f.code == "no-tests-collected"]
    key = cache.digest_cache_key(collectable.KIND)
    path = root / project.config.cache_dir / collectable.NAME
    kept = cache.load(path, key, collectable.KIND)
    assert old not in kept, "the old content's entry dropped out"
    assert kept == {cache.content_digest(p.read_bytes()): [True] for p in (root / "tests").iterdir()}


def test_a_damaged_style_cache_is_rebuilt_not_trusted(root: Path) -> None:
    project = load_project(root)
    run_check(project)
    path = root / project.config.cache_dir / collectable.NAME
    assert path.is_file()
    path.write_bytes(b"\x00garbage")
    _, findings = run_check(project)
    assert [f.file for f in findings if f.code == "no-tests-collected"] == ["tests/test_script.py"]


def test_no_cache_neither_reads_nor_writes_the_style_cache(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = load_project(root)
    path = root / project.config.cache_dir / collectable.NAME
    run_check(project, use_cache=False)
    assert not path.exists()
    run_check(project)
    assert path.is_file()
    parsed: list[object] = []
    monkeypatch.setattr(collectable, "file_style", lambda source: parsed.append(source) or "python")
    run_check(project, use_cache=False)
    assert len(parsed) == 1, "--no-cache parses again instead of trusting the cache"


@pytest.mark.parametrize("forged", [[False, "pytest"], [True], "pytest", 42, ["python"], [1], [False, "rm -rf /"],
                                    [True, "pytest", "x"], "rm -rf /"])
def test_a_forged_style_entry_is_not_trusted_blindly(root: Path, forged: object) -> None:
    """A well-formed cache whose entry is not a file's facts is a miss; one that states
    other facts is believed only as far as the content digest proves it is this file's entry."""
    project = load_project(root)
    script = (root / "tests" / "test_script.py").read_bytes()
    key = cache.digest_cache_key(collectable.KIND)
    path = root / project.config.cache_dir / collectable.NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    cache.save(path, key, {cache.content_digest(script): forged}, collectable.KIND)
    _, findings = run_check(project)
    flagged = [f.file for f in findings if f.code == "no-tests-collected"]
    # Facts, right or wrong ("it is a pytest file", "it has tests"): whoever can write the
    # cache directory can hide this warning, as with every cache; anything that is not such
    # facts (an old-format style, a number, a style that is none) is parsed again.
    trusted = repr(forged) in ("[False, 'pytest']", "[True]")  # not ==: [1] == [True]
    assert flagged == ([] if trusted else ["tests/test_script.py"])
    assert "Traceback" not in "".join(f.message for f in findings)


def test_a_warm_check_reads_no_test_file(root: Path, request: pytest.FixtureRequest) -> None:
    """The syntax and style caches are found by collection's digests (#15): on a warm run
    neither reads a file again only to hash it."""
    project = load_project(root)
    _, first = run_check(project)
    read: list[str] = request.getfixturevalue("files_read")  # from here on
    _, second = run_check(project)
    assert [name for name in read if name.startswith("test_")] == []
    assert second == first


def test_a_file_edited_after_collection_is_judged_and_kept_by_what_was_read(root: Path) -> None:
    """Collection's digest names the bytes it saw; a file edited since then is compiled and
    judged as it is now, and the verdict is kept under the digest of those bytes, never
    under the old content's (which would then answer for content it was not made from)."""
    from testfleet.registry import collect

    project = load_project(root)
    registry = collect(project, thorough=True, use_cache=False)
    ok, script = root / "tests" / "test_ok.py", root / "tests" / "test_script.py"
    old_ok, old_script = (cache.content_digest(p.read_bytes()) for p in (ok, script))
    ok.write_text(MARK + "def test_a(:\n    pass\n")
    script.write_text(MARK + "def test_now():\n    pass\n")

    found = syntax.syntax_findings(root, project.config.cache_dir, registry)
    assert [(f.file, f.code) for f in found] == [("tests/test_ok.py", "syntax")]
    kept = cache.load(root / project.config.cache_dir / syntax.NAME,
                      cache.digest_cache_key(syntax.KIND), syntax.KIND)
    assert old_ok not in kept and kept[cache.content_digest(ok.read_bytes())] is not None

    assert collectable.command_findings(project, registry) == []
    styles = cache.load(root / project.config.cache_dir / collectable.NAME,
                        cache.digest_cache_key(collectable.KIND), collectable.KIND)
    assert old_script not in styles and styles[cache.content_digest(script.read_bytes())] == [True]
