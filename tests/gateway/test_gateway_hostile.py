"""What a careless or hostile client sends to the gateway's document-era surface: a text load in a
charset whose decoder is quadratic, a blueprint nested 2,000 deep, the documented REST `workspace`
field on kgflow's services, an empty collection, a blank token. Each gets a clear answer, and
nothing one client sends stalls the others."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import aiohttp
import pytest
from gw_support import LiveGateway
from test_gateway_socket import collect, connect

from processors.gateway.auth import Authenticator
from processors.gateway.service import GatewaySettings

TOKEN = "admin-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BIG_FRAMES = GatewaySettings(token=TOKEN, max_frame_bytes=4 * 1024 * 1024)


async def post(s: aiohttp.ClientSession, url: str, body: Any, headers: dict[str, str] = AUTH) -> tuple[int, Any]:
    async with s.post(url, data=body if isinstance(body, str) else json.dumps(body), headers=headers) as r:
        return r.status, await r.json()


@pytest.mark.parametrize("live", [BIG_FRAMES], indirect=True)
async def test_a_blueprint_nested_2000_deep_is_a_bad_request(live: LiveGateway) -> None:
    deep = "[" * 2000 + "]" * 2000
    async with aiohttp.ClientSession() as s:
        for definition in (deep, '{"processors": {}, "parameters": {"x": ' + deep + "}}"):
            put = {"operation": "put-blueprint", "blueprint-name": "deep", "blueprint-definition": definition}
            status, body = await post(s, f"{live.url}/api/v1/flow", put)
            assert status == 400 and body["error"]["type"] == "bad-request", body
            assert "nested too deeply" in body["error"]["message"]
        # one level under Python's parser limit still parses, but no parameter nests that deep
        shallow = "[" * 900 + "]" * 900
        put = {"operation": "put-blueprint", "blueprint-name": "deep",
               "blueprint-definition": '{"processors": {}, "parameters": {"x": ' + shallow + "}}"}  # fmt: skip
        status, body = await post(s, f"{live.url}/api/v1/flow", put)
        assert status == 400 and "nested too deeply" in body["error"]["message"], body
        status, body = await post(s, f"{live.url}/api/v1/flow", {"operation": "list-blueprints"})
        assert status == 200 and "deep" not in body["blueprint-names"]


@pytest.mark.parametrize("live", [BIG_FRAMES], indirect=True)
async def test_rest_workspace_field_on_kgflow_services(live: LiveGateway) -> None:
    """The REST body's `workspace` (as TrustGraph's REST clients send it) picks the workspace on
    every service, kgflow's own included; a bound token still may not leave its own."""
    live.gateway.auth._tokens["carol-token"] = "carol"  # noqa: SLF001 - as a token file line `carol-token carol`
    url = f"{live.url}/api/v1/flow/default/service/documents"
    async with aiohttp.ClientSession() as s:
        body = {"workspace": "default", "operation": "list-collections"}
        status, res = await post(s, url, body)
        assert status == 200, res
        assert "sample" in {c["collection"] for c in res["collections"]}
        status, res = await post(s, url, {**body, "workspace": "nobody"})
        assert status == 200 and res["collections"] == []
        carol = {"Authorization": "Bearer carol-token"}
        status, res = await post(s, url, body, carol)
        assert status == 403 and res["error"]["type"] == "forbidden"
        lazy = {"workspace": "default", "query": "Who is Marie Curie?", "collection": "sample", "no_llm": True}
        status, res = await post(s, f"{live.url}/api/v1/flow/default/service/lazy-rag", lazy)
        assert status == 200, res


@pytest.mark.parametrize("live", [BIG_FRAMES], indirect=True)
async def test_an_empty_collection_is_refused_not_taken_as_default(live: LiveGateway) -> None:
    services = {
        "graph-rag": {"query": "Who is Marie Curie?"},
        "triples": {"limit": 5},
        "graph-embeddings": {"vector": [0.1] * 384, "limit": 3},
        "lazy-rag": {"query": "Who is Marie Curie?", "no_llm": True},
        "document-rag": {"query": "Who is Marie Curie?"},
        "text-load": {"id": "d1", "text": base64.b64encode(b"Marie Curie was a physicist.").decode()},
    }
    async with aiohttp.ClientSession() as s:
        for service, request in services.items():
            for empty in ("", "  "):
                url = f"{live.url}/api/v1/flow/default/service/{service}"
                status, res = await post(s, url, {**request, "collection": empty})
                assert status == 400, (service, empty, res)
                assert "collection" in res["error"]["message"], (service, res)
        # no collection at all is still the documented default
        status, res = await post(s, f"{live.url}/api/v1/flow/default/service/triples", {"limit": 5})
        assert status == 200, res


def test_a_blank_token_is_not_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    for blank in ("", "   ", "\t\n"):
        monkeypatch.setenv("KGFLOW_GATEWAY_TOKEN", blank)
        if blank:
            with pytest.raises(ValueError, match="KGFLOW_GATEWAY_TOKEN is blank"):
                Authenticator.from_env()
        else:
            assert not Authenticator.from_env().enabled  # unset: an open gateway on loopback
    monkeypatch.setenv("KGFLOW_GATEWAY_TOKEN", "  padded  ")
    auth = Authenticator.from_env()
    assert auth.enabled and auth.check("padded").admin


@pytest.mark.parametrize("live", [BIG_FRAMES], indirect=True)
async def test_a_slow_charset_stalls_no_other_client(live: LiveGateway) -> None:
    """A 350 kB text load in `punycode` (a quadratic decoder: 4-5 s of the event loop on the old
    code) is refused at once, and a text load in any other charset is decoded off the event loop:
    the other clients' requests are answered meanwhile."""
    text = "kgflöw " * 50_000
    loads = [
        {"id": "slow", "text": base64.b64encode(text.encode("punycode")).decode(), "charset": "punycode"},
        {"id": "wide", "text": base64.b64encode(text[:20_000].encode("utf-16")).decode(), "charset": "UTF-16"},
    ]
    async with aiohttp.ClientSession() as s:
        ws = await connect(live, s, TOKEN)
        probe = await connect(live, s, TOKEN)
        for i, load in enumerate(loads):
            await ws.send_json({"id": f"load{i}", "service": "text-load", "flow": "default",
                                "request": {**load, "collection": "hostile"}})  # fmt: skip
        took = []
        for n in range(6):
            began = time.perf_counter()
            await probe.send_json({"id": f"p{n}", "service": "embeddings", "flow": "default",
                                   "request": {"texts": ["marie curie"]}})  # fmt: skip
            assert (await collect(probe, f"p{n}"))[-1]["response"]["vectors"]
            took.append(time.perf_counter() - began)
            await asyncio.sleep(0.2)
        assert max(took) < 1.0, took
        answers = {}
        while len(answers) < 2:
            frame = await ws.receive_json(timeout=600)
            if frame.get("complete"):
                answers[frame["id"]] = frame
        assert answers["load0"]["error"]["type"] == "bad-request"
        assert "punycode" in answers["load0"]["error"]["message"]
        assert "error" not in answers["load1"], answers["load1"]
