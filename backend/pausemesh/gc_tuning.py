"""The cyclic garbage collector's settings for a serving process (``pausemesh serve``/``demo``).

Each request allocates thousands of short-lived containers (parsed bodies, Litestar's
connection objects, msgspec structs; spans and their attributes when tracing is on). With
CPython's default thresholds (700, 10, 10) a young collection runs every few requests, and the
objects it finds alive (requests in flight, spans waiting in a batch span processor) are
promoted, so the older generations fill and full collections walk the whole heap: every
module, route and schema loaded at start. Measured in one process (``bench/
profile_observability.py``), that was about 0.12 ms of collector time per create+resume
lifecycle with tracing off and 0.19 ms with it on.

``tune_for_serving`` runs once the app is built: a collection, then ``gc.freeze()`` (what was
loaded at start moves to the permanent generation, which collections skip), and a young
generation threshold of 10,000 (CPython 3.14 raised its own default for the same reason).
Cycles are still collected, a little later. Only the server commands call this: an app
embedded in a host's process leaves the host's collector alone.
"""

from __future__ import annotations

import gc

__all__ = ("YOUNG_THRESHOLD", "tune_for_serving")

YOUNG_THRESHOLD = 10_000


def tune_for_serving() -> None:
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
