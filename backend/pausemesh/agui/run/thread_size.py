"""The bound on a thread's size (``PAUSEMESH_MAX_THREAD_BYTES``): what a run's input may add.

What counts is the thread record as stored (``ThreadRecord.stored_bytes``: its messages, its
state and its cohort receipts; not the event log) plus what the run would take from its input:
each message the thread does not hold yet (by id; a client's own ``tool`` message for an
interrupted tool call is dropped, not stored) at its encoded size and separator, and, on a
thread's first run, the input state. A run is refused when the two together pass the bound,
before anything happens: no resume is executed, no event is logged, the record is unchanged.

Two exceptions keep a thread at the bound usable:

- a run that answers the thread's open interrupt cohort (a resume, or the acknowledgement of a
  lapsed one) and adds no message is never refused: a pending question can always be answered,
  even once the thread is over the bound;
- what the agent says is not counted in advance (nobody knows it before the run): a run that
  started under the bound saves its whole transcript, so a thread may pass the bound by one
  run's output. From then on every run that adds a message, and every run that answers no
  cohort, is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec

from pausemesh.agui.run_error import THREAD_TOO_LARGE, AguiRunError

__all__ = ("DEFAULT_MAX_THREAD_BYTES", "check_growth")

DEFAULT_MAX_THREAD_BYTES: Final = 8 * 1024 * 1024
# Each element of a stored message list is followed by ",\n" (``core/large_json.py``).
_SEPARATOR_BYTES: Final = 2
# A new thread's state is ``{}`` until its first run stores the input's.
_EMPTY_STATE_BYTES: Final = 2


def check_growth(
    stored: int,
    added: Sequence[Any],
    state: Any,
    limit: int,
    *,
    first_run: bool,
    answers_cohort: bool,
) -> None:
    """``AguiRunError`` ``THREAD_TOO_LARGE`` when the run's input would grow the record's
    ``stored`` bytes past ``limit`` (see the module docstring; a run answering a cohort that adds
    nothing always passes).

    The input adds the ``added`` messages (as stored) and, on the ``first_run``, ``state`` in
    place of the empty one. Encoding is bounded by the request body's limit, never by the
    thread's length."""
    growth = sum(len(msgspec.json.encode(m)) + _SEPARATOR_BYTES for m in added)
    if first_run:
        growth += len(msgspec.json.encode(state)) - _EMPTY_STATE_BYTES
    if stored + growth <= limit or (answers_cohort and growth <= 0):
        return
    message = (
        f"This thread holds {stored} bytes and the run would add {growth}: past the server's"
        f" limit of {limit} bytes per thread. Start a new thread"
    )
    if answers_cohort:
        message += ", or answer the open question without new messages"
    raise AguiRunError(THREAD_TOO_LARGE, message)
