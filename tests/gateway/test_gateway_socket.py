"""The gateway websocket with a plain aiohttp client: framing, streaming, concurrency, errors."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from gw_support import LiveGateway

from processors.gateway.client import GatewayClient
from processors.gateway.service import GatewaySettings
from schemas.graph_rag import GraphRagRequest

QUESTION = "Where was marie curie's husband born?"


async def connect(
    live: LiveGateway, session: aiohttp.ClientSession, token: str = ""
) -> aiohttp.ClientWebSocketResponse:
    """Open and authenticate a socket."""
    ws = await session.ws_connect(live.ws)
    await ws.send_json({"type": "auth", "token": token})
    reply = await ws.receive_json(timeout=10)
    assert reply["type"] == "auth-ok", reply
    return ws


async def collect(ws: aiohttp.ClientWebSocketResponse, rid: str) -> list[dict[str, Any]]:
    """Frames of request `rid` up to its `complete` frame (frames of other ids are a failure)."""
    frames = []
    while True:
        frame = await ws.receive_json(timeout=30)
        assert frame["id"] == rid, frame
        frames.append(frame)
        if frame.get("complete"):
            return frames


def rag(rid: str, query: str = QUESTION, **extra: Any) -> dict[str, Any]:
    """A graph-rag request frame on the sample collection."""
    request = {"query": query, "collection": "sample", **extra}
    return {"id": rid, "workspace": "default", "service": "graph-rag", "flow": "default", "request": request}


async def test_auth_ok_id_echo_and_framing(live: LiveGateway) -> None:
    async with aiohttp.ClientSession() as s:
        ws = await s.ws_connect(live.ws)
        await ws.send_json({"type": "auth", "token": ""})
        assert await ws.receive_json(timeout=10) == {"type": "auth-ok", "default_workspace": "default"}
        await ws.send_json({"id": "e-1", "service": "embeddings", "flow": "default", "request": {"texts": ["a", "b"]}})
        [frame] = await collect(ws, "e-1")
        assert frame["complete"] is True and "error" not in frame
        assert len(frame["response"]["vectors"]) == 2 and len(frame["response"]["vectors"][0]) == 384


async def test_streaming_graph_rag(live: LiveGateway) -> None:
    async with aiohttp.ClientSession() as s:
        ws = await connect(live, s)
        await ws.send_json(rag("g-1", streaming=True))
        frames = await collect(ws, "g-1")
        payloads = [f["response"] for f in frames]
        assert payloads[0]["message_type"] == "explain" and payloads[0]["triples"]
        assert [f["complete"] for f in frames] == [False] * (len(frames) - 1) + [True]
        last = payloads[-1]
        assert last["end_of_session"] is True and last["end_of_stream"] is True
        assert not any(p["end_of_session"] for p in payloads[:-1])
        assert {"uri": "http://kgflow.org/e/paris", "title": "paris"} in last["sources"]
        answer = "".join(p["response"] for p in payloads if p["message_type"] == "chunk")
        assert "paris" in answer


async def test_non_streaming_graph_rag_carries_kgflow_evidence(live: LiveGateway) -> None:
    async with aiohttp.ClientSession() as s:
        ws = await connect(live, s)
        await ws.send_json(rag("g-2"))
        [frame] = await collect(ws, "g-2")
        res = frame["response"]
        assert res["message_type"] == "answer" and "paris" in res["response"]
        assert res["entities"] and res["stats"]["store_round_trips"] > 0
        assert any(t["o"] == "paris" for t in res["triples"])


async def test_many_concurrent_requests_on_one_socket(live: LiveGateway) -> None:
    people = ["marie curie", "pierre curie", "irene joliot-curie", "eve curie", "albert einstein"]
    async with aiohttp.ClientSession() as s:
        ws = await connect(live, s)
        sent = {f"c-{i}": people[i % len(people)] for i in range(60)}
        for rid, who in sent.items():
            await ws.send_json(rag(rid, f"Who is {who}?", streaming=rid.endswith("0")))
        done: dict[str, dict[str, Any]] = {}
        while len(done) < len(sent):
            frame = await ws.receive_json(timeout=60)
            assert frame["id"] in sent and frame["id"] not in done and "error" not in frame, frame
            if frame["complete"]:
                done[frame["id"]] = frame["response"]
        for rid, who in sent.items():  # each answer is about its own question
            seeds = {e["label"] for e in done[rid]["entities"]}
            assert who in seeds, (rid, who, seeds)


async def test_malformed_frames_get_error_frames_and_the_socket_lives_on(live: LiveGateway) -> None:
    async with aiohttp.ClientSession() as s:
        ws = await connect(live, s)
        await ws.send_str("{not json")
        frame = await ws.receive_json(timeout=10)
        assert frame["id"] is None and frame["error"]["type"] == "bad-request" and "JSON" in frame["error"]["message"]
        await ws.send_json({"service": "embeddings", "request": {}})
        assert "id" in (await ws.receive_json(timeout=10))["error"]["message"]
        await ws.send_json({"id": "x-1", "flow": "default", "request": {}})
        assert (await collect(ws, "x-1"))[0]["error"]["message"] == "service: Field required"
        await ws.send_json({"id": "ok", "service": "embeddings", "flow": "default", "request": {"texts": ["a"]}})
        assert (await collect(ws, "ok"))[0]["response"]["vectors"]


async def test_missing_and_invalid_fields_are_named(live: LiveGateway) -> None:
    async with aiohttp.ClientSession() as s:
        ws = await connect(live, s)
        await ws.send_json({"id": "m-1", "service": "graph-rag", "flow": "default", "request": {"collection": "c"}})
        [err] = await collect(ws, "m-1")
        assert err["error"]["type"] == "bad-request" and "query: Field required" in err["error"]["message"]
        await ws.send_json(rag("m-2", **{"max-path-length": 99}))
        [err] = await collect(ws, "m-2")
        assert "max-path-length" in err["error"]["message"]
        bad_term = {"s": {"t": "t", "tr": {}}, "collection": "sample"}
        await ws.send_json({"id": "m-3", "service": "triples", "flow": "default", "request": bad_term})
        assert "s.t" in (await collect(ws, "m-3"))[0]["error"]["message"]


async def test_unknown_service_and_unknown_flow(live: LiveGateway) -> None:
    async with aiohttp.ClientSession() as s:
        ws = await connect(live, s)
        await ws.send_json({"id": "u-1", "service": "agent", "flow": "default", "request": {}})
        [err] = await collect(ws, "u-1")  # a TrustGraph service kgflow does not have
        assert err["error"]["type"] == "not-supported" and "not supported by kgflow" in err["error"]["message"]
        await ws.send_json({"id": "u-2", "service": "no-such-service", "request": {}})
        assert (await collect(ws, "u-2"))[0]["error"]["type"] == "unknown-service"
        await ws.send_json({**rag("u-3"), "flow": "no-such-flow"})
        [err] = await collect(ws, "u-3")
        assert err["error"]["type"] == "unknown-flow" and "no-such-flow" in err["error"]["message"]


async def test_oversized_frames(live: LiveGateway) -> None:
    limit = live.gateway.settings.max_frame_bytes
    async with aiohttp.ClientSession() as s:
        ws = await connect(live, s)
        big = rag("big-1", "x" * (limit + 10))
        await ws.send_json(big)
        [err] = await collect(ws, "big-1")  # the id is echoed even though the frame was not parsed
        assert err["error"]["type"] == "frame-too-large"
        await ws.send_json({"id": "after", "service": "embeddings", "flow": "default", "request": {"texts": ["a"]}})
        assert (await collect(ws, "after"))[0]["response"]["vectors"]
        await ws.send_str("x" * (limit * 4 + 10))  # beyond the hard limit: the socket is closed (1009)
        msg = await ws.receive(timeout=10)
        assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert ws.close_code == 1009


async def test_triples_stream_in_batches_ending_is_final(live: LiveGateway) -> None:
    async with aiohttp.ClientSession() as s:
        ws = await connect(live, s)
        request = {"collection": "sample", "limit": 50, "streaming": True, "batch-size": 7}
        await ws.send_json({"id": "t-1", "service": "triples", "flow": "default", "request": request})
        frames = await collect(ws, "t-1")
        batches = [f["response"] for f in frames]
        assert len(batches) == 8 and all(len(b["response"]) == 7 for b in batches[:-1])  # 50 = 7*7 + 1
        assert [b["is_final"] for b in batches] == [False] * 7 + [True]
        assert all(set(t) == {"s", "p", "o"} for b in batches for t in b["response"])


async def test_text_completion_without_a_model(live: LiveGateway) -> None:
    async with aiohttp.ClientSession() as s:
        ws = await connect(live, s)
        request = {"system": "", "prompt": "hello", "streaming": True}
        await ws.send_json({"id": "tc", "service": "text-completion", "flow": "default", "request": request})
        frames = await collect(ws, "tc")
        assert frames[-1]["response"]["end_of_stream"] is True
        assert frames[-1]["response"]["configured"] is False and "language model" in frames[-1]["response"]["response"]


async def test_workspaces_never_read_each_others_collections(live: LiveGateway) -> None:
    await live.load("alice", "private")
    async with aiohttp.ClientSession() as s:
        ws = await connect(live, s)
        for rid, workspace in (("w-alice", "alice"), ("w-bob", "bob")):
            frame = {**rag(rid), "workspace": workspace}
            frame["request"] = {**frame["request"], "collection": "private"}
            await ws.send_json(frame)
        answers = {}
        while len(answers) < 2:  # the two answers may come in either order
            frame = await ws.receive_json(timeout=30)
            assert frame["complete"] and "error" not in frame, frame
            answers[frame["id"]] = frame["response"]
        alice, bob = answers["w-alice"], answers["w-bob"]
        assert alice.get("triples") and not bob.get("triples")


BOUND = GatewaySettings(token="admin-secret", max_frame_bytes=64 * 1024)


@pytest.mark.parametrize("live", [BOUND], indirect=True)
async def test_auth_failures_and_bound_workspaces(live: LiveGateway, tmp_path: Any, monkeypatch: Any) -> None:
    async with aiohttp.ClientSession() as s:
        for token in ("", "wrong"):
            ws = await s.ws_connect(live.ws)
            await ws.send_json({"type": "auth", "token": token})
            reply = await ws.receive_json(timeout=10)
            assert reply["type"] == "auth-failed" and reply["error"]
            assert (await ws.receive(timeout=10)).type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        ws = await s.ws_connect(live.ws)  # a request instead of the auth frame
        await ws.send_json(rag("no-auth"))
        assert (await ws.receive_json(timeout=10))["type"] == "auth-failed"
        ws = await connect(live, s, "admin-secret")
        await ws.send_json({**rag("admin"), "workspace": "anyone"})
        assert "error" not in (await collect(ws, "admin"))[0]
    # a token bound to a workspace may act only there, and may not manage flows
    live.gateway.auth._tokens["carol-token"] = "carol"  # noqa: SLF001 - as a token file line `carol-token carol`
    async with aiohttp.ClientSession() as s:
        ws = await s.ws_connect(live.ws)
        await ws.send_json({"type": "auth", "token": "carol-token"})
        assert await ws.receive_json(timeout=10) == {"type": "auth-ok", "default_workspace": "carol"}
        await ws.send_json({**rag("other"), "workspace": "alice"})
        assert (await collect(ws, "other"))[0]["error"]["type"] == "forbidden"
        await ws.send_json({"id": "mine", **{k: v for k, v in rag("mine").items() if k not in ("id", "workspace")}})
        assert "error" not in (await collect(ws, "mine"))[0]
        stop = {"operation": "stop-flow", "flow-id": "default"}
        await ws.send_json({"id": "stop", "service": "flow", "request": stop})
        assert (await collect(ws, "stop"))[0]["error"]["type"] == "forbidden"
        async with s.post(f"{live.url}/api/v1/flow", json={"operation": "list-flows"}) as r:
            assert r.status == 401
        headers = {"Authorization": "Bearer carol-token"}
        async with s.post(f"{live.url}/api/v1/flow", json={"operation": "list-flows"}, headers=headers) as r:
            assert r.status == 200 and (await r.json())["flow-ids"] == ["default"]


async def test_rest_health_and_metrics(live: LiveGateway) -> None:
    async with aiohttp.ClientSession() as s:
        url = f"{live.url}/api/v1/flow/default/service/graph-rag"
        async with s.post(url, json={"query": QUESTION, "collection": "sample", "streaming": True}) as r:
            body = await r.json()
            assert r.status == 200 and "paris" in body["response"] and body["end_of_session"] is True
        async with s.post(f"{live.url}/api/v1/flow/default/service/graph-rag", json={"collection": "x"}) as r:
            assert r.status == 400 and "query" in (await r.json())["error"]["message"]
        async with s.post(f"{live.url}/api/v1/flow", data="{oops") as r:
            assert r.status == 400
        async with s.post(f"{live.url}/api/v1/flow", json={"operation": "list-blueprints"}) as r:
            assert (await r.json()) == {"blueprint-names": ["default"]}
        async with s.get(f"{live.url}/api/v1/health") as r:
            assert (await r.json())["flows"] == ["default"]
        async with s.get(f"{live.url}/api/metrics") as r:
            text = await r.text()
            assert r.status == 200 and "kgflow_gateway_requests_total" in text and "kgflow_requests_total" in text


async def test_import_websocket_writes_triples_and_announces_the_change(live: LiveGateway) -> None:
    from processors.base.bus import BusMessage
    from schemas.topics import GRAPH_CHANGED

    changes = await live.system.bus.reader(GRAPH_CHANGED)
    triple = {
        "s": {"t": "i", "i": "http://example.org/zed"},
        "p": {"t": "i", "i": "http://www.w3.org/2000/01/rdf-schema#label"},
        "o": {"t": "l", "v": "Zed Quux"},
    }
    async with aiohttp.ClientSession() as s:
        ws = await s.ws_connect(f"{live.url}/api/v1/flow/default/import/triples?workspace=default")
        await ws.send_json({"metadata": {"id": "d", "metadata": [], "collection": "imported"}, "triples": [triple]})
        await ws.close()
        msg: BusMessage = await asyncio.wait_for(changes.receive(), 30)
        assert json.loads(msg.data)["collection"] == "imported"
        ws = await connect(live, s)
        request = {"collection": "imported", "s": {"t": "i", "i": "http://example.org/zed"}}
        await ws.send_json({"id": "q", "service": "triples", "flow": "default", "request": request})
        assert (await collect(ws, "q"))[0]["response"]["response"] == [triple]


async def test_kgflow_client_gets_the_full_response(live: LiveGateway) -> None:
    async with GatewayClient(live.url) as gw:
        res = await gw.graph_rag("default", GraphRagRequest(user="default", collection="sample", query=QUESTION))
    assert "paris" in res.response and res.entities and res.triples and res.stats is not None
    assert "http://kgflow.org/e/paris" in res.sources
