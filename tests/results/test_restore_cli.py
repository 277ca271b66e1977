"""`testfleet disable` / `enable` on a tree like the seed's: eight MI300X files, one command."""

from __future__ import annotations

from pathlib import Path

from .conftest import cli

CONFIG = """\
roots = ["tests"]
[labels]
amd = "AMD"
[stages.stage-a-cpu]
backend = "cpu"
[stages.stage-c-mi300x]
backend = "rocm"
"""

TEMPLATE = (
    "from tests.ci.ci_register import register_amd_ci, register_cpu_ci  # ✓ {i}\r\n"
    "register_cpu_ci(5, \"stage-a-cpu\")\r\n"
    "register_amd_ci(\r\n"
    "    est_time=1900,  # long\r\n"
    "    suite=\"stage-c-mi300x\",\r\n"
    "    labels=[\"amd\"],\r\n"
    "    disabled={reason},\r\n"
    ")\r\n"
    "def test_{i}():\r\n"
    "    assert True\r\n"
)
SEED = '"MI300X runners fail at start-up, see #2230"'


def project(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "testfleet.toml").write_text(CONFIG)
    files = {}
    for i in range(8):
        files[f"tests/test_m{i}.py"] = TEMPLATE.format(i=i, reason=SEED).encode()
    files["tests/test_other.py"] = TEMPLATE.format(i=9, reason='"flaky NCCL, see #99"').encode()
    for name, data in files.items():
        (root / name).write_bytes(data)
    return root, files


def test_enable_ref_restores_eight_files_one_command_and_disable_round_trips(tmp_path: Path) -> None:
    root, before = project(tmp_path)
    proc = cli(root, "enable", "--ref", "#2230")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "8 registration(s) enabled in 8 file(s)" in proc.stdout
    for name, data in before.items():
        after = (root / name).read_bytes()
        if name == "tests/test_other.py":
            assert after == data  # cites #99, untouched
        else:  # the argument's line went, nothing else changed
            assert after == data.replace(b"    disabled=" + SEED.encode() + b",\r\n", b"")
    assert cli(root, "check").returncode == 0
    # and back: the same eight, one command each way, every other byte unchanged
    files = [f"tests/test_m{i}.py" for i in range(8)]
    proc = cli(root, "disable", *files, "--stage", "stage-c-mi300x",
               "--reason", "MI300X runners fail at start-up", "--ref", "#2230")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert all((root / n).read_bytes() == before[n] for n in before)
    again = cli(root, "enable", "--ref", "#2230")
    assert again.returncode == 0
    nothing = cli(root, "enable", "--ref", "#2230")
    assert nothing.returncode == 1 and "nothing changed" in nothing.stderr


def test_disable_with_until_inserts_when_absent_and_enable_by_file(tmp_path: Path) -> None:
    root, before = project(tmp_path)
    proc = cli(root, "disable", "tests/test_m0.py", "--stage", "stage-a-cpu", "--reason",
               "CPU runner image broken", "--ref", "https://github.com/o/r/issues/5",
               "--until", "2027-03-01")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    new = '"CPU runner image broken, see https://github.com/o/r/issues/5, until 2027-03-01"'
    assert (root / "tests/test_m0.py").read_bytes() == before["tests/test_m0.py"].replace(
        b'register_cpu_ci(5, "stage-a-cpu")', f'register_cpu_ci(5, "stage-a-cpu", disabled={new})'.encode())
    listing = cli(root, "list", "--format", "json")
    assert "CPU runner image broken" in listing.stdout
    proc = cli(root, "enable", "tests/test_m0.py", "--stage", "stage-a-cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (root / "tests/test_m0.py").read_bytes() == before["tests/test_m0.py"]  # every byte
    assert f"removed disabled={new}" in proc.stdout


def test_refusals_change_nothing(tmp_path: Path) -> None:
    root, before = project(tmp_path)
    cases = [
        (["disable", "tests/test_m0.py", "tests/test_m1.py", "--stage", "stage-c-mi300x",
          "--reason", "x"], "already disabled"),
        (["disable", "tests/test_nope.py", "--stage", "stage-a-cpu", "--reason", "x"],
         "no registration"),
        (["disable", "tests/test_m0.py", "--stage", "stage-zz", "--reason", "x"], "not a configured stage"),
        (["disable", "tests/test_m0.py", "--stage", "stage-a-cpu", "--reason", "x", "--ref", "2230"],
         "expected #N"),
        (["disable", "tests/test_m0.py", "--stage", "stage-a-cpu", "--reason", "x", "--until",
          "tomorrow"], "YYYY-MM-DD"),
        (["enable"], "say what to enable"),
        (["enable", "--ref", "#1", "tests/test_m0.py"], "say what to enable"),
    ]
    for args, message in cases:
        proc = cli(root, *args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert message in proc.stderr, (args, proc.stderr)
    assert all((root / n).read_bytes() == data for n, data in before.items())
