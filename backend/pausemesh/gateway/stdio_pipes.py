"""stdin and stdout as asyncio pipes for ``pausemesh gateway --stdio``.

The SDK's ``stdio_server`` reads and writes through anyio worker threads: two thread hops per
message, which on a loaded host cost more than the rest of a gateway call. Here both ends are
the event loop's own pipe transports (no thread), handed to ``stdio_server`` as its explicit
streams. As the SDK does, fd 0 and fd 1 point at the null device and at stderr while serving,
so stray output of the process or its children never reaches the MCP wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator
from typing import Final

__all__ = ("LineReader", "LineWriter", "loop_stdio")

# One JSON-RPC message per line; the gateway's own inputs are far smaller.
_MAX_LINE: Final = 8 * 1024 * 1024


class LineReader:
    """``async for line in reader``: UTF-8 text lines until end of input."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class LineWriter:
    """``await write(text)`` then ``await flush()``, as the SDK's stdout writer calls them."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


def _is_pipe(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


@contextlib.asynccontextmanager
async def loop_stdio() -> AsyncIterator[tuple[LineReader, LineWriter] | None]:
    """The process's stdin/stdout as loop pipes, or None when they are not pipes (a regular
    file): the caller then uses the SDK's threaded streams."""
    if not (_is_pipe(0) and _is_pipe(1)):
        yield None
        return
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    read_transport: asyncio.BaseTransport | None = None
    write_transport: asyncio.BaseTransport | None = None
    try:
        reader = asyncio.StreamReader(limit=_MAX_LINE)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0)
        )
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0)
        )
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
        yield LineReader(reader), LineWriter(writer)
    finally:
        for transport in (read_transport, write_transport):
            if transport is not None:
                transport.close()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
