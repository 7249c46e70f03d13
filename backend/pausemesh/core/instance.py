"""Which process instance this is: the holder of its run leases.

An instance has a **name** that stays the same across restarts of the same replica (the CLI uses
``host:port``; ``PAUSEMESH_INSTANCE_NAME`` overrides it, e.g. a StatefulSet pod name) and an
**id** made at start-up. Run leases are taken under ``lease_holder(name, id)``, so a restarted
replica frees the leases of its dead predecessor (same name, other id) at once instead of
waiting for their TTL. Two live replicas must never share a name: each start would free the
other's leases. A process without a configured name gets a unique one and frees nothing.
"""

from __future__ import annotations

import uuid

import msgspec

from pausemesh.core.threads import lease_holder

__all__ = ("ProcessInstance", "new_holder")


class ProcessInstance(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    instance_id: str

    @classmethod
    def start(cls, name: str | None) -> ProcessInstance:
        """This process's identity; ``name`` None means "unique, no predecessor"."""
        instance_id = uuid.uuid4().hex
        return cls(name=name or f"process-{instance_id}", instance_id=instance_id)

    @property
    def holder(self) -> str:
        return lease_holder(self.name, self.instance_id)


def new_holder(name: str) -> str:
    """A lease holder for a fresh instance named ``name``."""
    return ProcessInstance.start(name).holder
