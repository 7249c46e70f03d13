"""Interpreter settings for a serving process (``pausemesh serve``/``demo``, each worker).

**The cyclic garbage collector.** Each request allocates thousands of short-lived containers
(parsed bodies, Litestar's connection objects, msgspec structs; spans and their attributes when
tracing is on). With CPython's default thresholds (700, 10, 10) a young collection runs every
few requests, and the objects it finds alive (requests in flight, spans waiting in a batch span
processor) are promoted, so the older generations fill and full collections walk the whole
heap: every module, route and schema loaded at start. Measured in one process (``bench/
profile_observability.py``), that was about 0.12 ms of collector time per create+resume
lifecycle with tracing off and 0.19 ms with it on. So: a collection, then ``gc.freeze()`` (what
was loaded at start moves to the permanent generation, which collections skip), and a young
generation threshold of 10,000 (CPython 3.14 raised its own default for the same reason).
Cycles are still collected, a little later.

**The GIL's switch interval.** The SQLite store commits on a writer thread, which lets go of
the GIL for each SQLite call (about four per write in a group) and then needs it back from the
event loop. A thread that waits for the GIL asks the holder to let go only after the switch
interval, 5 ms by default, so behind a busy loop a group of writes spent milliseconds waiting
between its statements while every request of the group waited for its COMMIT (BEGIN to COMMIT
took 2.6 to 3.3 ms with one worker, against 0.4 ms with an idle loop). At 0.5 ms, measured with
``bench/ab.py`` (``docs/benchmarks.md``), one worker served 12 % more lifecycles per second at
14 % less CPU per lifecycle, two workers 4 to 6 % more.

Only the server commands call ``tune_for_serving``: an app embedded in a host's process leaves
the host's interpreter alone (a host can call it too).
"""

from __future__ import annotations

import gc
import sys

__all__ = ("SWITCH_INTERVAL_SECONDS", "YOUNG_THRESHOLD", "tune_for_serving")

YOUNG_THRESHOLD = 10_000
SWITCH_INTERVAL_SECONDS = 0.0005


def tune_for_serving() -> None:
    """Run once the app is built, before the server starts."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
