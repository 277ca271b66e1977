"""Generate a realistic testfleet project tree for benchmarks.

``generate(root, n_files, seed)`` writes ``root/pyproject.toml`` and ``n_files``
test files of about 200 lines each (module docstring, imports, constants,
classes with methods and docstrings, helpers, test functions). About 60% live
in the implicit CPU directory ``tests/fast`` (no marker; some mention
``register_buffer``-style names so the byte pre-filter has false positives);
the rest are registered explicitly with varied literal forms: keyword and
positional arguments, multi-line calls with comments, label lists and tuples,
imports from ``testfleet`` or a project module, CUDA+ROCm pairs, nightly-only
and disabled registrations, docstrings that mention a marker in prose, and
``if __name__ == "__main__":`` blocks. The same seed gives the same tree.

``profile="real"`` models a real GPU project's ``tests/`` instead (measured on a
public RL-training project replicated to ~10k files): files of 7 KB on average with
a long tail up to 60 KB (large end-to-end scripts: argument lists, config dicts,
many helpers), about 1.05 registrations per file (25% implicit CPU files, the rest
mostly one explicit registration, some CUDA+ROCm pairs), 40% of the files holding
5 ``register_ci_gate`` declarations each, and docstrings and strings that mention
the markers.

CLI: ``python benchmarks/gen_tree.py DIR [--files N] [--seed S] [--profile synthetic|real]``.
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
from pathlib import Path

LABELS = ["megatron", "fsdp", "rollout", "offload", "amd", "long", "ft-short", "ft-long",
          "model-scripts", "metrics", "vision", "kernels"]
CPU_STAGES = ["stage-a-cpu", "stage-b-cpu"]
CUDA_STAGES = ["stage-c-4-gpu-h200", "stage-c-8-gpu-h100", "stage-c-1-gpu-l4"]
ROCM_STAGES = ["stage-c-4-gpu-mi300x", "stage-c-8-gpu-mi325x"]
AREAS = ["megatron", "fsdp", "rollout", "offload", "kernels", "vision", "ft", "data", "models"]

CONFIG = """\
[project]
name = "generated-fleet"
version = "0.0.0"

[tool.testfleet]
roots = ["tests"]
pattern = "test_*.py"
exclude = ["tests/manual/**"]

[[tool.testfleet.implicit]]
path = "tests/fast"
backend = "cpu"
suite = "stage-a-cpu"
est_time = 5

[tool.testfleet.labels]
{labels}

[tool.testfleet.stages.stage-a-cpu]
backend = "cpu"
shards = 8

[tool.testfleet.stages.stage-b-cpu]
backend = "cpu"
command = "python"
shards = 4

[tool.testfleet.stages.stage-c-4-gpu-h200]
backend = "cuda"
runs_on = ["self-hosted", "h200"]
target_minutes = 60
max_shards = 16

[tool.testfleet.stages.stage-c-8-gpu-h100]
backend = "cuda"
runs_on = ["self-hosted", "h100"]
target_minutes = 60
max_shards = 16

[tool.testfleet.stages.stage-c-1-gpu-l4]
backend = "cuda"
runs_on = ["self-hosted", "l4"]
shards = 8

[tool.testfleet.stages.stage-c-4-gpu-mi300x]
backend = "rocm"
runs_on = ["self-hosted", "mi300x"]
target_minutes = 90
max_shards = 8
trusted_only = true

[tool.testfleet.stages.stage-c-8-gpu-mi325x]
backend = "rocm"
runs_on = ["self-hosted", "mi325x"]
shards = 4
disabled = "MI325X pool not provisioned yet, see #4100"
"""

IMPORTS = [
    "import os", "import sys", "import json", "import math", "import time", "import random",
    "import itertools", "import functools", "import dataclasses", "import tempfile",
    "from pathlib import Path", "from typing import Any, Optional", "from collections import defaultdict",
    "import numpy as np", "import pytest",
]
REASONS = [
    "Disable due to failure", "Flaky NCCL init on shared runners, see #{n}",
    "Kernel regression after driver upgrade, see #{n}", "OOM on 4 GPUs since model bump (#{n})",
    "Waiting for upstream fix in the rollout engine, see #{n}",
]


def _pick_labels(rng: random.Random, gpu: bool) -> list[str]:
    k = rng.choice([1, 1, 2, 2, 3]) if gpu else rng.choice([0, 1, 1, 2])
    return rng.sample(LABELS[:10], k)


def _fmt_labels(rng: random.Random, labels: list[str]) -> str:
    quote = rng.choice(["'", '"'])
    inner = ", ".join(f"{quote}{x}{quote}" for x in labels)
    return f"({inner}{',' if len(labels) == 1 else ''})" if rng.random() < 0.15 else f"[{inner}]"


def _call(rng: random.Random, marker: str, stage: str, labels: list[str] | None,
          nightly: bool, disabled: str | None) -> str:
    est = rng.choice([30, 60, 90, 120, 300, 450, 600, 900, 1200, 1800, 2400, 3600])
    style = rng.random()
    parts_kw: list[str] = []
    if labels:
        parts_kw.append(f"labels={_fmt_labels(rng, labels)}")
    if nightly:
        parts_kw.append("nightly=True")
    if disabled:
        parts_kw.append(f'disabled="{disabled}"')
    head = [str(est), f'"{stage}"'] if style < 0.2 else [f"est_time={est}", f'suite="{stage}"']
    args = head + parts_kw
    if style < 0.6:
        return f"{marker}({', '.join(args)})\n"
    lines = [f"{marker}("]
    for i, a in enumerate(args):
        comment = "  # measured on the nightly runners" if i == 0 and rng.random() < 0.3 else ""
        lines.append(f"    {a},{comment}")
    lines.append(")")
    return "\n".join(lines) + "\n"


def _body(rng: random.Random, name: str, target_lines: int, noise: bool) -> list[str]:
    out: list[str] = []
    cls = "".join(p.capitalize() for p in name.split("_")[:3]) or "Thing"
    n_classes = rng.randint(1, 3)
    for c in range(n_classes):
        out += [
            "", "",
            f"class {cls}Helper{c}:",
            f'    """Helper {c} for {name}: builds inputs and checks invariants.',
            "",
            "    Kept deliberately plain so the test reads top to bottom.",
            '    """',
            "",
            "    def __init__(self, size: int = 8, seed: int = 0) -> None:",
            "        self.size = size",
            "        self.seed = seed",
            "        self.items: list[int] = []",
        ]
        if noise:
            out.append('        self.register_buffer("scale", [1.0] * size)  # torch-style name')
        for m in range(rng.randint(2, 5)):
            out += [
                "",
                f"    def step_{m}(self, value: int) -> int:",
                f'        """Advance the state by one step ({m})."""',
                f"        total = sum(self.items) + value * {m + 1}",
                "        if total % 2:",
                "            total += 1",
                "        self.items.append(total)",
                "        return total",
            ]
    i = 0
    while len(out) < target_lines:
        out += [
            "", "",
            f"def test_{name}_{i}():",
            f'    """Case {i}: the helper stays consistent over a few steps."""',
            f"    helper = {cls}Helper0(size={rng.randint(2, 64)}, seed={i})",
            "    values = [helper.step_0(v) for v in range(5)]",
            "    assert len(values) == 5",
            '    assert all(isinstance(v, int) for v in values), f"bad values: {values}"',
            f"    data = {{'name': '{name}', 'count': len(values)}}",
            "    assert json.loads(json.dumps(data))['count'] == 5",
        ]
        i += 1
    return out


def _file_text(rng: random.Random, name: str, registration: str, mention: bool,
               noise: bool, main: bool) -> str:
    lines = [f'"""Tests for {name.replace("_", " ")}.']
    if mention:
        lines += ["", "Registered for CI with register_cuda_ci(...) at the top; see the docs",
                  "for how register_rocm_ci pairs are planned."]
    lines += ['"""', ""]
    lines += rng.sample(IMPORTS, rng.randint(4, 9))
    if registration:
        lines += ["", *registration.rstrip("\n").split("\n")]
    lines += ["", f"ITERATIONS = {rng.randint(1, 100)}", f'NAME = "{name}"']
    target = rng.randint(170, 230) - len(lines)
    lines += _body(rng, name, target, noise)
    if main:
        lines += ["", "", "def main() -> None:", f"    test_{name}_0()", "",
                  'if __name__ == "__main__":', "    main()"]
    return "\n".join(lines) + "\n"


def _registration(rng: random.Random, pair: float = 0.15) -> tuple[str, str, bool]:
    """(import line + calls, a stage it uses, whether the file needs a main block);
    ``pair``: the share of files with a CUDA+ROCm pair."""
    kind = rng.random()
    if pair != 0.15:  # stretch the draw so that the pair branch (kind >= 0.85) has this share
        kind *= 0.85 / (1 - pair)
    module = "testfleet" if rng.random() < 0.7 else "tests.ci.ci_register"
    disabled = (rng.choice(REASONS).format(n=rng.randint(1000, 9999)) if rng.random() < 0.12 else None)
    nightly = rng.random() < 0.1
    if kind < 0.25:
        stage = rng.choice(CPU_STAGES)
        call = _call(rng, "register_cpu_ci", stage, _pick_labels(rng, False), nightly, disabled)
        return f"from {module} import register_cpu_ci\n\n{call}", stage, stage == "stage-b-cpu"
    if kind < 0.75:
        stage = rng.choice(CUDA_STAGES)
        call = _call(rng, "register_cuda_ci", stage, _pick_labels(rng, True), nightly, disabled)
        return f"from {module} import register_cuda_ci\n\n{call}", stage, False
    if kind < 0.85:
        stage = rng.choice(ROCM_STAGES)
        marker = rng.choice(["register_rocm_ci", "register_amd_ci"])
        labels = [*[x for x in _pick_labels(rng, True) if x != "amd"][:2], "amd"]
        call = _call(rng, marker, stage, labels, nightly, disabled)
        return f"from {module} import {marker}\n\n{call}", stage, False
    cuda = rng.choice(CUDA_STAGES)
    labels = _pick_labels(rng, True)
    first = _call(rng, "register_cuda_ci", cuda, labels, nightly, None)
    reason = rng.choice(REASONS).format(n=rng.randint(1000, 9999)) if rng.random() < 0.5 else None
    second = _call(rng, "register_rocm_ci", rng.choice(ROCM_STAGES), labels, nightly, reason)
    return f"from {module} import register_cuda_ci, register_rocm_ci\n\n{first}{second}", cuda, False


PROFILES = ("synthetic", "real")

# The real profile: file sizes are log-normal (median ~4.7 KB, mean ~7 KB), capped.
REAL_MEAN_BYTES = 7_000
REAL_MAX_BYTES = 58_000  # the last block may overshoot by ~2 KB
REAL_SIGMA = 0.9
REAL_IMPLICIT = 0.25
REAL_GATED = 0.40
REAL_GATES_PER_FILE = 5
REAL_PAIRS = 0.067  # explicit files with a CUDA+ROCm pair: 0.25 + 0.75 * 1.067 = 1.05 per file
METRICS = ["train/loss", "train/grad_norm", "train/ppo_kl", "rollout/reward", "rollout/response_len",
           "perf/tokens_per_s", "perf/step_time", "eval/accuracy", "train/entropy", "train/lr"]


def _real_size(rng: random.Random) -> int:
    median = REAL_MEAN_BYTES / math.exp(REAL_SIGMA ** 2 / 2)
    return max(900, min(REAL_MAX_BYTES, int(rng.lognormvariate(math.log(median), REAL_SIGMA))))


def _gate(rng: random.Random, metric: str) -> str:
    steps = rng.choice(['"last"', '"all"', "[10, 20, 30]", "[50, 100]", "(5, 10, 15, 20)"])
    rel = rng.choice([0.05, 0.1, 0.2, 0.5])
    constraint = (f'{{"rel_up": {rel}, "abs_floor_up": 0.001, "rel_down": {rel * 2}, '
                  f'"abs_floor_down": 0.001}}')
    extra = rng.choice(["", ", hard_max=100.0", ", min_history=3", ", hard_min=0.0"])
    if rng.random() < 0.5:
        return f'register_ci_gate(metric_key="{metric}", steps={steps}, constraint={constraint}{extra})\n'
    return (f"register_ci_gate(\n    metric_key=\"{metric}\",\n    steps={steps},\n"
            f"    constraint={constraint},{extra.lstrip(',')}\n)\n")


def _real_block(rng: random.Random, name: str, i: int) -> list[str]:
    """One chunk of an end-to-end test script: argument lists, a config dict, a test."""
    kind = rng.random()
    if kind < 0.35:
        args = [f'        "--{rng.choice(["train", "rollout", "eval", "optim"])}-{k}", '
                f'"{rng.randint(1, 4096)}",' for k in range(rng.randint(6, 30))]
        return ["", "", f"def build_args_{i}(extra: list[str] | None = None) -> list[str]:",
                f'    """Command line of stage {i} for {name} (see register_cuda_ci in the CI docs)."""',
                "    args = [", *args, "    ]", "    return args + list(extra or [])"]
    if kind < 0.6:
        items = [f'    "{rng.choice(AREAS)}_{k}": {rng.choice(["True", "None", str(rng.random())[:6]])},'
                 for k in range(rng.randint(5, 25))]
        return ["", "", f"CONFIG_{i} = {{", *items, "}"]
    return ["", "", f"def test_{name}_{i}(tmp_path):",
            f'    """Case {i}: one training step end to end, compared against the reference run."""',
            f"    cfg = dict(seed={i}, steps={rng.randint(1, 50)}, name={name!r})",
            "    out = tmp_path / 'out.json'",
            "    out.write_text(json.dumps(cfg))",
            '    assert json.loads(out.read_text())["seed"] == cfg["seed"], "register_cpu_ci wrongly"',
            "    losses = [1.0 / (k + 1) for k in range(cfg['steps'])]",
            "    assert all(a >= b for a, b in zip(losses, losses[1:]))"]


def _real_file(rng: random.Random, name: str, registration: str, gates: list[str], main: bool) -> str:
    lines = [f'"""End-to-end test: {name.replace("_", " ")}.']
    if rng.random() < 0.3:
        lines += ["", "Registered with register_cuda_ci(est_time, suite, labels=[...]); a",
                  "register_ci_gate(metric_key=...) line gates its loss curve."]
    lines += ['"""', ""]
    lines += rng.sample(IMPORTS, rng.randint(5, 11))
    if registration:
        lines += ["", *registration.rstrip("\n").split("\n")]
    for gate in gates:
        lines += gate.rstrip("\n").split("\n")
    if rng.random() < 0.2:
        lines += ["", 'USAGE = "register_rocm_ci(...) must be a top-level statement"']
    lines += ["", f'NAME = "{name}"']
    target = _real_size(rng)
    size = sum(len(x) + 1 for x in lines)
    i = 0
    while size < target:
        block = _real_block(rng, name, i)
        size += sum(len(x) + 1 for x in block)
        lines += block
        i += 1
    if main:
        lines += ["", "", 'if __name__ == "__main__":', "    print(NAME)"]
    return "\n".join(lines) + "\n"


def _generate_real(tests: Path, n_files: int, rng: random.Random) -> None:
    per_dir = 40
    for i in range(n_files):
        implicit = rng.random() < REAL_IMPLICIT
        name = f"{rng.choice(AREAS)}_{i:05d}"
        gates = ([_gate(rng, m) for m in rng.sample(METRICS, REAL_GATES_PER_FILE)]
                 if rng.random() < REAL_GATED else [])
        if implicit:
            directory = tests / "fast" / f"pkg{i // per_dir % 75:02d}"
            registration, main = "", False
            if gates:
                registration = "from testfleet import register_ci_gate\n"
        else:
            directory = tests / "e2e" / rng.choice(AREAS) / f"group{i // per_dir % 40:02d}"
            registration, _stage, main = _registration(rng, pair=REAL_PAIRS)
            if gates:
                registration = "from testfleet import register_ci_gate\n" + registration
        directory.mkdir(parents=True, exist_ok=True)
        text = _real_file(rng, name, registration, gates, main)
        (directory / f"test_{name}.py").write_text(text, encoding="utf-8")


def generate(root: Path, n_files: int, seed: int, profile: str = "synthetic") -> None:
    """Write a project with ``n_files`` test files under ``root`` (replacing its tests/)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; one of {', '.join(PROFILES)}")
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    labels = "\n".join(f'{name} = "{name} tests"' for name in LABELS)
    (root / "pyproject.toml").write_text(CONFIG.format(labels=labels), encoding="utf-8")
    tests = root / "tests"
    if tests.exists():
        shutil.rmtree(tests)
    (tests / "ci").mkdir(parents=True)
    (tests / "__init__.py").write_text("", encoding="utf-8")
    (tests / "ci" / "__init__.py").write_text("", encoding="utf-8")
    (tests / "ci" / "ci_register.py").write_text(
        "from testfleet import register_amd_ci, register_cpu_ci, register_cuda_ci, register_rocm_ci\n",
        encoding="utf-8")
    if profile == "real":
        _generate_real(tests, n_files, rng)
        return
    per_dir = 40
    for i in range(n_files):
        implicit = rng.random() < 0.6
        if implicit:
            directory = tests / "fast" / f"pkg{i // per_dir % 75:02d}" / f"mod{i % 7}"
            registration, main = "", False
        else:
            area = rng.choice(AREAS)
            directory = tests / "e2e" / area / f"group{i // per_dir % 40:02d}"
            registration, _stage, main = _registration(rng)
        name = f"{rng.choice(AREAS)}_{i:05d}"
        directory.mkdir(parents=True, exist_ok=True)
        text = _file_text(rng, name, registration, mention=not implicit and rng.random() < 0.1,
                          noise=rng.random() < 0.1, main=main)
        (directory / f"test_{name}.py").write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", choices=PROFILES, default="synthetic")
    args = parser.parse_args(argv)
    generate(args.root, args.files, args.seed, args.profile)
    sizes = [p.stat().st_size for p in (args.root / "tests").rglob("test_*.py")]
    print(f"wrote {args.files} test files ({args.profile}) under {args.root}: "
          f"{sum(sizes) / 1e6:.1f} MB, mean {sum(sizes) / len(sizes) / 1e3:.1f} KB, "
          f"max {max(sizes) / 1e3:.1f} KB")


if __name__ == "__main__":
    main()
