"""Clients pinned to the worker processes of one ``--workers N`` server.

A connection stays with the worker that accepted it, so a client limited to one connection is
pinned to one worker; ``/readyz`` names the worker (its pid) when there are several. Two things
can move such a client, and both are handled here rather than left to fail a test now and then:

- The server is ready once one worker answers; a worker still starting has no socket yet for the
  kernel to spread connections to, so every new connection lands on the others.
- The server closes a keep-alive connection left idle for ``PAUSEMESH_IDLE_CONNECTION_SECONDS``
  (5 s by default); httpx then opens a new one, which the kernel may hand to another worker. A
  client pinned while a late worker was awaited could sit idle that long and come back on
  another worker.
"""

from __future__ import annotations

import time

import httpx

from tests.support.server import ServerProcess

__all__ = ("pinned_clients", "wait_for_every_worker", "worker_of")

# Liveness bound: only a stuck system gets near it (never a timing assertion).
STUCK = 60.0
# Between two looks for a worker that has not answered yet (it is still starting).
_AGAIN_SECONDS = 0.05


def worker_of(client: httpx.Client) -> int:
    """The pid of the worker process that serves ``client``'s connection."""
    response = client.get("/readyz")
    assert response.status_code == 200, response.text
    worker: int = response.json()["worker"]
    return worker


def wait_for_every_worker(server: ServerProcess, count: int, *, deadline: float) -> None:
    """Return once ``count`` distinct workers have answered, each on a new connection."""
    seen: set[int] = set()
    while True:
        with httpx.Client(base_url=server.base_url, timeout=STUCK) as client:
            worker = worker_of(client)
        if worker not in seen:
            seen.add(worker)
            if len(seen) == count:
                return
        else:
            assert time.monotonic() < deadline, f"only {len(seen)} distinct workers answered"
            time.sleep(_AGAIN_SECONDS)


def _pin(server: ServerProcess, count: int, deadline: float) -> dict[int, httpx.Client]:
    found: dict[int, httpx.Client] = {}
    spare: list[httpx.Client] = []
    try:
        while len(found) < count:
            assert time.monotonic() < deadline, f"only {len(found)} distinct workers answered"
            client = httpx.Client(
                base_url=server.base_url,
                timeout=STUCK,
                limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            )
            worker = worker_of(client)
            if worker in found:
                spare.append(client)  # stays open until the end: the next client is accepted anew
            else:
                found[worker] = client
    except BaseException:
        for client in found.values():
            client.close()
        raise
    finally:
        for client in spare:
            client.close()
    return found


def pinned_clients(server: ServerProcess, count: int = 2) -> list[httpx.Client]:
    """``count`` clients, each on one connection to a different worker process."""
    deadline = time.monotonic() + STUCK
    wait_for_every_worker(server, count, deadline=deadline)
    while True:
        found = _pin(server, count, deadline)
        # Each connection asked again: still the worker it was found on (not reconnected).
        if all(worker_of(client) == worker for worker, client in found.items()):
            return list(found.values())
        for client in found.values():
            client.close()
        assert time.monotonic() < deadline, "the pinned connections kept moving between workers"
