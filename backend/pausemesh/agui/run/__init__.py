"""The AG-UI run host, split by phase (see ``host.py`` and ``leased.py``)."""

from __future__ import annotations

from pausemesh.agui.run.host import RunHost
from pausemesh.agui.run.snapshots import each, snapshot_pieces, thread_snapshot

__all__ = ("RunHost", "each", "snapshot_pieces", "thread_snapshot")
