"""PauseMesh: durable pauses for agents, resumed exactly once.

The names a host needs to serve PauseMesh, importable from here::

    from pausemesh import PauseMeshConfig, PauseMeshPlugin, Settings, StarletteAgui, create_app

They load on first use (module ``__getattr__``), so ``import pausemesh.core`` or a store
never pulls in Litestar (nor ``StarletteAgui`` Starlette). What an agent author needs is in ``pausemesh.agui``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pausemesh.settings import Settings
    from pausemesh.web.agui_starlette import StarletteAgui
    from pausemesh.web.app import create_app
    from pausemesh.web.config import PauseMeshConfig
    from pausemesh.web.plugin import PauseMeshPlugin

__version__ = "0.1.0"

__all__ = (
    "PauseMeshConfig",
    "PauseMeshPlugin",
    "Settings",
    "StarletteAgui",
    "__version__",
    "create_app",
)

_PUBLIC = {
    "PauseMeshConfig": "pausemesh.web.config",
    "PauseMeshPlugin": "pausemesh.web.plugin",
    "Settings": "pausemesh.settings",
    "StarletteAgui": "pausemesh.web.agui_starlette",
    "create_app": "pausemesh.web.app",
}


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
