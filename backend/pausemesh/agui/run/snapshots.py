"""Thread reads: what a reload, ``/connect`` and a replayed resume send back.

A reload carries a page, not the thread's whole life: the newest ``PAUSEMESH_SNAPSHOT_MESSAGES``
messages (100 by default), and a cursor (``messagesCursor``) to the older ones, which
``GET /agui/threads/{id}/messages?before=CURSOR&limit=N`` returns newest first
(``message_page``). A cursor names a position in the thread, so it stays valid while new
messages arrive after it.

A long thread's messages are converted and encoded a piece at a time between the loop's other
work (``core/large_json.py``), and sent in pieces of about ``CHUNK_BYTES``: a snapshot is
never one megabytes-long encode, copy or write that holds the loop. Each form is byte for
byte what encoding the whole typed list at once gives.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime
from typing import Any, Final, cast

import msgspec
from msgspec import UNSET

from pausemesh.agui.events import (
    PROTOCOL_VERSION,
    Event,
    Interrupt,
    Message,
    MessagesSnapshotEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
)
from pausemesh.agui.sse import encode_frame
from pausemesh.core.errors import InvalidInputError
from pausemesh.core.large_json import encode_chunks, joined, sliced
from pausemesh.core.threads import IssuedCohort, StoredMessage, ThreadRecord

__all__ = (
    "DEFAULT_SNAPSHOT_MESSAGES",
    "MAX_MESSAGE_PAGE",
    "MessagePage",
    "check_message_limit",
    "cohort_interrupts",
    "decode_message_cursor",
    "each",
    "encode_message_cursor",
    "message_chunks",
    "message_page",
    "open_interrupts",
    "restored",
    "restored_frames",
    "snapshot_pieces",
    "thread_snapshot",
    "to_messages",
    "typed_messages",
    "wire_messages",
)

DEFAULT_SNAPSHOT_MESSAGES: Final = 100
"""How many of the newest messages a snapshot and ``/connect`` carry by default."""
MAX_MESSAGE_PAGE: Final = 1000
_CURSOR_PREFIX: Final = b"m:"
_CURSOR_MAX_CHARS: Final = 64

_MESSAGES: Final = msgspec.json.Decoder(list[Message])
_MESSAGE: Final[msgspec.json.Decoder[Message]] = msgspec.json.Decoder(Message)
_INTERRUPTS: Final = msgspec.json.Decoder(list[Interrupt])
_encode: Final = msgspec.json.encode


def to_messages(data: list[Any]) -> list[Message]:
    return _MESSAGES.decode(_encode(data))


def _typed(message: Any) -> Message:
    return _MESSAGE.decode(_encode(message))


def _wire(message: Any) -> bytes:
    # Converted, not encoded and decoded again: the typed message lives only for this encode,
    # so sharing the stored message's strings is safe (``_typed`` copies, for the agent).
    return _encode(msgspec.convert(message, Message))


async def typed_messages(data: list[Any]) -> list[Message]:
    """``to_messages``, one message at a time between the loop's other work."""
    return await sliced(data, _typed)


async def message_chunks(data: list[Any]) -> list[bytes]:
    """The messages as a snapshot event carries them (each typed, then encoded): a compact
    JSON array in pieces, one message at a time between the loop's other work."""
    return await encode_chunks(data, _wire)


async def wire_messages(data: list[Any]) -> list[Message]:
    """``message_chunks`` as one ``msgspec.Raw``, which an event's encoder copies as it is: for
    a snapshot event that is logged whole (the finish of a run that paused, a replay)."""
    encoded = msgspec.Raw(await joined(await message_chunks(data)))
    return cast("list[Message]", encoded)


def cohort_interrupts(cohort: IssuedCohort) -> list[Interrupt]:
    return _INTERRUPTS.decode(msgspec.json.encode(cohort.interrupts))


def open_interrupts(record: ThreadRecord) -> list[Interrupt]:
    return [] if record.open_receipt is None else cohort_interrupts(record.open_receipt)


def restored(
    thread_id: str, run_id: str, messages: list[Message], state: Any, interrupts: list[Interrupt]
) -> list[Event]:
    """A run that only restores the thread: RUN_STARTED, both snapshots, RUN_FINISHED (with
    the open interrupts, if any)."""
    return [
        RunStartedEvent(thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION),
        MessagesSnapshotEvent(messages=messages),
        StateSnapshotEvent(snapshot=state),
        RunFinishedEvent(
            thread_id=thread_id,
            run_id=run_id,
            outcome=RunFinishedInterruptOutcome(interrupts=interrupts) if interrupts else UNSET,
        ),
    ]


def restored_frames(
    thread_id: str, run_id: str, messages: list[bytes], state: Any, interrupts: list[Interrupt]
) -> list[bytes]:
    """``restored``'s events as SSE frames (no ``id``: they are not logged), ``messages`` being
    ``message_chunks``: the pieces to write one after the other."""
    started, snapshot, state_snapshot, finished = restored(thread_id, run_id, [], state, interrupts)
    # The messages are the snapshot event's last field: its frame ends with them.
    empty = encode_frame(snapshot)
    head, tail = empty[: -len(b"[]}\n\n")], b"}\n\n"
    return [
        encode_frame(started) + head,
        *messages,
        tail + encode_frame(state_snapshot) + encode_frame(finished),
    ]


async def each(pieces: Iterable[bytes]) -> AsyncIterator[bytes]:
    """``pieces`` for a streamed response (an async iterator: no thread per piece), the loop
    getting a turn after each: a write that the socket takes at once does not wait, so
    without it the whole snapshot would go out in one step of the loop."""
    for index, piece in enumerate(pieces):
        if index:
            await asyncio.sleep(0)
        yield piece


async def snapshot_pieces(record: ThreadRecord) -> list[bytes]:
    """The JSON of ``thread_snapshot(record)`` in pieces to send one after the other: the
    messages encoded a piece at a time (``encode_chunks``), the rest as msgspec encodes it."""
    snapshot = thread_snapshot(record)
    keys = list(snapshot)
    at = keys.index("messages")
    head = _encode({k: snapshot[k] for k in keys[:at]})[:-1] + b',"messages":'
    rest = _encode({k: snapshot[k] for k in keys[at + 1 :]})
    return [head, *await encode_chunks(record.messages), b"," + rest[1:]]


def thread_snapshot(record: ThreadRecord) -> dict[str, Any]:
    """``GET /agui/threads/{id}``: what a client needs to rebuild the thread."""
    return {
        "threadId": record.thread_id,
        "title": record.title,
        "messages": record.messages,
        "state": record.state,
        "pendingInterrupts": []
        if record.open_receipt is None
        else list(record.open_receipt.interrupts),
        "lastSequence": record.last_sequence,
        # The messages above are the newest page: older ones from here (None: all are there).
        "messagesCursor": encode_message_cursor(record.messages_from)
        if record.messages_from > 0
        else None,
        # When the server first stored each message above, by id (issue 44): beside the
        # messages, not in them (AG-UI message schemas strip unknown fields).
        "messageTimes": message_times(zip(record.messages, record.message_times, strict=False)),
    }


def _utc_text(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def message_times(pairs: Iterable[tuple[Any, datetime | None]]) -> dict[str, str]:
    """``{messageId: ISO-8601 UTC}`` for the messages with an id and a stored time (those
    stored before times were kept have none: a client falls back to its own)."""
    times: dict[str, str] = {}
    for message, at in pairs:
        message_id = message.get("id") if isinstance(message, dict) else None
        if at is not None and isinstance(message_id, str):
            times[message_id] = _utc_text(at)
    return times


# --- Pages of a thread's messages -----------------------------------------------------------


def encode_message_cursor(position: int) -> str:
    """The cursor to the messages before ``position`` (opaque to clients)."""
    return base64.urlsafe_b64encode(_CURSOR_PREFIX + str(position).encode()).decode().rstrip("=")


def decode_message_cursor(text: str) -> int:
    """A cursor back into its position; ``INVALID_CURSOR`` for anything this server did not
    return."""
    try:
        if len(text) > _CURSOR_MAX_CHARS:
            raise ValueError(text)
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        if not raw.startswith(_CURSOR_PREFIX):
            raise ValueError(text)
        digits = raw[len(_CURSOR_PREFIX) :]
        if not digits.isdigit():
            raise ValueError(text)
        position = int(digits)
    except (ValueError, binascii.Error):
        msg = "cursor is not one this server returned"
        raise InvalidInputError(msg, code="INVALID_CURSOR") from None
    return position


def check_message_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_MESSAGE_PAGE:
        msg = f"limit must be between 1 and {MAX_MESSAGE_PAGE}"
        raise InvalidInputError(msg, code="INVALID_LIMIT")
    return limit


class MessagePage(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``GET /agui/threads/{id}/messages``: messages newest first; ``next_cursor`` continues
    with older ones (None: this page holds the thread's first message)."""

    thread_id: str
    messages: list[Any]
    next_cursor: str | None
    # When the server first stored each message of the page, by id (see ``thread_snapshot``).
    message_times: dict[str, str] = msgspec.field(default_factory=dict)


def message_page(thread_id: str, rows: list[StoredMessage]) -> MessagePage:
    """A page of ``read_messages`` rows (newest first) as the route sends it."""
    last = rows[-1].position if rows else 0
    return MessagePage(
        thread_id=thread_id,
        messages=[r.message for r in rows],
        next_cursor=encode_message_cursor(last) if last > 0 else None,
        message_times=message_times((r.message, r.stored_at) for r in rows),
    )
