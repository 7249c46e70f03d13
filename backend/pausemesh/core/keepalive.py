"""Writing an idle stream's keep-alive without waking the task that serves it.

An idle live tail does nothing but send a keep-alive every ``keepalive_seconds``. Waking its
task for that (the wait returns, the frame climbs the generators and goes down the response's
``send`` wrappers) cost about four times the socket write itself (``bench/tails.py`` against
``bench/keepalive_floor.py``). So the HTTP layer makes, for each response it serves, a
``KeepAlive``: a function that writes one keep-alive frame to that response *now*, True when
the write was done at once, False when it was not made (the socket's buffer is full, the
response is not a stream, or it ended). The route hands it to the tail, which passes it down
with each wait (``RunHost.tail`` → ``ThreadStore.wait_for_events`` → the tail wheel,
``stores.thread_notify``); the wheel calls it in its pass instead of waking the tail, and on
False wakes the tail, which sends its keep-alive the ordinary way, under the send timeout. A
wait given none (MCP's task feed, a test) is woken when its time is up, as any wait.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ("KeepAlive", "send_at_once")

KeepAlive = Callable[[], bool]


def send_at_once(send: Callable[[Any], Awaitable[None]], message: Any) -> bool:
    """Run ``send(message)`` when it completes without waiting: True. Otherwise stop it where
    it would wait and return False.

    An ASGI server's ``send`` waits only while the socket's buffer is full, before it writes
    (uvicorn's ``flow.drain``), so a stopped one wrote nothing. An error is False too: the
    caller then sends the ordinary way and meets it there.
    """
    steps = send(message).__await__()
    try:
        steps.send(None)
    except StopIteration:
        return True
    except Exception:  # noqa: BLE001 - reported where the ordinary send meets it again
        return False
    close = getattr(steps, "close", None)
    if close is not None:
        close()
    return False
