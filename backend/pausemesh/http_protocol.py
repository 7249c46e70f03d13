"""uvicorn's httptools protocol, sending a response's head and body in one write.

uvicorn writes a response's status line and headers as soon as the app sends
``http.response.start``, and its body on ``http.response.body``: two ``write`` system calls,
two TCP segments and two wake-ups of the client for every response, where the body follows
the head a few microseconds later in the same task step. ``CoalescingHttpToolsProtocol``
gives the protocol a transport that holds a response's head until the next write or until
the event loop has run the callbacks that were ready, whichever comes first: a head goes out
with its body, and a streamed response's head (an SSE tail with nothing to send yet) still
leaves within the same loop iteration. Only the head is held: a streamed response's later
chunks go out at once, as before, so a fan-out to many tails reaches the first of them
while the loop still writes to the others.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ("CoalescingHttpToolsProtocol", "HoldingTransport")


class HoldingTransport(asyncio.Transport):
    """A transport that can hold one write (a response's head) to send it with the next."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._hold_next = False
        self._held: bytes | None = None
        self._flush_scheduled = False

    def hold_next_write(self) -> None:
        """Hold the next write (a response's head) until the write after it or the end of the
        loop's ready callbacks."""
        self._hold_next = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.writelines((held, data))
        elif not self._hold_next:
            self._transport.write(data)
        else:
            self._hold_next = False
            # Copied: the caller may reuse a mutable buffer once write returns.
            self._held = data if isinstance(data, bytes) else bytes(data)
            if not self._flush_scheduled:
                self._flush_scheduled = True
                self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._transport.is_closing():
            self._held = None  # the peer went away meanwhile: nothing to send it to
        else:
            self._send_held()

    def _send_held(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            self._transport.write(held)

    def writelines(self, list_of_data: Any) -> None:
        self._send_held()
        self._transport.writelines(list_of_data)

    def write_eof(self) -> None:
        self._send_held()
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def close(self) -> None:
        self._send_held()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        held = self._held
        return self._transport.get_write_buffer_size() + (0 if held is None else len(held))

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's ``httptools`` protocol on a transport that sends a head with its body."""

    _holding: HoldingTransport

    # uvicorn narrows BaseProtocol's BaseTransport to Transport; so does this override.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._holding = HoldingTransport(transport, self.loop)
        super().connection_made(self._holding)

    def on_message_begin(self) -> None:
        # A request begins: the first write after it is its response's head (or a
        # ``100 Continue``, which the app's read of the body follows at once).
        super().on_message_begin()
        self._holding.hold_next_write()
