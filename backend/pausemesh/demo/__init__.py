"""The travel-assistant demo: agent, flights and the built browser UI."""
