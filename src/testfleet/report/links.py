"""Links from the report to the repository host: files at the commit, ``#123`` issues.

Under GitHub Actions the environment names the server, repository and commit, so the
ledger's ``file:line`` cells and ``#123`` references become links. Everything else
(other CI systems, local runs) gets plain text; the report never guesses a URL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_SHA = re.compile(r"^[0-9a-fA-F]{7,64}$")


@dataclass(frozen=True)
class RepoLinks:
    """``server/repo`` plus the commit and the project's directory inside the checkout."""

    server: str
    repo: str
    sha: str
    prefix: str = ""  # "" or "sub/dir/"

    def file(self, path: str, line: int = 0) -> str:
        url = f"{self.server}/{self.repo}/blob/{self.sha}/{quote(self.prefix + path)}"
        return url + (f"#L{line}" if line > 0 else "")

    def issue(self, number: int, repo: str | None = None) -> str:
        target = repo if repo and _REPO.match(repo) else self.repo
        return f"{self.server}/{target}/issues/{number}"


def github_links(environ: Mapping[str, str], project_root: Path) -> RepoLinks | None:
    """Links for a GitHub Actions run, or ``None`` when the environment is not complete."""
    server = environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    repo = environ.get("GITHUB_REPOSITORY", "")
    sha = environ.get("GITHUB_SHA", "")
    if not (server.startswith("https://") and _REPO.match(repo) and _SHA.match(sha)):
        return None
    if not re.match(r"^https://[A-Za-z0-9.-]+(:\d+)?$", server):
        return None
    prefix = ""
    workspace = environ.get("GITHUB_WORKSPACE")
    if workspace:
        try:
            rel = project_root.resolve().relative_to(Path(workspace).resolve()).as_posix()
        except (ValueError, OSError):
            rel = "."
        prefix = "" if rel in ("", ".") else rel + "/"
    return RepoLinks(server, repo, sha, prefix)
