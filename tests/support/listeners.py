"""Which process holds a listening TCP port, and what it took from a connection, read from
Linux's ``/proc``.

A test server's port is picked free just before the server binds it, so on a busy machine
another test's server can take the same port in between: the new server then fails to bind,
and until it exits its ``/healthz`` poll is answered by the other one. ``holds_listener``
tells the two apart.

``took_everything_sent`` tells when a server has accepted a connection and read all a client
sent on it: until then a stop (SIGTERM) may close the connection with the bytes unread, and
the kernel answers the client's next send with a reset.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import NamedTuple

__all__ = ("holds_listener", "process_tree", "took_everything_sent")

_PROC = Path("/proc")
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's "st" column
_ESTABLISHED = "01"
_TABLES = (_PROC / "net" / "tcp", _PROC / "net" / "tcp6")


def _listening_inodes(port: int) -> set[str] | None:
    if not _TABLES[0].exists():
        return None
    inodes: set[str] = set()
    for table in _TABLES:
        try:
            rows = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == _LISTEN and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(inode)
    return inodes


def process_tree(pid: int) -> set[int]:
    """``pid`` and its descendants (a ``--workers`` supervisor's workers hold sockets too)."""
    parents: dict[int, int] = {}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces: the ppid follows the last ")".
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree = {pid}
    grew = True
    while grew:
        children = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= children
        grew = bool(children)
    return tree


def _socket_inodes(pid: int) -> set[str]:
    fds = _PROC / str(pid) / "fd"
    inodes: set[str] = set()
    try:
        names = os.listdir(fds)
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink(fds / name)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


class _Connection(NamedTuple):
    """One row of ``/proc/net/tcp``: a socket's end of a connection, as the kernel keeps it."""

    local_port: int
    remote_port: int
    state: str
    unacknowledged: int  # sent, not yet acknowledged by the peer ("tx_queue")
    unread: int  # received, not yet read by the socket's owner ("rx_queue")
    inode: str  # "0" while the connection waits in a listener's queue, not accepted


def _connections() -> list[_Connection]:
    found: list[_Connection] = []
    for table in _TABLES:
        try:
            rows = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            tx_queue, _, rx_queue = fields[4].partition(":")
            found.append(
                _Connection(
                    local_port=int(fields[1].rsplit(":", 1)[1], 16),
                    remote_port=int(fields[2].rsplit(":", 1)[1], 16),
                    state=fields[3],
                    unacknowledged=int(tx_queue, 16),
                    unread=int(rx_queue, 16),
                    inode=fields[9],
                )
            )
    return found


def _end(local_port: int, remote_port: int) -> _Connection | None:
    """The established connection's end on ``local_port`` whose peer is on ``remote_port``."""
    wanted = (local_port, remote_port, _ESTABLISHED)
    return next((c for c in _connections() if c[:3] == wanted), None)


def took_everything_sent(pid: int, sock: socket.socket) -> bool:
    """Whether ``pid`` (or a process it started) has accepted the connection ``sock`` (a
    client's, on this machine) made, and read every byte sent on it so far; True where
    ``/proc`` cannot tell (not Linux)."""
    if not _TABLES[0].exists():
        return True
    client_port, server_port = sock.getsockname()[1], sock.getpeername()[1]
    sent = _end(client_port, server_port)
    if sent is None or sent.unacknowledged:
        return False
    # Looked at after every byte was acknowledged: none can still be on its way to this end.
    taken = _end(server_port, client_port)
    if taken is None or taken.unread or taken.inode == "0":
        return False
    return any(taken.inode in _socket_inodes(member) for member in process_tree(pid))


def holds_listener(pid: int, port: int) -> bool:
    """Whether ``pid`` (or a process it started) listens on ``port``; True where ``/proc``
    cannot tell (not Linux)."""
    listening = _listening_inodes(port)
    if listening is None:
        return True
    return any(listening & _socket_inodes(member) for member in process_tree(pid))
