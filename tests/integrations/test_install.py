"""#28 item 5: generated CI installs testfleet the way it was installed here (PEP 610)."""

from __future__ import annotations

import subprocess

from testfleet.integrations.install import configured, from_direct_url, this_install


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


def test_a_local_install_becomes_the_pinned_release_and_says_so() -> None:
    """#39 item 3: a path of this machine never reaches a committed file; the jobs install
    this version's release from the index, and the note (printed only) says why."""
    for data in ({"url": "file:///home/me/testfleet", "dir_info": {"editable": True}},
                 {"url": "file:///tmp/testfleet-0.1.0-py3-none-any.whl", "archive_info": {}},
                 {"url": "file:///srv/repo", "vcs_info": {"vcs": "git", "commit_id": "d" * 40}}):
        install = from_direct_url(data, "1.2.3")
        assert install.source == "index" and install.problem is None
        assert install.command == "python3 -m pip install 'testfleet[runner]==1.2.3'"
        assert install.note and data["url"] in install.note and "file:" not in install.command


def test_what_the_index_cannot_pin_stops_the_job_and_says_so() -> None:
    for install in (from_direct_url({"url": 3}), from_direct_url(None, "1.3.0.dev2"),
                    from_direct_url({"url": "file:///home/me/tf", "dir_info": {}}, "2.0+local")):
        assert install.source == "unreproducible" and install.problem
        assert "[tool.testfleet.ci] install" in install.problem
        assert "file:" not in install.command
        done = subprocess.run(["bash", "-e", "-c", install.command], capture_output=True,
                              text=True, timeout=10, check=False)
        assert done.returncode == 1 and done.stdout.startswith("::error title=testfleet::")


def test_a_configured_install_of_a_path_of_this_machine_is_refused() -> None:
    for command in ("pip install /home/me/testfleet", "pip install -e ~/src/testfleet",
                    "pip install 'testfleet @ file:///srv/tf'", "pip install --editable=/x"):
        assert configured(command).problem, command
    for command in ("pip install -e '.[dev]'", "pip install -r requirements-ci.txt",
                    "python3 -m pip install 'testfleet[runner]==0.2.0'"):
        assert configured(command).problem is None, command


def test_this_checkout_is_an_editable_install() -> None:
    """The venv of these tests installs testfleet with `pip install -e`: the release pin."""
    install = this_install()
    assert install.source in ("index", "vcs")
    if install.note:
        assert "editable" in install.note and "file:" not in install.command
