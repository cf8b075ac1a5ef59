"""The `/mcp` route of an open gateway (no token: loopback only), in process: graph-rag's facts over MCP,
and what a hostile or confused HTTP client gets (a clear 4xx, never a 500, and the route keeps serving)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tests.gateway.gw_support import LiveGateway
from tests.mcp.mcp_support import call, http_session, text

pytestmark = pytest.mark.timeout(300)
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
CLIENT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": CLIENT}


async def test_graph_rag_facts_over_an_open_gateway(live: LiveGateway) -> None:
    async with http_session(f"{live.url}/mcp", None) as s:
        res = await call(s, "ask_graph_rag", question="Where was marie_curie's husband born?", collection="sample",
                         no_llm=True)  # fmt: skip
        no_documents = await call(s, "list_documents", collection="sample")
    assert not res.is_error, text(res)
    facts = res.structured_content["facts"]
    assert any(f["subject"] == "marie curie" and f["object"] == "pierre curie" for f in facts), facts
    assert "Facts:\n- " in text(res)
    # triples only: the collection exists (its graph) but holds no documents, which is not an error
    assert not no_documents.is_error and no_documents.structured_content["documents"] == []


@pytest.mark.parametrize(
    ("what", "request_kw", "status"),
    [
        ("foreign Host (DNS rebinding)", {"json": INIT, "headers": {**ACCEPT, "Host": "evil.example"}}, 421),
        ("foreign Origin", {"json": INIT, "headers": {**ACCEPT, "Origin": "http://evil.example"}}, 403),
        ("not JSON", {"data": b"\xff\x00{", "headers": ACCEPT}, 400),
        ("not a JSON-RPC message", {"data": b"[1, 2]", "headers": ACCEPT}, 400),
        ("larger than a frame", {"data": b"x" * (65 * 1024), "headers": ACCEPT}, 413),
    ],
)
async def test_hostile_requests_get_a_clear_refusal(live: LiveGateway, what: str, request_kw: dict[str, Any],
                                                    status: int) -> None:  # fmt: skip
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{live.url}/mcp", **request_kw) as r:
            assert r.status == status, (what, await r.text())
        for method in ("GET", "DELETE"):  # a stateless server holds no stream and no session
            async with http.request(method, f"{live.url}/mcp", headers=ACCEPT) as r:
                assert r.status == 405 and r.headers["Allow"] == "POST"
        async with http.post(f"{live.url}/mcp", json=INIT, headers=ACCEPT) as r:  # and still serves
            assert r.status == 200 and (await r.json())["result"]["serverInfo"]["name"] == "kgflow"
