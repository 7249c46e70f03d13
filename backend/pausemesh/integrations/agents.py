"""What a host hands PauseMesh as its agent, recognised and adapted to the agent protocol.

``as_agent(obj)`` accepts:

- a PauseMesh agent: an async generator function taking a ``RunContext`` (``pausemesh.agui``);
- a pydantic-ai ``Agent`` (with the ``pausemesh[pydantic-ai]`` extra installed);
- a compiled LangGraph graph (with the ``pausemesh[langgraph]`` extra installed).

Anything else is an ``AgentLoadError`` naming what was found. A framework is recognised by
the module its object's class comes from, so a plain agent never imports a framework.

``load_agent("package.module:attr")`` (or ``"path/to/file.py:attr"``; ``attr`` defaults to
``agent``) imports the object for ``pausemesh serve --agent`` / ``PAUSEMESH_AGENT``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path
from typing import Any, cast

from pausemesh.agui.agent import Agent
from pausemesh.core.errors import AgentLoadError
from pausemesh.integrations.agents_database import AgentDatabase

__all__ = ("AgentDatabase", "as_agent", "describe", "load_agent")

_DEFAULT_ATTRIBUTE = "agent"
_EXPECTED = (
    "expected a PauseMesh agent (an async generator function taking a RunContext),"
    " a pydantic-ai Agent or a compiled LangGraph graph"
)


def describe(obj: object) -> str:
    """``module.Type`` of ``obj`` (or the function's qualified name), for error messages."""
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        kind = "async function" if inspect.iscoroutinefunction(obj) else "function"
        return f"{kind} {obj.__module__}.{obj.__qualname__}"
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__} instance"


def _framework(obj: object) -> str:
    return type(obj).__module__.partition(".")[0]


def _is_agent_function(obj: object) -> bool:
    if inspect.isasyncgenfunction(obj):
        return True
    call = getattr(type(obj), "__call__", None)  # noqa: B004 - a class's own __call__, not callable()
    return not inspect.isfunction(obj) and inspect.isasyncgenfunction(call)


def as_agent(
    obj: object, *, database: AgentDatabase | None = None, history_messages: int | None = None
) -> Agent:
    """Adapt ``obj`` to the agent protocol, or raise ``AgentLoadError`` saying what it is.

    ``database`` is PauseMesh's own (a LangGraph agent keeps its checkpoints there).
    ``history_messages``: how many of the newest messages a pydantic-ai agent's new user turn
    reads (``PAUSEMESH_AGENT_HISTORY_MESSAGES``; None: the integration's default).
    """
    framework = _framework(obj)
    if framework == "pydantic_ai":
        try:
            from pausemesh.integrations.pydantic_ai import (  # noqa: PLC0415 - optional extra
                PydanticAIAgent,
                is_pydantic_ai_agent,
            )
        except ImportError as error:
            msg = f"found {describe(obj)}: serving it needs `pip install pausemesh[pydantic-ai]` ({error})"
            raise AgentLoadError(msg) from None
        if is_pydantic_ai_agent(obj):
            if history_messages is None:
                return PydanticAIAgent(obj)
            return PydanticAIAgent(obj, history_messages=history_messages)
    if framework == "langgraph":
        try:
            from pausemesh.integrations.langgraph import (  # noqa: PLC0415 - optional extra
                LangGraphAgent,
                is_compiled_graph,
            )
        except ImportError as error:
            msg = f"found {describe(obj)}: serving it needs `pip install pausemesh[langgraph]` ({error})"
            raise AgentLoadError(msg) from None
        if is_compiled_graph(obj):
            return LangGraphAgent(obj, database=database)
        if hasattr(obj, "compile"):
            msg = f"found {describe(obj)}, a graph that is not compiled: serve `builder.compile()`"
            raise AgentLoadError(msg)
    bind_database = getattr(obj, "bind_database", None)
    if database is not None and callable(bind_database):
        obj = bind_database(database)
    if _is_agent_function(obj):
        return cast("Agent", obj)
    raise AgentLoadError(f"found {describe(obj)}: {_EXPECTED}")


def _import_module(target: str) -> Any:
    if target.endswith(".py") or os.sep in target:
        path = Path(target)
        if not path.is_file():
            raise AgentLoadError(f"cannot load agent from {target!r}: no such file")
        spec = importlib.util.spec_from_file_location(f"pausemesh_agent_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise AgentLoadError(f"cannot load agent from {target!r}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    # Like uvicorn: the working directory's modules are importable by name.
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    return importlib.import_module(target)


def load_agent(
    spec: str, *, database: AgentDatabase | None = None, history_messages: int | None = None
) -> Agent:
    """Import ``"module:attr"`` / ``"path.py:attr"`` and adapt what it names (``as_agent``)."""
    target, _, attribute = spec.strip().rpartition(":")
    if not target:  # no colon: the whole spec is the module, the attribute is ``agent``
        target, attribute = attribute, _DEFAULT_ATTRIBUTE
    if not target or not attribute:
        raise AgentLoadError(f"--agent must look like 'package.module:attr', got {spec!r}")
    try:
        module = _import_module(target)
    except AgentLoadError:
        raise
    except Exception as error:
        msg = f"cannot import agent module {target!r}: {type(error).__name__}: {error}"
        raise AgentLoadError(msg) from error
    try:
        obj = getattr(module, attribute)
    except AttributeError:
        raise AgentLoadError(f"module {target!r} has no attribute {attribute!r}") from None
    try:
        return as_agent(obj, database=database, history_messages=history_messages)
    except AgentLoadError as error:
        raise AgentLoadError(f"{spec}: {error.message}") from None
