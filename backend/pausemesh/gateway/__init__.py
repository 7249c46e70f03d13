"""The continuity gateway: operator-approved MCP jobs dispatched to their upstreams at most once.

Framework-free (the ``mcp`` SDK, the stores' ports and core only): ``config`` (the validated
values), ``config_fields`` and ``config_load`` (reading the TOML, every error named), ``lock``
(pinned tool definitions), ``upstream`` (SDK client sessions), ``catalog`` (the tools the
agent sees), ``dispatcher`` (the ``Gateway``), ``reconcile`` (terms, and answers from a
record), ``inspect`` and ``inspect_tools`` (status/why), ``results`` (the status vocabulary),
``server`` (the MCP server), ``mcp_compose`` (that server with a person's approval through
MCP pauses, as both transports run it). The Litestar mount is ``pausemesh.web.gateway_mount``,
the commands ``pausemesh.cli.gateway`` and ``pausemesh.cli.ops``; see docs/gateway.md.
"""
