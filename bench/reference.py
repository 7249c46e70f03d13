"""The TypeScript reference server (``aantenore/pausemesh``), built and run for ``bench/http.py``.

Nothing of the reference is in this repository: ``--reference PATH`` names a checkout or a git
directory of ``https://github.com/aantenore/pausemesh``. Its ``HEAD`` is exported into a cache
directory (``$XDG_CACHE_HOME/pausemesh-bench``, else ``~/.cache/pausemesh-bench``), installed
with the pnpm its ``packageManager`` names (through ``npx``) and built with its own ``build``
script. It needs Node >= 24 (``node:sqlite``); when the ``node`` on ``PATH`` is older, Node 24 is
installed from the npm registry (the ``node-<os>-<arch>`` package) into the same cache.

The server is its own ``node dist/cli.js serve``, configured by its ``PAUSEMESH_*`` variables:
SQLite file, host, port and log level. Its store opens the file in WAL mode with
``busy_timeout`` 5,000 ms and leaves ``synchronous`` at the build default, which is FULL (2) in
Node's bundled SQLite (``DEFAULT_WAL_SYNCHRONOUS=2``): the same durability as ours.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path

from tests.support.server import ServerProcess

__all__ = (
    "NODE_VERSION",
    "ReferenceServer",
    "build_reference",
    "cache_dir",
    "node_24",
    "node_version",
)

NODE_VERSION = "24.22.3"  # the Node line the reference declares (engines: node >= 24)

# Our --log-level names to pino's (the reference's logger).
_PINO_LEVELS = {"warning": "warn", "critical": "fatal"}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pausemesh-bench"


def node_version(node: str | Path) -> str:
    """``node --version`` without its ``v``, e.g. ``24.22.3``."""
    return (
        subprocess.run([str(node), "--version"], check=True, capture_output=True, text=True)
        .stdout.strip()
        .lstrip("v")
    )


def node_24(cache: Path) -> Path:
    """A Node >= 24 binary: the one on PATH if new enough, else Node 24 from npm, cached."""
    system = shutil.which("node")
    if system is not None and int(node_version(system).split(".", 1)[0]) >= 24:
        return Path(system)
    os_name = {"Linux": "linux", "Darwin": "darwin"}.get(platform.system())
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )
    if os_name is None or arch is None:
        msg = f"no Node {NODE_VERSION} package for {platform.system()} {platform.machine()}"
        raise RuntimeError(msg)
    package = f"node-{os_name}-{arch}"
    prefix = cache / f"node-{NODE_VERSION}"
    node = prefix / "node_modules" / package / "bin" / "node"
    if not node.exists():
        npm = shutil.which("npm")
        if npm is None:
            msg = "Node >= 24 is needed for the reference, and npm to install it"
            raise RuntimeError(msg)
        print(f"installing Node {NODE_VERSION} from npm ({package}) into {prefix}")
        spec = f"{package}@{NODE_VERSION}"
        quiet = ["--no-audit", "--no-fund", "--silent"]
        subprocess.run([npm, "install", "--prefix", str(prefix), *quiet, spec], check=True)
    return node


def _git_dir(source: Path) -> Path:
    """The git directory of a checkout (``.git``) or of a bare/mirror directory."""
    dotgit = source / ".git"
    if dotgit.exists():
        return dotgit
    if (source / "HEAD").is_file() and (source / "objects").is_dir():
        return source
    msg = f"{source} is neither a checkout nor a git directory of aantenore/pausemesh"
    raise RuntimeError(msg)


def export_commit(git: list[str], commit: str, target: Path) -> None:
    """The files of ``commit`` into ``target``; ``git`` names the repository (``--git-dir``
    or ``-C``)."""
    with tempfile.TemporaryFile() as archive:
        subprocess.run([*git, "archive", "--format=tar", commit], check=True, stdout=archive)
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(target, filter="data")


def build_reference(source: Path, cache: Path, node: Path) -> tuple[Path, str]:
    """Export ``HEAD`` of ``source``, install and build it once per commit: (build dir, commit)."""
    git_dir = _git_dir(source)
    git = ["git", f"--git-dir={git_dir}"]
    commit = subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    target = cache / f"reference-{commit[:12]}"
    stamp = target / ".built"
    if stamp.exists():
        return target, commit
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    export_commit(git, "HEAD", target)
    manager = json.loads((target / "package.json").read_text()).get("packageManager", "")
    if not re.fullmatch(r"pnpm@[0-9][0-9A-Za-z.+-]*", manager):
        msg = f"the reference's packageManager is {manager!r}, expected pnpm@<version>"
        raise RuntimeError(msg)
    npx = shutil.which("npx")
    if npx is None:
        msg = "npx (npm) is needed to run the reference's pnpm"
        raise RuntimeError(msg)
    # Node 24 first on PATH: npx, pnpm and the build's scripts all run on it.
    env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    print(f"building the reference {commit[:12]} with {manager} in {target}")
    for step in (["install", "--frozen-lockfile"], ["build"]):
        subprocess.run([npx, "--yes", manager, *step], cwd=target, env=env, check=True)
    stamp.touch()
    return target, commit


class ReferenceServer(ServerProcess):
    """``node dist/cli.js serve`` of a built reference, on one SQLite file."""

    def __init__(
        self, build: Path, node: Path, database: Path, log_level: str, *, port: int | None = None
    ) -> None:
        env: Mapping[str, str] = {
            "PAUSEMESH_DATABASE_PATH": str(database),
            "PAUSEMESH_LOG_LEVEL": _PINO_LEVELS.get(log_level, log_level),
            "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        super().__init__([], env=env, port=port, cwd=build, ready_path="/readyz")
        self.node = node
        self.build = build

    def command(self) -> list[str]:
        return [str(self.node), str(self.build / "dist" / "cli.js"), "serve"]

    def _environment(self) -> dict[str, str]:
        env = super()._environment()
        env.update(PAUSEMESH_HOST=self.host, PAUSEMESH_PORT=str(self.port))
        return env
