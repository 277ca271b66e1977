"""#28 item 5: generated CI installs testfleet the way it was installed here (PEP 610)."""

from __future__ import annotations

import subprocess

from testfleet.integrations.install import from_direct_url, this_install


def test_no_record_means_the_index_pinned() -> None:
    install = from_direct_url(None, "1.2.3")
    assert install.command == "python3 -m pip install 'testfleet[runner]==1.2.3'"
    assert install.source == "index" and install.problem is None


def test_a_git_install_is_reproduced_at_its_commit_without_credentials() -> None:
    install = from_direct_url({
        "url": "https://user:ghp_secret@github.com/org/testfleet.git",
        "vcs_info": {"vcs": "git", "commit_id": "a" * 40, "requested_revision": "main"}})
    assert install.source == "vcs" and install.problem is None
    assert install.command == ("python3 -m pip install "
                               f"'testfleet[runner] @ git+https://github.com/org/testfleet.git@{'a' * 40}'")
    assert "ghp_secret" not in install.command and "user" not in install.command
    sub = from_direct_url({"url": "https://github.com/org/mono", "subdirectory": "py",
                           "vcs_info": {"vcs": "git", "commit_id": "b" * 40}})
    assert sub.command.endswith(f"@{'b' * 40}#subdirectory=py'")


def test_a_remote_archive_keeps_its_hash() -> None:
    install = from_direct_url({"url": "https://example.org/testfleet-1.0.tar.gz",
                               "archive_info": {"hashes": {"sha256": "c" * 64}}})
    assert install.command.endswith(f"testfleet-1.0.tar.gz#sha256={'c' * 64}'")


def test_a_local_install_cannot_be_reproduced_and_says_so() -> None:
    for data in ({"url": "file:///home/me/testfleet", "dir_info": {"editable": True}},
                 {"url": "file:///tmp/testfleet-0.1.0-py3-none-any.whl", "archive_info": {}},
                 {"url": "file:///srv/repo", "vcs_info": {"vcs": "git", "commit_id": "d" * 40}},
                 {"url": 3}):
        install = from_direct_url(data)
        assert install.source == "unreproducible" and install.problem
        assert "[tool.testfleet.ci] install" in install.problem
        done = subprocess.run(["bash", "-e", "-c", install.command], capture_output=True,
                              text=True, timeout=10, check=False)
        assert done.returncode == 1 and done.stdout.startswith("::error title=testfleet::")


def test_this_checkout_is_an_editable_install() -> None:
    """The venv of these tests installs testfleet with `pip install -e`: not reproducible."""
    install = this_install()
    assert install.source in ("unreproducible", "index", "vcs")
    if install.source == "unreproducible":
        assert "editable" in install.detail
