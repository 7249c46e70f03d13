"""MCP: elicitation projections and result parsing, and the MCP server router."""
