"""The fast collector agrees with a full-parse collector on a generated realistic tree."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from testfleet.config import load_project
from testfleet.registry import collect

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str):  # type: ignore[no-untyped-def]
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_generated_tree_matches_full_parse(tmp_path: Path) -> None:
    gen, bench = load("gen_tree"), load("bench_collect")
    root = tmp_path / "fleet"
    gen.generate(root, 300, seed=7)
    registry = collect(load_project(root), use_cache=False)
    assert not [f for f in registry.findings if f.severity == "error"]
    assert [r.to_json() for r in registry.registrations] == bench.reference(root)
    assert len(registry.files) == 300
