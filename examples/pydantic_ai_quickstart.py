"""An existing pydantic-ai agent with durable approvals: `pausemesh serve --agent <this>:agent`."""

import os

from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

# Any pydantic-ai agent, as it is. TestModel (no network) calls every tool once.
agent = Agent(os.environ.get("PAUSEMESH_EXAMPLE_MODEL") or TestModel())


@agent.tool_plain(requires_approval=True)
def delete_account(user_id: str) -> str:
    """Runs only after a person approves it, and at most once."""
    return f"deleted {user_id}"
