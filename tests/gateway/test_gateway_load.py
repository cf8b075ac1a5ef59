"""Bounded load test (loopback only): 1,000 streaming graph-rag requests over 20 concurrent websockets
against `kgflow up` with PathQuestion 2H. Asserts zero lost or mismatched responses; prints throughput
and latency percentiles (no timing assertions)."""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import aiohttp
import pytest
from gw_support import UpServer, pq2h_questions

SOCKETS = 20
REQUESTS = 1000
DISTINCT = 100


async def _open(session: aiohttp.ClientSession, url: str) -> aiohttp.ClientWebSocketResponse:
    ws = await session.ws_connect(url.replace("http://", "ws://") + "/api/v1/socket")
    await ws.send_json({"type": "auth", "token": ""})
    assert (await ws.receive_json(timeout=10))["type"] == "auth-ok"
    return ws


async def _ask(ws: aiohttp.ClientWebSocketResponse, rid: str, question: str, collection: str) -> tuple[str, tuple]:
    """One streamed graph-rag request; returns (answer text, sorted source IRIs)."""
    request = {"query": question, "collection": collection, "streaming": True}
    await ws.send_json({"id": rid, "service": "graph-rag", "flow": "default", "request": request})
    text: list[str] = []
    while True:
        frame: dict[str, Any] = await ws.receive_json(timeout=120)
        assert frame.get("id") == rid, f"frame for {frame.get('id')} arrived while waiting for {rid}"
        assert "error" not in frame, frame
        res = frame["response"]
        if res.get("message_type") == "chunk":
            text.append(res["response"])
        if frame["complete"]:
            assert res["end_of_session"] is True
            return "".join(text), tuple(sorted(s["uri"] for s in res.get("sources", [])))


@pytest.mark.timeout(600)
async def test_thousand_graph_rag_requests_over_twenty_sockets(up_2h: UpServer, capsys: pytest.CaptureFixture) -> None:
    questions = [q for q, _ in pq2h_questions(DISTINCT)]
    async with aiohttp.ClientSession() as session:
        # Reference answers, one socket, one at a time (retrieval is deterministic).
        ws = await _open(session, up_2h.url)
        expected = {q: await _ask(ws, f"ref-{i}", q, up_2h.collection) for i, q in enumerate(questions)}
        await ws.close()
        assert all(answer for answer, _ in expected.values())

        sockets = [await _open(session, up_2h.url) for _ in range(SOCKETS)]
        latencies: list[float] = []
        answered: dict[str, tuple[str, tuple]] = {}

        async def worker(w: int, ws: aiohttp.ClientWebSocketResponse) -> None:
            for k in range(REQUESTS // SOCKETS):
                n = w * (REQUESTS // SOCKETS) + k
                rid = f"load-{n}"
                began = time.perf_counter()
                answered[rid] = await _ask(ws, rid, questions[n % DISTINCT], up_2h.collection)
                latencies.append(time.perf_counter() - began)

        began = time.perf_counter()
        await asyncio.gather(*(worker(w, ws) for w, ws in enumerate(sockets)))
        elapsed = time.perf_counter() - began
        for ws in sockets:
            await ws.close()

    assert len(answered) == REQUESTS  # nothing lost
    mismatched = [rid for rid, got in answered.items() if got != expected[questions[int(rid[5:]) % DISTINCT]]]
    assert mismatched == []  # every answer is its own question's
    qs = statistics.quantiles(latencies, n=100)
    with capsys.disabled():
        print(
            f"\ngateway load: {REQUESTS} graph-rag requests over {SOCKETS} websockets in {elapsed:.1f}s = "
            f"{REQUESTS / elapsed:.1f} req/s; latency p50 {qs[49] * 1000:.0f} ms, p95 {qs[94] * 1000:.0f} ms"
        )
