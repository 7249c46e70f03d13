"""``bench/stack_floor.py``, the stack under PauseMesh alone (``bench/http.py --floor``).

Its figures stand for what Litestar on uvicorn costs without PauseMesh, so the apps must answer
the lean client's two requests as PauseMesh does, Litestar must really parse what PauseMesh's
routes parse, and ``--workers N`` must really be N processes. The bench's split of a server's
CPU and connections over its worker processes is checked on the bare floor app (the cheapest
server the bench starts).
"""

from __future__ import annotations

import argparse
import io
from contextlib import redirect_stdout
from pathlib import Path

import httpx
import pytest
from bench.http import (
    Totals,
    floor_lines,
    machine_shares,
    machine_ticks,
    measure,
    native_lifecycles,
    serving_processes,
)
from bench.native_client import compiler
from bench.stack_floor import APPS, FloorServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(compiler() is None, reason="no C compiler on this machine"),
]


@pytest.mark.parametrize("app", list(APPS))
def test_each_floor_app_serves_the_native_clients_lifecycles_from_as_many_workers_as_asked(
    client_binary: Path, app: str
) -> None:
    with FloorServer(app, 2) as server:
        run = native_lifecycles(client_binary, server.base_url, seconds=0.5, concurrency=4)
        workers = serving_processes(server.pid)
    # The client stops with an error on any other status or a missing id or token.
    assert run.count > 0
    assert len(workers) == 2
    assert server.pid not in workers  # the supervisor serves nothing itself


@pytest.mark.parametrize("workers", [1, 2])
def test_the_bench_gives_each_serving_process_its_cpu_and_the_connections_it_holds(
    client_binary: Path, workers: int
) -> None:
    # The connections are counted halfway through: a second in, on a loaded machine too.
    args = argparse.Namespace(
        warmup=0.2, seconds=2.0, concurrency=6, native=client_binary, store_metrics=False
    )
    totals = Totals(f"asgi -w {workers}", workers)
    measure(args, FloorServer("asgi", workers), totals)  # starts and stops the server
    ((wall, shares),) = totals.per_process
    assert wall > 0
    assert len(shares) == workers
    # Every connection of the client is held by exactly one serving process.
    assert sum(held for _, held in shares) == 6
    # A process that held connections served them: it used CPU.
    assert all(cpu > 0 for cpu, held in shares if held)
    rows = dict(totals.process_rows())
    assert len(rows["CPU per server process (% of one core)"].split()) == workers
    assert rows["client connections per server process"].split() == [
        str(held) for _, held in shares
    ]
    ((idle, iowait, softirq),) = totals.machine
    # Shares of the whole machine's time over the round: the client and server were busy.
    assert 0 <= idle < 1
    assert 0 <= iowait <= 1
    assert 0 <= softirq <= 1
    assert idle + iowait + softirq < 1
    assert len(rows["machine idle, iowait, softirq (% of all)"].split()) == 3


def test_the_machine_shares_are_idle_iowait_and_softirq_of_all_the_time_spent() -> None:
    # /proc/stat's order: user, nice, system, idle, iowait, irq, softirq, steal.
    before = [100, 0, 50, 1000, 10, 0, 5, 0]
    after = [120, 0, 50, 1050, 30, 0, 15, 0]  # 100 ticks: 20 user, 50 idle, 20 iowait, 10 softirq
    assert machine_shares(before, after) == pytest.approx((0.5, 0.2, 0.1))
    assert len(machine_ticks()) == 8


def test_the_litestar_floor_parses_the_body_and_headers_pausemesh_parses() -> None:
    with FloorServer("litestar", 1) as server:
        created = httpx.post(server.url("/v1/continuations"), json={"payload": {"a": 1}})
        resume = server.url("/v1/continuations/c-7/resume")
        headers = {"idempotency-key": "k-1", "authorization": "PauseMesh t"}
        resumed = httpx.post(resume, json={"payload": {}}, headers=headers)
        unsigned = httpx.post(resume, json={"payload": {}}, headers={"idempotency-key": "k-2"})
        malformed = httpx.post(
            server.url("/v1/continuations"),
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
    assert created.status_code == 201
    assert created.json()["continuation"]["status"] == "pending"
    assert created.json()["resumeToken"]
    assert resumed.status_code == 200
    assert resumed.json() == {"continuation": {"continuationId": "c-7", "status": "resolved"}}
    # The handler saw the headers that came and the one that did not.
    assert unsigned.json()["continuation"]["status"] == "pending"
    assert malformed.status_code == 400


def _totals(label: str, workers: int, *, count: int, cpu: float, client_cpu: float) -> Totals:
    totals = Totals(label, workers)
    totals.count, totals.wall, totals.cpu, totals.client_cpu = count, 1.0, cpu, client_cpu
    return totals


def test_the_floor_lines_split_the_servers_cpu_into_the_stacks_and_pausemeshs() -> None:
    results = [
        _totals("serve -w 2", 2, count=1000, cpu=1.2, client_cpu=0.1),
        _totals("Litestar -w 2", 2, count=4000, cpu=2.0, client_cpu=0.4),
    ]
    out = io.StringIO()
    with redirect_stdout(out):
        floor_lines(results, [2], raw=5000.0, cores=2)
    # 1.20 ms per lifecycle = 0.50 of the stack + 0.70 of PauseMesh; the goal is 0.8 of 2,500 =
    # 2,000/s, at which the client takes 0.2 of a core: the server may use 1.8 cores (two
    # processes may use two), so 0.90 ms per lifecycle.
    assert (
        "-w 2: server CPU per lifecycle 1.20 ms, of which the stack alone 0.50 and PauseMesh"
        " 0.70; 0.8 of raw commits ÷ 2 (2,000/s) leaves 0.90 ms in all"
    ) in out.getvalue()
