"""The one refusal type of an AG-UI run, from resume validation to the ``RUN_ERROR`` event,
and the ``PAUSEMESH_AGUI_*`` codes resume validation refuses with.

Once a run's stream has started, every refusal or failure is an ``AguiRunError``: validation
returns one, the run host raises one, and the run host's frame loop turns it into the event.
"""

from __future__ import annotations

from typing import Final

from pausemesh.agui.events import RunErrorEvent
from pausemesh.core.errors import PauseMeshError

__all__ = (
    "DUPLICATE_INTERRUPT",
    "INVALID_ENTRY",
    "INVALID_INPUT",
    "INVALID_PAYLOAD",
    "REPLAY_CONFLICT",
    "RESUME_EXPIRED",
    "RESUME_REQUIRED",
    "SET_MISMATCH",
    "THREAD_MISMATCH",
    "THREAD_TOO_LARGE",
    "AguiRunError",
)

_P = "PAUSEMESH_AGUI_"
INVALID_INPUT: Final = _P + "INVALID_INPUT"
SET_MISMATCH: Final = _P + "RESUME_SET_MISMATCH"
REPLAY_CONFLICT: Final = _P + "REPLAY_CONFLICT"
THREAD_MISMATCH: Final = _P + "THREAD_MISMATCH"
RESUME_REQUIRED: Final = _P + "RESUME_REQUIRED"
DUPLICATE_INTERRUPT: Final = _P + "DUPLICATE_INTERRUPT"
INVALID_ENTRY: Final = _P + "INVALID_ENTRY"
INVALID_PAYLOAD: Final = _P + "INVALID_PAYLOAD"
RESUME_EXPIRED: Final = _P + "RESUME_EXPIRED"
# The run would grow the thread past PAUSEMESH_MAX_THREAD_BYTES (``run/thread_size.py``).
THREAD_TOO_LARGE: Final = "THREAD_TOO_LARGE"


class AguiRunError(PauseMeshError):
    """A run ends with ``RUN_ERROR`` ``code``/``message`` (e.g. a ``PAUSEMESH_AGUI_*`` code)."""

    default_code = "RUN_ERROR"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, code=code)

    @classmethod
    def from_error(cls, error: PauseMeshError) -> AguiRunError:
        """The same code and message as a run refusal."""
        return error if isinstance(error, AguiRunError) else cls(error.code, error.message)

    def to_event(self) -> RunErrorEvent:
        return RunErrorEvent(message=self.message, code=self.code)
