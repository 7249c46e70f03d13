"""``python forklaunch.py SOCKET <python arguments>``: run ``python <python arguments>`` as a
child of the test fork server (``tests/support/forkserver.py``) on this process's own stdin,
stdout and stderr, and end as it ends.

For the commands a test does not start through ``ServerProcess``: an MCP client's stdio server
(``pausemesh gateway --stdio``), the gateway's stdio upstream, a CLI call. This process imports
only the standard library and the fork server's protocol (a few milliseconds), forwards
SIGTERM, SIGINT and SIGHUP to the child and exits with its code, or by its signal. If this
process is killed, the fork server sees the connection close and kills the child.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
from pathlib import Path

# Run as a script (by path, from any working directory): the fork server's protocol is imported
# from the repository it belongs to.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.support.forkserver import read_message, send_request


def main(path: str, python_args: list[str]) -> None:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(path)
    send_request(connection, python_args, env=os.environ, cwd=os.getcwd(), fds=[0, 1, 2])
    buffer = bytearray()
    try:
        child = read_message(connection, buffer)["pid"]
    except RuntimeError:  # the fork server went away
        sys.exit(1)

    def forward(sig: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, sig)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    try:
        code = read_message(connection, buffer)["exit"]
    except RuntimeError:
        sys.exit(1)
    if code < 0:  # ended by a signal: end by the same one, as the parent would have seen it
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
