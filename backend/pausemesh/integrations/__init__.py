"""Bring your own agent: load ``--agent module:attr`` and adapt agent frameworks to the run host.

``pausemesh.integrations.agents`` recognises what it is handed (a PauseMesh agent function, a
pydantic-ai ``Agent``, a compiled LangGraph graph); each framework's adapter lives in its own
module and imports its framework only when used, behind the ``pausemesh[pydantic-ai]`` and
``pausemesh[langgraph]`` extras. Nothing below ``integrations`` imports this package.
"""
