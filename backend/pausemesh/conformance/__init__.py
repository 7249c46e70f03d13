"""Conformance checks of other servers, as a client (``pausemesh conformance ...``).

Nothing here imports PauseMesh's server side or a web framework: the checks speak HTTP with
httpx and read SSE by hand, so they judge any server by what it sends.

- ``sse.py``: one request, its status and its SSE frames (``id:`` and ``data:``), read to the
  end or to a given frame id.
- ``agui_thread.py``: what an AG-UI client keeps of a thread (messages and state, from the
  events), the bodies it sends, and the answers a question's ``responseSchema`` accepts or
  refuses.
- ``agui.py``: the interrupt contract and resumability, probed rule by rule against one
  AG-UI endpoint; one ``Verdict`` per rule.
"""

from __future__ import annotations

from pausemesh.conformance.agui import RULES, Scenario, Verdict, check_agui
from pausemesh.conformance.sse import ConformanceError

__all__ = ("RULES", "ConformanceError", "Scenario", "Verdict", "check_agui")
