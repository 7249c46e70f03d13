"""JSON too large to code in one call: encoded and decoded piece by piece, between the loop's
other work.

msgspec holds the GIL for a whole ``encode``/``decode`` call, so one call on an 8 MB transcript
holds the event loop (every other request of the process, ``/healthz`` included) for 5-15 ms,
and a worker thread would hold it just the same. A list is therefore coded one element at a
time, in slices of at most ``SLICE_SECONDS`` of work; the slices of every large job of a loop
take turns through one lock, so an iteration of the loop runs at most one slice, however many
large threads are read at once. A value that fits in one slice never waits. What is only a
copy goes elsewhere: ``joined`` concatenates megabytes on a worker thread (``bytes.join``
releases the GIL for large results), and ``encode_chunks`` leaves a response in pieces of
``CHUNK_BYTES`` that are written one per turn of the loop.

Decoding needs the element boundaries without parsing the text first, so ``encode_lines``
stores a list as ``[\n<e1>,\n<e2>\n]`` (and ``decode_lines`` splits it with ``bytes.find``):
valid JSON for any reader (a newline is whitespace), whose only raw newlines are the
separators, since msgspec's compact output has none (strings escape them). A text in another
form (stored before this form, or by another writer) is split with one scan of msgspec's
(``list[Raw]``, a third of a decode), and anything that does not split cleanly is decoded in
one call: the form only makes decoding cheaper, never changes what it returns.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, TypeVar

import msgspec

__all__ = (
    "CHUNK_BYTES",
    "LARGE_BYTES",
    "SLICE_SECONDS",
    "decode_lines",
    "encode_chunks",
    "encode_compact",
    "encode_lines",
    "encode_lines_now",
    "joined",
    "sliced",
)

T = TypeVar("T")
R = TypeVar("R")

LARGE_BYTES: Final = 256 * 1024
"""Below this a text is decoded in one call (well under a millisecond); stores read a record
whose JSON is larger on their large-read path."""

SLICE_SECONDS: Final = 0.001
"""The most work one slice does before the loop gets a turn (one element may take longer)."""

CHUNK_BYTES: Final = 256 * 1024
"""The size of the pieces a large response or SSE frame is sent in."""

# CPython's ``bytes.join`` releases the GIL while it copies a result of 1 MiB or more.
_JOIN_OFF_LOOP: Final = 1024 * 1024
_SEPARATOR: Final = b",\n"
_encode: Final = msgspec.json.encode
_decode: Final = msgspec.json.decode
_RAW_LIST: Final = msgspec.json.Decoder(list[msgspec.Raw])

# One lock per event loop (tests run many loops in one process).
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


def _lane() -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    lock = _locks.get(loop)
    if lock is None:
        lock = _locks[loop] = asyncio.Lock()
    return lock


def _slice(items: Iterator[T], fn: Callable[[T], R], out: list[R], seconds: float) -> bool:
    """Apply ``fn`` to ``items`` into ``out`` for one slice; True once ``items`` is done."""
    deadline = time.perf_counter() + seconds
    for item in items:
        out.append(fn(item))
        if time.perf_counter() >= deadline:
            return False
    return True


async def sliced(items: Iterable[T], fn: Callable[[T], R]) -> list[R]:
    """``[fn(item) for item in items]``, yielding the loop after every slice of work.

    A first slice runs at once, so a short list never waits (a fifth of one while a long job
    holds the lane); what is left then waits for the lane and runs there a slice per turn of
    the loop. The lane is held across those turns: one long job at a time, so a turn runs one
    slice of one of them, however many are waiting.
    """
    out: list[R] = []
    pending = iter(items)
    lane = _lane()
    first = SLICE_SECONDS / 5 if lane.locked() else SLICE_SECONDS
    if _slice(pending, fn, out, first):
        return out
    await asyncio.sleep(0)  # a turn for the loop's other work before the next slice
    async with lane:
        while True:
            if _slice(pending, fn, out, SLICE_SECONDS):
                return out
            await asyncio.sleep(0)  # the loop's other work gets its turn


# -- encoding --------------------------------------------------------------------------------


def _joiner() -> ThreadPoolExecutor:
    global _join_pool  # noqa: PLW0603 - one small pool per process, made on first use
    if _join_pool is None:
        _join_pool = ThreadPoolExecutor(1, thread_name_prefix="pausemesh-json-join")
    return _join_pool


_join_pool: ThreadPoolExecutor | None = None


async def joined(pieces: Sequence[bytes]) -> bytes:
    """``b"".join(pieces)``; past ``_JOIN_OFF_LOOP`` bytes on a worker thread, since
    ``bytes.join`` copies a large result with the GIL released (a copy of megabytes is
    milliseconds, mostly page faults, that the loop need not wait for)."""
    if sum(len(p) for p in pieces) < _JOIN_OFF_LOOP:
        return b"".join(pieces)
    return await asyncio.get_running_loop().run_in_executor(_joiner(), b"".join, pieces)


def _lines(parts: Sequence[bytes], prefix: bytes, suffix: bytes) -> list[bytes]:
    if not parts:
        return [prefix, b"[]", suffix]
    pieces = [prefix, b"[\n"]
    for part in parts:
        pieces += (part, _SEPARATOR)
    pieces[-1] = b"\n]"
    pieces.append(suffix)
    return pieces


def encode_lines_now(items: Sequence[Any]) -> bytes:
    """``items`` as a JSON array, one element per line (see the module docstring), in one go:
    for values known to be small (an A2A task record, a test)."""
    return b"".join(_lines([_encode(item) for item in items], b"", b""))


async def encode_lines(items: Sequence[Any], *, prefix: bytes = b"", suffix: bytes = b"") -> bytes:
    """``prefix``, ``encode_lines_now(items)``, ``suffix``: one element at a time between the
    loop's other work, the whole joined off the loop."""
    return await joined(_lines(await sliced(items, _encode), prefix, suffix))


def _groups(parts: Sequence[bytes]) -> Iterator[list[bytes]]:
    """A compact JSON array of ``parts``, as groups to join of about ``CHUNK_BYTES`` each; a
    part of an eighth of that or more is a group of its own (sent as it is: a copy into fresh
    memory costs mostly page faults)."""
    group, size = [b"["], 1
    for index, part in enumerate(parts):
        if index:
            group.append(b",")
            size += 1
        if len(part) >= CHUNK_BYTES // 8:
            yield group
            yield [part]
            group, size = [], 0
            continue
        group.append(part)
        size += len(part)
        if size >= CHUNK_BYTES:
            yield group
            group, size = [], 0
    group.append(b"]")
    yield group


def _chunk(group: list[bytes]) -> bytes:
    return group[0] if len(group) == 1 else b"".join(group)


async def encode_chunks(items: Sequence[Any], fn: Callable[[Any], bytes] = _encode) -> list[bytes]:
    """``items`` as a compact JSON array (``fn`` encodes one element), in pieces of about
    ``CHUNK_BYTES`` (one element is never cut): what a response or an SSE frame sends one
    piece at a time, so a long thread's snapshot is never one megabytes-long write."""
    return await sliced(_groups(await sliced(items, fn)), _chunk)


async def encode_compact(items: Sequence[Any], fn: Callable[[Any], bytes] = _encode) -> bytes:
    """``encode_chunks`` as one bytes (for what must be stored whole, e.g. a logged event)."""
    return await joined(await encode_chunks(items, fn))


# -- decoding --------------------------------------------------------------------------------


def _line_pieces(data: bytes) -> Iterator[memoryview]:
    """The elements of ``[\\n<e1>,\\n...<en>\\n]`` (no copy)."""
    view = memoryview(data)
    start, end = 2, len(data) - 2
    while True:
        cut = data.find(_SEPARATOR, start, end)
        if cut < 0:
            yield view[start:end]
            return
        yield view[start:cut]
        start = cut + 2


def _decode_piece(piece: memoryview | msgspec.Raw) -> Any:
    return _decode(piece)


async def decode_lines(data: bytes | str) -> Any:
    """``msgspec.json.decode(data)``: a large array one element at a time (see the module
    docstring), anything else in one call. Raises ``msgspec.DecodeError`` as a decode would."""
    if len(data) <= LARGE_BYTES or data[:1] not in (b"[", "["):
        return _decode(data)
    raw = data.encode() if isinstance(data, str) else data
    try:
        if raw.startswith(b"[\n") and raw.endswith(b"\n]"):
            return await sliced(_line_pieces(raw), _decode_piece)
        # Another form: one scan finds the elements (no values built), then sliced.
        return await sliced(_RAW_LIST.decode(raw), _decode_piece)
    except msgspec.DecodeError:
        # Not split cleanly (a ",\n" inside an element of someone else's pretty-printed JSON):
        # the one-call decode is the answer, or raises the error it would have raised.
        return _decode(raw)
