"""Terminal means terminal: follow-ups racing on one input-required A2A task.

The official ``a2a-sdk`` client against a real ``pausemesh demo`` process (SQLite): 20
concurrent follow-ups with different valid answers, over JSON-RPC, REST and streaming, make
one transition, one booking and one artifact, and every racer sees that final task or the
spec's refusal of a message to a terminal task.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

from tests.protocols.test_a2a_router import (
    BINDINGS,
    _demo,
    a2a_client,
    answer,
    ask,
    bookings,
    continuation_id,
    send,
)
from tests.support.a2a_races import assert_one_outcome, final_task, race_follow_ups
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture(name="data_dir", scope="module")
def data_dir_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("a2a-races")


@pytest.fixture(name="server", scope="module")
def server_fixture(data_dir: Path) -> Iterator[ServerProcess]:
    with _demo(data_dir) as server:
        yield server


async def test_twenty_racing_follow_ups_over_every_binding_make_one_completion(
    server: ServerProcess, data_dir: Path
) -> None:
    task = await ask(server)

    racers = await race_follow_ups([server], task.id)

    final = await final_task(server, task.id)
    booking = assert_one_outcome(final, racers)
    winners = [r for r in racers if r.refused is None]
    assert winners
    assert booking["flight"] in {r.flight for r in winners}
    assert bookings(data_dir, continuation_id(task)) == 1


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_message_to_a_completed_task_is_refused_as_unsupported(
    server: ServerProcess, data_dir: Path, binding: str
) -> None:
    task = await ask(server, binding)
    async with a2a_client(server, binding) as client:
        done = await send(client, answer(task.id, {"flight": "PM101"}))
        with pytest.raises(UnsupportedOperationError):
            await send(client, answer(task.id, {"flight": "PM202"}))
    async with a2a_client(server, binding, streaming=True) as client:
        with pytest.raises(UnsupportedOperationError):
            await send(client, answer(task.id, {"flight": "PM303"}))

    after = await final_task(server, task.id)
    assert MessageToDict(after) == MessageToDict(done)
    assert bookings(data_dir, continuation_id(task)) == 1


async def test_racing_follow_ups_after_a_restart_and_on_a_second_process_make_one_completion(
    tmp_path: Path,
) -> None:
    with _demo(tmp_path) as primary:
        task = await ask(primary)
        primary.restart()
        with _demo(tmp_path) as replica:
            racers = await race_follow_ups([primary, replica], task.id)
            final = await final_task(replica, task.id)
            seen = await final_task(primary, task.id)

    assert_one_outcome(final, racers)
    assert MessageToDict(seen) == MessageToDict(final)
    assert bookings(tmp_path, continuation_id(task)) == 1
