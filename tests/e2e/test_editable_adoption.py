"""#39 item 3: the install the README documents (editable, from a checkout) must not leak
into the CI it generates. A fresh virtual environment installs this checkout editable, adopts
miles' real CI (tests/fixtures/real_trees/miles-ci) with it, and no file it writes holds a
path of this machine: the jobs install this version's release from the package index, and
init says why on the terminal."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
MILES = REPO / "tests" / "fixtures" / "real_trees" / "miles-ci"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def _run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "TESTFLEET_", "PYTHON", "VIRTUAL_ENV", "BUILDKITE"))}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", NO_COLOR="1")
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)


@pytest.mark.timeout(900)
def test_an_editable_install_adopts_miles_without_writing_a_local_path(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = str(env_dir / "bin" / "python")
    # the dependencies come from this interpreter's packages (a .pth); the install under
    # test is testfleet itself, editable from this checkout, as the README installs it
    purelib = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    Path(purelib, "outer.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    proc = _run([py, "-m", "pip", "install", "-q", "--no-deps", "-e", str(REPO)])
    out = proc.stdout + proc.stderr
    offline = "Could not find a version that satisfies" in out or "NewConnectionError" in out
    if proc.returncode and offline and os.environ.get("CI") != "true":
        pytest.skip("no package index reachable for the isolated build (CI=true fails)")
    assert proc.returncode == 0, out[-3000:]
    where = _run([py, "-c", "import testfleet; print(testfleet.__file__)"]).stdout.strip()
    assert where.startswith(str(REPO)), where  # this checkout, editable
    tree = tmp_path / "miles"
    shutil.copytree(MILES, tree)
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    proc = _run([str(env_dir / "bin" / "testfleet"), "init", "--from-existing", "--github",
                 "--allow-findings"], cwd=tree)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "editable checkout" in out and f"the release {VERSION} from the package index" in out
    written = [p for p in tree.rglob("*") if p.is_file() and before.get(p) != p.read_bytes()]
    assert any(p.name == "testfleet.yml" for p in written)
    for path in written:
        text = path.read_text(encoding="utf-8")
        for local in ("file://", str(REPO), str(env_dir), str(tmp_path)):
            assert local not in text, (path, local)
    pinned = f"python3 -m pip install 'testfleet[runner]=={VERSION}'"
    job_action = (tree / ".github/actions/testfleet-job/action.yml").read_text()
    assert pinned in job_action and pinned in (tree / ".github/workflows/testfleet.yml").read_text()
