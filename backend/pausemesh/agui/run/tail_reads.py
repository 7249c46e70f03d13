"""One read of a thread's log per wake-up, shared by the tails of that thread in this process.

When a thread changes, every tail of it wakes at once and each would read the log after its
own mark: a thousand reads of the same rows for one event. Here the first tail that asks
starts one read (a ``SharedResult``: a tail that goes away mid-read does not cut it short
for the others) and every tail of the thread that asks while it runs, with a mark at or past the
read's, takes its result. Each entry's SSE frame is encoded once, and a tail that takes the
whole result sends the very same bytes as the others.

No access check is shared: a tail is admitted (its principal checked against the thread's
owner) before it reads anything, exactly as when each tail read alone, and a shared read
hands a tail only entries of its own thread past its own mark. A read that fails raises its
error in every tail that took it, as each tail's own read would have.
"""

from __future__ import annotations

from pausemesh.agui.sse import encode_frame
from pausemesh.core.shared_result import SharedResult
from pausemesh.core.threads import ThreadStore

__all__ = ("Batch", "SharedReads")


class Batch:
    """What one tail sends next: its frames, the last sequence in them and whether the read
    filled its page (more may follow at once)."""

    __slots__ = ("frames", "full", "last")

    def __init__(self, frames: bytes, last: int, *, full: bool) -> None:
        self.frames = frames
        self.last = last
        self.full = full


class _Read:
    """One read in flight: the entries after ``after``, encoded once."""

    __slots__ = ("after", "page")

    def __init__(self, after: int, page: SharedResult[_Page]) -> None:
        self.after = after
        self.page = page


class _Page:
    __slots__ = ("frames", "full", "joined", "sequences")

    def __init__(self, sequences: list[int], frames: list[bytes], *, full: bool) -> None:
        self.sequences = sequences
        self.frames = frames
        self.full = full
        # The whole page as one bytes object: most tails take all of it.
        self.joined = b"".join(frames)

    def after(self, mark: int) -> Batch | None:
        if not self.sequences or self.sequences[-1] <= mark:
            return None
        last = self.sequences[-1]
        if self.sequences[0] > mark:
            return Batch(self.joined, last, full=self.full)
        start = next(i for i, sequence in enumerate(self.sequences) if sequence > mark)
        return Batch(b"".join(self.frames[start:]), last, full=self.full)


class SharedReads:
    """The reads of one process's tails, at most one in flight per thread."""

    def __init__(self, threads: ThreadStore, *, page: int) -> None:
        self.threads = threads
        self.page = page
        self._reads: dict[str, _Read] = {}

    async def after(self, thread_id: str, mark: int) -> Batch | None:
        """The thread's next entries past ``mark`` as frames (None when there are none): from
        the read of this thread in flight if it starts at or before ``mark``, else a new one.

        A read that began before the event that woke this tail may miss it: the tail then
        finds the head past its mark when it waits, and reads again at once (never a loss).
        """
        read = self._reads.get(thread_id)
        if read is None or read.after > mark:
            read = self._start(thread_id, mark)
        # A tail that goes away (its task cancelled) leaves the read to the others.
        page = await read.page.get()
        return page.after(mark)

    def _start(self, thread_id: str, mark: int) -> _Read:
        read = self._reads[thread_id] = _Read(mark, SharedResult(self._read(thread_id, mark)))
        read.page.task.add_done_callback(lambda _: self._finished(thread_id, read))
        return read

    def _finished(self, thread_id: str, read: _Read) -> None:
        if self._reads.get(thread_id) is read:
            del self._reads[thread_id]

    async def _read(self, thread_id: str, mark: int) -> _Page:
        entries = await self.threads.read_events(thread_id, after_sequence=mark, limit=self.page)
        return _Page(
            [entry.sequence for entry in entries],
            [encode_frame(entry.event_json, entry.sequence) for entry in entries],
            full=len(entries) == self.page,
        )
