"""``python forklaunch.py SOCKET <python arguments>``: run ``python <python arguments>`` as a
child of the test fork server (``tests/support/forkserver.py``) on this process's own stdin,
stdout and stderr, and end as it ends.

For the commands a test does not start through ``ServerProcess``: an MCP client's stdio server
(``pausemesh gateway --stdio``), the gateway's stdio upstream, a CLI call. This process imports
only the standard library (a few milliseconds), forwards SIGTERM, SIGINT and SIGHUP to the
child and exits with its code, or by its signal. If this process is killed, the fork server
sees the connection close and kills the child.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys


def _line(connection: socket.socket, buffer: bytearray) -> dict[str, int]:
    while b"\n" not in buffer:
        chunk = connection.recv(4096)
        if not chunk:  # the fork server went away
            sys.exit(1)
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    reply: dict[str, int] = json.loads(line)
    return reply


def main(path: str, python_args: list[str]) -> None:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(path)
    request = {"python": python_args, "env": dict(os.environ), "cwd": os.getcwd()}
    socket.send_fds(connection, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
    buffer = bytearray()
    child = _line(connection, buffer)["pid"]

    def forward(sig: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, sig)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    code = _line(connection, buffer)["exit"]
    if code < 0:  # ended by a signal: end by the same one, as the parent would have seen it
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
