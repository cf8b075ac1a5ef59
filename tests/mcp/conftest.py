"""MCP fixtures (defined in mcp_support.py and the gateway's gw_support.py, which tests also import helpers from)."""

from tests.gateway.gw_support import live  # noqa: F401
from tests.mcp.mcp_support import corpus, gateway  # noqa: F401
