"""The host's agent as the web layer serves it: adapted (``as_agent``) on PauseMesh's database."""

from __future__ import annotations

from pausemesh.agui.agent import Agent
from pausemesh.integrations.agents import AgentDatabase, as_agent
from pausemesh.settings import Settings

__all__ = ("served_agent",)


def served_agent(agent: object, settings: Settings) -> Agent:
    """A PauseMesh agent, a pydantic-ai ``Agent`` or a compiled LangGraph graph, ready to run.

    ``AgentLoadError`` (at app start) for anything else, naming what it is.
    """
    database = AgentDatabase(
        sqlite_path=settings.database_path,
        postgres_url=settings.database_url,
        postgres_schema=settings.database_schema,
    )
    return as_agent(agent, database=database, history_messages=settings.agent_history_messages)
