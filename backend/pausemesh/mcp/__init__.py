"""MCP without a web framework: the elicitation projection and result parsing, the URL policy,
the sealed ``requestState``, durable pauses for tools (form questions, URL authorization, a
tool call's open pause), MCP Tasks and their status feed, and what every SDK server PauseMesh
builds shares. The HTTP endpoint that serves them is ``web/mcp_mount.py``."""
