"""The lean load client of ``bench/http.py`` (``bench/lifecycle_client.c``): build it, run it.

On a 2-core machine the client shares the cores with the server it measures: the aiohttp
client spends about 0.5 ms of CPU per create+resume lifecycle, close to half of what the
server spends, and takes the core a second worker would use. The C client sends the same two
requests (same paths, headers and bodies as ``bench/http.py``'s aiohttp ``lifecycle``) over one
keep-alive connection per thread for a few microseconds of CPU each.

It is compiled with the machine's C compiler (``cc``, or ``$CC``) into the bench cache
directory, once per source version (the file name carries a hash of the source).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ("ClientRun", "build_client", "compiler", "run_client")

SOURCE = Path(__file__).resolve().parent / "lifecycle_client.c"


@dataclass(frozen=True, slots=True)
class ClientRun:
    """One run of the client: lifecycles done, wall and client CPU seconds, latencies (s)."""

    count: int
    wall: float
    cpu: float
    latencies: list[float]


def compiler() -> str | None:
    """The C compiler to build with (``$CC``, else ``cc`` or ``gcc`` on ``PATH``), if any."""
    named = os.environ.get("CC")
    if named:
        return shutil.which(named)
    return shutil.which("cc") or shutil.which("gcc")


def build_client(cache: Path) -> Path:
    """Compile ``lifecycle_client.c`` into ``cache`` (once per source version); its path."""
    cc = compiler()
    if cc is None:
        msg = "no C compiler found (set CC, or install gcc); use --client aiohttp"
        raise RuntimeError(msg)
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    binary = cache / f"lifecycle_client-{digest}"
    if not binary.exists():
        cache.mkdir(parents=True, exist_ok=True)
        partial = binary.with_suffix(".partial")
        subprocess.run(
            [cc, "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o", str(partial), str(SOURCE)],
            check=True,
        )
        partial.replace(binary)  # atomic: a concurrent build never runs a half-written file
    return binary


def run_client(
    binary: Path,
    base_url: str,
    *,
    seconds: float,
    concurrency: int,
    create: object,
    resume: object,
) -> ClientRun:
    """Drive ``base_url`` for ``seconds`` with ``concurrency`` lifecycles in flight.

    ``create`` is the ``POST /v1/continuations`` body, ``resume`` the resume body (both
    encoded as JSON). Raises ``RuntimeError`` with the client's message when a request fails.
    """
    address = urlsplit(base_url)
    if address.hostname is None or address.port is None:
        msg = f"base URL needs a host and a port: {base_url}"
        raise ValueError(msg)
    command = [
        str(binary),
        address.hostname,
        str(address.port),
        str(seconds),
        str(concurrency),
        json.dumps(create, separators=(",", ":")),
        json.dumps(resume, separators=(",", ":")),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        msg = f"lifecycle client failed ({done.returncode}): {done.stderr.strip()}"
        raise RuntimeError(msg)
    first, *rest = done.stdout.splitlines()
    count, wall, cpu = first.split()
    return ClientRun(
        count=int(count),
        wall=float(wall),
        cpu=float(cpu),
        latencies=[int(line) / 1e6 for line in rest],
    )
