"""MCP fixtures (defined in mcp_support.py, which the tests also import helpers from)."""

from tests.mcp.mcp_support import corpus, gateway  # noqa: F401
