"""`kgflow mcp`: kgflow's MCP tools (processors/gateway/mcp_tools.py) on stdio, for an agent that starts
kgflow as a subprocess (Claude Desktop, Cursor, ...). Over the Python API: the processors run in this
process on the embedded stores (`--home`), or the tools reach a gateway (`--url`, `--token`), where the
gateway's auth and workspace binding apply."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.mcpserver import Context
from pydantic import BaseModel

from processors.commands.api import Kgflow
from processors.commands.connect import client
from processors.gateway.mcp_tools import KgflowTools
from schemas.services import Service


class ApiServices:
    """The tools' services through a Kgflow client, as its user and flow."""

    def __init__(self, kg: Kgflow) -> None:
        self.kg = kg

    def user(self, ctx: Context) -> str:
        """The client's user: one per `kgflow mcp` process (`--user`)."""
        return self.kg.user

    def stream(self, ctx: Context, service: Service, request: BaseModel) -> AsyncIterator[Any]:
        """The responses of the client's transport."""
        return self.kg.stream(service, request)


async def serve(a: argparse.Namespace) -> int:
    """Serve the MCP tools on stdin/stdout until the client closes them."""
    async with client(a) as kg:
        await KgflowTools(ApiServices(kg)).server().run_stdio_async()
    return 0
