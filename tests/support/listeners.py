"""Which process holds a listening TCP port, read from Linux's ``/proc``.

A test server's port is picked free just before the server binds it, so on a busy machine
another test's server can take the same port in between: the new server then fails to bind,
and until it exits its ``/healthz`` poll is answered by the other one. ``holds_listener``
tells the two apart.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ("holds_listener", "process_tree")

_PROC = Path("/proc")
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's "st" column


def _listening_inodes(port: int) -> set[str] | None:
    tables = [_PROC / "net" / "tcp", _PROC / "net" / "tcp6"]
    if not tables[0].exists():
        return None
    inodes: set[str] = set()
    for table in tables:
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


def holds_listener(pid: int, port: int) -> bool:
    """Whether ``pid`` (or a process it started) listens on ``port``; True where ``/proc``
    cannot tell (not Linux)."""
    listening = _listening_inodes(port)
    if listening is None:
        return True
    return any(listening & _socket_inodes(member) for member in process_tree(pid))
