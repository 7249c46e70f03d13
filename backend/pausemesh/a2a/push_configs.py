"""An a2a-sdk ``PushNotificationConfigStore`` over PauseMesh's durable push store.

Configurations are scoped to the principal that set them, like tasks: another principal
neither reads nor deletes them, and cannot set one on a task it does not own (the SDK checks
that for ``CreateTaskPushNotificationConfig``; a ``SendMessage`` that carries a configuration
for someone else's task is refused here, before the SDK reports the unknown task).

A webhook URL outside the push policy is refused before anything is stored, with the reason
(``PushUrlRegistration``, the SDK's ``push_url_validator``: A2A invalid params, JSON-RPC
``-32602`` and REST ``400 INVALID_ARGUMENT``); ``set_info`` refuses a URL that can never be
called once more itself, so no path into the store takes one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks.push_notification_config_store import (
    PushNotificationConfigStore,
    normalize_push_notification_config,
)
from a2a.types import TaskPushNotificationConfig
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict, ParseDict  # type: ignore[import-untyped]

from pausemesh.a2a.push_policy import PushUrlPolicy
from pausemesh.a2a.store import principal_of_call, task_thread_id
from pausemesh.core.clock import SystemClock
from pausemesh.core.ports import Clock
from pausemesh.core.push import PushConfigRecord, PushStore
from pausemesh.core.threads import ThreadStore

__all__ = (
    "INVALID_PUSH_URL",
    "DurablePushConfigStore",
    "PushUrlRegistration",
    "header_refusal",
)

# ``data.code`` of the refusal: stable, whatever the message says.
INVALID_PUSH_URL = "INVALID_PUSH_URL"


def _refuse(reason: str) -> InvalidParamsError:
    return InvalidParamsError(message=reason, data={"code": INVALID_PUSH_URL})


class PushUrlRegistration:
    """The SDK's ``push_url_validator``: raises A2A invalid params saying why a URL is refused
    (the SDK's own answer to ``False`` would be a bare "Invalid push notification URL")."""

    __slots__ = ("_policy",)

    def __init__(self, policy: PushUrlPolicy) -> None:
        self._policy = policy

    async def __call__(self, url: str) -> bool:
        reason = await self._policy.refusal(url)
        if reason is not None:
            raise _refuse(reason)
        return True


# What a header value may hold (RFC 9110 field-value: visible ASCII, spaces and tabs inside), and
# how long: the token and credentials are sent as headers on every delivery.
_HEADER_VALUE = re.compile(r"[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?")
_MAX_HEADER_VALUE = 4096


def header_refusal(config: TaskPushNotificationConfig) -> str | None:
    """Why the configuration's token or credentials cannot be sent as a header, or None.

    Checked at registration: a value httpx cannot encode (a CR/LF, a non-ASCII character)
    would otherwise fail every delivery of that webhook."""
    values = {
        "token": config.token,
        "authentication.scheme": config.authentication.scheme,
        "authentication.credentials": config.authentication.credentials,
    }
    for name, value in values.items():
        if value and (len(value) > _MAX_HEADER_VALUE or not _HEADER_VALUE.fullmatch(value)):
            return (
                f"the push configuration's {name} cannot be sent as an HTTP header value"
                f" (visible ASCII characters, at most {_MAX_HEADER_VALUE})"
            )
    return None


def _config(document: dict[str, Any]) -> TaskPushNotificationConfig:
    config: TaskPushNotificationConfig = ParseDict(
        document, TaskPushNotificationConfig(), ignore_unknown_fields=True
    )
    return config


class DurablePushConfigStore(PushNotificationConfigStore):
    def __init__(
        self,
        push: Callable[[], PushStore],
        threads: Callable[[], ThreadStore],
        *,
        clock: Clock | None = None,
        policy: PushUrlPolicy | None = None,
    ) -> None:
        # Getters: the stores open in the app lifespan, after the routes are built.
        self._push = push
        self._threads = threads
        self._clock = clock or SystemClock()
        self._policy = policy or PushUrlPolicy()

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig:
        owner = principal_of_call(context)
        record = await self._threads().get(task_thread_id(task_id))
        if record is not None and record.owner != owner:
            raise TaskNotFoundError
        never = self._policy.static_refusal(notification_config.url) or header_refusal(
            notification_config
        )
        if never is not None:
            raise _refuse(never)
        normalized = normalize_push_notification_config(task_id, notification_config)
        document: dict[str, Any] = MessageToDict(normalized)
        await self._push().set_config(
            PushConfigRecord(
                task_id=task_id, config_id=normalized.id, owner=owner, config=document
            ),
            now=self._clock.now(),
        )
        return normalized

    async def get_info(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        records = await self._push().configs(task_id, principal_of_call(context))
        return [_config(record.config) for record in records]

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        await self._push().delete_config(
            task_id, principal_of_call(context), config_id, now=self._clock.now()
        )
