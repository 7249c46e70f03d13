"""``core/large_json.py``: JSON too large for one call, coded a piece at a time between the
event loop's other work, and always what one msgspec call would give."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable
from typing import Any, TypeVar

import msgspec
import pytest

from pausemesh.core.large_json import (
    CHUNK_BYTES,
    decode_lines,
    encode_chunks,
    encode_compact,
    encode_lines,
    encode_lines_now,
    sliced,
)

T = TypeVar("T")

# About 12 MB in 200 messages; quotes, backslashes and line breaks inside the strings.
LONG = [
    {"id": f"m{n}", "role": "user", "content": f'{n} "quoted", back\\slash,\nnext line ' * 2_000}
    for n in range(200)
]


async def _turns_during(work: Awaitable[T]) -> tuple[T, int]:
    """``work``'s result, and how many times the loop ran another task meanwhile."""
    turns = 0
    done = False

    async def tick() -> None:
        nonlocal turns
        while not done:
            turns += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    turns = 0
    result = await work
    done = True
    await ticker
    return result, turns


@pytest.mark.parametrize(
    "value",
    [[], [1], ["a", {"b": [1, 2]}, None], LONG[:3], LONG],
    ids=["empty", "one", "mixed", "three", "long"],
)
async def test_the_line_form_decodes_to_the_same_value_everywhere(value: list[Any]) -> None:
    lines = await encode_lines(value)
    assert lines == encode_lines_now(value)
    assert msgspec.json.decode(lines) == value  # any JSON reader reads it
    assert await decode_lines(lines) == value
    assert await decode_lines(lines.decode()) == value


async def test_a_long_array_in_the_line_form_has_one_element_per_line() -> None:
    lines = await encode_lines(LONG)
    assert lines.startswith(b"[\n")
    assert lines.endswith(b"\n]")
    assert lines.count(b"\n") == len(LONG) + 1
    assert await encode_lines(LONG, prefix=b'{"m":', suffix=b"}") == b'{"m":' + lines + b"}"


async def test_a_long_array_stored_in_another_form_still_decodes() -> None:
    compact = msgspec.json.encode(LONG)
    pretty = msgspec.json.format(compact, indent=2)
    # A ",\n" inside an element of pretty-printed JSON does not split it: decoded whole.
    assert await decode_lines(compact) == LONG
    assert await decode_lines(pretty) == LONG
    with pytest.raises(msgspec.DecodeError):
        await decode_lines(b"[\n" + compact[1:-1] + b",\n{")


async def test_the_chunks_of_a_compact_array_join_to_one_msgspec_encode() -> None:
    chunks = await encode_chunks(LONG)
    assert b"".join(chunks) == msgspec.json.encode(LONG)
    longest = max(len(msgspec.json.encode(m)) for m in LONG)
    assert all(len(c) <= CHUNK_BYTES + longest + 1 for c in chunks)
    assert len(chunks) > 10
    assert await encode_chunks([]) == [b"[]"]
    assert await encode_compact(LONG, lambda m: msgspec.json.encode(m["id"])) == (
        msgspec.json.encode([m["id"] for m in LONG])
    )


async def test_coding_a_long_array_leaves_the_loop_its_turns() -> None:
    """Each direction of 12 MB takes several milliseconds: it is sliced, never one step (in
    one msgspec call, the loop would run nothing else until it returns)."""
    lines, encoding = await _turns_during(encode_lines(LONG))
    decoded, decoding = await _turns_during(decode_lines(lines))
    assert decoded == LONG
    assert encoding >= 2
    assert decoding >= 2


async def test_long_jobs_go_one_at_a_time_and_the_loop_turns_between_every_two_slices() -> None:
    """Two long jobs at once: the loop's other work (a ticker, "t") gets a turn after every
    slice, and the second job, after its first slice, waits for the first to finish: a turn
    of the loop runs one slice however many long jobs there are."""
    order: list[str] = []

    def work(name: str) -> Any:
        def step(item: Any) -> Any:
            order.append(name)
            # Each element fills a slice on its own.
            for _ in range(50_000):
                msgspec.json.encode(item)
            return item

        return step

    async def tick() -> None:
        while True:
            order.append("t")
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    await asyncio.gather(sliced(range(6), work("a")), sliced(range(6), work("b")))
    ticker.cancel()

    slices = [x for x in order if x != "t"]
    assert sorted(slices) == ["a"] * 6 + ["b"] * 6
    # Once both have started (their first slices run at once), never two slices in a turn.
    assert all("t" in pair for pair in itertools.pairwise(order[order.index("b") :]))
    # Each job's first slice at once, then the lane: the rest of a, then the rest of b.
    assert slices == ["a", "b", "a", "a", "a", "a", "a", "b", "b", "b", "b", "b"]
