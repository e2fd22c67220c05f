"""Published servers confined by ``sandbox`` (docs/sandbox.md), driven by the official Python
SDK through ``evoctl shim``: ``@modelcontextprotocol/server-filesystem`` with one folder,
``mcp-server-git`` with one repository, ``mcp-server-time`` with nothing and no network. Each
answers a call, and each is refused what its sandbox leaves out: ``fs_wide`` and ``repos`` are
told by their own arguments they may go further than their sandbox allows, so the refusal seen
there is the kernel's (EACCES), not the server's own check.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from evo_harness import HERE, Evo, make_tmp, text, unwrapped
from mcp.client.client import Client

pytestmark = pytest.mark.anyio

IDS = ("fs", "fs_wide", "git", "repos", "time")


def git_repo(path: Path) -> None:
    path.mkdir()
    (path / "f.txt").write_text("first\n")
    for args in (["init", "-q"], ["add", "f.txt"], ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "first"]):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)


@pytest.fixture(scope="module")
def confined() -> Iterator[tuple[Evo, Path]]:
    tmp = make_tmp()
    home = tmp / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Sandboxed\n\temail = sandboxed@example.invalid\n")
    notes = tmp / "notes"
    notes.mkdir()
    (notes / "n.txt").write_text("note one")
    (tmp / "secret.txt").write_text("not for servers")
    git_repo(tmp / "repo")
    git_repo(tmp / "other")
    scripts = Path(sys.executable).parent
    # The documented entries (docs/sandbox.md); npx finds the package installed in this
    # folder (tests/run's npm ci), so it runs with `cwd` here and this folder readable.
    filesystem = {"command": "npx", "cwd": str(HERE), "sandbox": {"read": [str(HERE)], "write": [str(notes)]}}
    git_sandbox = {"read": ["~/.gitconfig"], "write": [str(tmp / "repo")], "network": False}
    config: dict[str, Any] = {
        "mcpServers": {
            "fs": filesystem | {"args": ["--offline", "-y", "@modelcontextprotocol/server-filesystem", str(notes)]},
            "fs_wide": filesystem | {"args": ["--offline", "-y", "@modelcontextprotocol/server-filesystem", str(tmp)]},
            "git": {"command": str(scripts / "mcp-server-git"), "args": ["--repository", str(tmp / "repo")], "sandbox": git_sandbox},
            "repos": {"command": str(scripts / "mcp-server-git"), "sandbox": git_sandbox},
            "time": {
                "command": sys.executable,
                "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                "sandbox": {"network": False},
            },
        }
    }
    daemon = Evo(tmp=tmp, env={"HOME": str(home)})
    daemon.write_config(config)
    try:
        daemon.start()
        daemon.wait_ready(IDS)
        yield daemon, tmp
    finally:
        daemon.stop()
        shutil.rmtree(tmp, ignore_errors=True)


async def call(evo: Evo, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
    async with unwrapped(), Client(evo.shim_params("legacy"), mode="legacy") as client:
        result = await client.call_tool(tool, args)
        return text(result), bool(result.is_error)


def refused_by_the_kernel(said: str) -> bool:
    return "eacces" in said.lower() or "permission denied" in said.lower()


async def test_filesystem_serves_its_folder_and_nothing_else(confined: tuple[Evo, Path]) -> None:
    evo, tmp = confined
    said, is_error = await call(evo, "fs_read_text_file", {"path": str(tmp / "notes" / "n.txt")})
    assert (said, is_error) == ("note one", False)
    said, is_error = await call(evo, "fs_write_file", {"path": str(tmp / "notes" / "new.txt"), "content": "written"})
    assert not is_error, said
    assert (tmp / "notes" / "new.txt").read_text() == "written"
    # Told it may read all of tmp, the server tries; the sandbox refuses.
    said, is_error = await call(evo, "fs_wide_read_text_file", {"path": str(tmp / "secret.txt")})
    assert is_error and refused_by_the_kernel(said) and "not for servers" not in said, said
    said, is_error = await call(evo, "fs_wide_read_text_file", {"path": str(tmp / "notes" / "n.txt")})
    assert (said, is_error) == ("note one", False)


async def test_git_works_in_its_repository_and_nowhere_else(confined: tuple[Evo, Path]) -> None:
    evo, tmp = confined
    repo = tmp / "repo"
    (repo / "g.txt").write_text("second\n")
    said, is_error = await call(evo, "git_add", {"repo_path": str(repo), "files": ["g.txt"]})
    assert not is_error, said
    said, is_error = await call(evo, "git_commit", {"repo_path": str(repo), "message": "from the sandbox"})
    assert not is_error, said
    log = subprocess.run(["git", "log", "-1", "--format=%an %s"], cwd=repo, capture_output=True, text=True, check=True)
    assert log.stdout.strip() == "Sandboxed from the sandbox"
    # Without --repository the server would serve any repository; the sandbox does not.
    said, is_error = await call(evo, "repos_git_status", {"repo_path": str(repo)})
    assert not is_error, said
    # GitPython reports an unreadable repository by its path alone (it takes it for no
    # repository): the error, and no status.
    said, is_error = await call(evo, "repos_git_status", {"repo_path": str(tmp / "other")})
    assert is_error and "On branch" not in said, said


async def test_time_answers_with_no_network(confined: tuple[Evo, Path]) -> None:
    evo, _ = confined
    said, is_error = await call(evo, "time_get_current_time", {"timezone": "Europe/Lisbon"})
    assert not is_error and "Europe/Lisbon" in said, said
    status = evo.ctl_json("status")
    time = next(s for s in status["servers"] if s["id"] == "time")
    assert time["sandbox"] == {"read": [], "write": [], "network": False, "enforced": True}
    # Its own network namespace: no interface of this machine, loopback included.
    assert os.readlink(f"/proc/{time['pid']}/ns/net") != os.readlink("/proc/self/ns/net")
