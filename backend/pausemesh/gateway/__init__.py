"""The continuity gateway: operator-approved MCP jobs dispatched to their upstreams at most once.

Framework-free (the ``mcp`` SDK, the stores' ports and core only): ``config`` (the TOML, every
error named), ``lock`` (pinned tool definitions), ``upstream`` (SDK client sessions),
``dispatcher`` (the ``Gateway``), ``inspect`` (status/why), ``results`` (the status
vocabulary), ``server`` (the MCP server). The Litestar mount is ``pausemesh.web.gateway_mount``,
the commands ``pausemesh.cli_gateway``; see docs/gateway.md.
"""
