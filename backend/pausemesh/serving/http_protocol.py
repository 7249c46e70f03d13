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

It also closes a connection whose request head (the request line and headers) is not complete
``header_timeout`` seconds after it began: from the connection's opening for its first request,
from the first byte of each later one (between requests the keep-alive timeout applies). A
client trickling header bytes, or connecting and sending nothing, holds a connection for that
long and no longer. A body, a long response and an SSE stream are not timed: the clock stops
once the head is in. The deadline costs a request two attribute writes; one timer per server
looks over its connections a few times a second, and only while any is open.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any, Final

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = (
    "DEFAULT_HEADER_TIMEOUT",
    "CoalescingHttpToolsProtocol",
    "HoldingTransport",
    "ServerConfig",
)

DEFAULT_HEADER_TIMEOUT: Final = 10.0
# How often a server looks for overdue heads: a quarter of the timeout, at most a second, so a
# head is cut between the timeout and a quarter more.
_LOOKS_PER_TIMEOUT: Final = 4
_MAX_LOOK_INTERVAL: Final = 1.0

_log = logging.getLogger("pausemesh.http")


class ServerConfig(uvicorn.Config):
    """``uvicorn.Config`` with the request head's deadline (``PAUSEMESH_HEADER_TIMEOUT_SECONDS``)
    for ``CoalescingHttpToolsProtocol``. A module-level class: ``--workers`` pickles it."""

    def __init__(
        self, app: Any, *, header_timeout: float = DEFAULT_HEADER_TIMEOUT, **options: Any
    ) -> None:
        super().__init__(app, **options)
        self.header_timeout = header_timeout


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


class _HeadDeadlines:
    """One server's look at its connections' request heads, every ``interval`` seconds while
    any connection is open (an idle server is not woken)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, connections: set[Any], timeout: float
    ) -> None:
        self.loop = loop
        self.connections = connections
        self.timeout = timeout
        self.interval = min(timeout / _LOOKS_PER_TIMEOUT, _MAX_LOOK_INTERVAL)
        self._timer: asyncio.TimerHandle | None = None

    def watch(self) -> None:
        if self._timer is None:
            self._timer = self.loop.call_later(self.interval, self._look)

    def _look(self) -> None:
        self._timer = None
        now = self.loop.time()
        for protocol in list(self.connections):
            if isinstance(protocol, CoalescingHttpToolsProtocol):
                protocol.check_head(now, self.timeout)
        if self.connections:
            self.watch()


# Per uvicorn server (its state object, shared by its connections).
_deadlines: weakref.WeakKeyDictionary[Any, _HeadDeadlines] = weakref.WeakKeyDictionary()


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's ``httptools`` protocol on a transport that sends a head with its body, which
    closes a connection whose request head is late."""

    _holding: HoldingTransport
    # ``loop.time()`` when the request head being read began; None between heads.
    _head_since: float | None = None

    def __init__(self, config: Any, server_state: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, server_state, *args, **kwargs)
        deadlines = _deadlines.get(server_state)
        if deadlines is None:
            timeout = getattr(config, "header_timeout", DEFAULT_HEADER_TIMEOUT)
            deadlines = _HeadDeadlines(self.loop, self.connections, timeout)
            _deadlines[server_state] = deadlines
        self._deadlines = deadlines

    # uvicorn narrows BaseProtocol's BaseTransport to Transport; so does this override.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._holding = HoldingTransport(transport, self.loop)
        super().connection_made(self._holding)
        # The first request's head is due from the opening: a client sending nothing is cut.
        self._head_since = self.loop.time()
        self._deadlines.watch()

    def on_message_begin(self) -> None:
        # A request begins: the first write after it is its response's head (or a
        # ``100 Continue``, which the app's read of the body follows at once).
        super().on_message_begin()
        self._holding.hold_next_write()
        if self._head_since is None:  # a later request on a kept-alive connection
            self._head_since = self.loop.time()

    def on_headers_complete(self) -> None:
        self._head_since = None
        super().on_headers_complete()

    def check_head(self, now: float, timeout: float) -> None:
        """Close the connection if its request head began ``timeout`` seconds ago or more."""
        since = self._head_since
        if since is None or now - since < timeout or self.transport.is_closing():
            return
        if self.pipeline or (self.cycle is not None and not self.cycle.response_complete):
            # An earlier request is still being answered, and reading may be paused until it
            # is: the head's clock starts again.
            self._head_since = now
            return
        self._head_since = None
        _log.debug("closed a connection whose request head took longer than %s s", timeout)
        self.transport.close()
