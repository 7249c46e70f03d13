"""The in-memory stores: one process, nothing durable; the fake the unit tests run on."""

from pausemesh.stores.memory.events import InMemoryEventStore
from pausemesh.stores.memory.operations import InMemoryOperationLedger
from pausemesh.stores.memory.threads import InMemoryThreadStore

__all__ = ("InMemoryEventStore", "InMemoryOperationLedger", "InMemoryThreadStore")
