"""Where an adapted agent keeps its own durable state: PauseMesh's database.

The web layer fills it from the settings (the SQLite file, or the PostgreSQL URL) and hands it
to ``as_agent``; a LangGraph agent keeps its checkpoints there.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ("AgentDatabase",)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentDatabase:
    sqlite_path: str = "./data/pausemesh.db"
    # When set (PostgreSQL), it wins over ``sqlite_path``.
    postgres_url: str | None = None
    # PauseMesh's schema there; an agent's own tables live beside its tables.
    postgres_schema: str = "pausemesh"
