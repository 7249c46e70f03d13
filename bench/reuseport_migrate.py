"""What happens to connections waiting for a worker that dies (Linux, ``SO_REUSEPORT``).

``pausemesh serve --workers N`` gives each worker its own listening socket on the port, and the
kernel spreads new connections over them. A connection the kernel has put in one worker's accept
queue waits for that worker. This opens two such listeners on one port (as two workers), makes
``--connections`` connections, closes the first listener without accepting (the worker died),
and counts how many the second one can still accept. Linux moves a closed listener's queue to a
sibling only with ``net.ipv4.tcp_migrate_req = 1`` (5.14+); otherwise those connections are
reset. The current setting is printed; this script does not change it.

Usage: .venv/bin/python bench/reuseport_migrate.py [--connections 40]
"""

from __future__ import annotations

import argparse
import socket
import time
from pathlib import Path

SYSCTL = Path("/proc/sys/net/ipv4/tcp_migrate_req")


def _listener(port: int = 0) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=40)
    args = parser.parse_args()
    dying = _listener()
    port = dying.getsockname()[1]
    sibling = _listener(port)
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(args.connections)]
    time.sleep(0.2)  # every handshake done: each connection waits in one of the two queues
    dying.close()
    sibling.settimeout(0.5)
    accepted: list[socket.socket] = []
    try:
        while True:
            accepted.append(sibling.accept()[0])
    except TimeoutError:
        pass
    setting = SYSCTL.read_text().strip() if SYSCTL.exists() else "absent"
    print(
        f"net.ipv4.tcp_migrate_req = {setting}: {args.connections} connections made,"
        f" {len(accepted)} accepted by the sibling after the first listener closed,"
        f" {args.connections - len(accepted)} lost with it"
    )
    for sock in (*clients, *accepted, sibling):
        sock.close()


if __name__ == "__main__":
    main()
