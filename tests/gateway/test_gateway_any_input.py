"""No user text is an internal error through the gateway (issue 42): arbitrary Unicode questions
and collection names on the REST routes (TrustGraph's document-rag, graph-rag, kgflow's lazy-rag
and the documents `search`), the websocket and the OpenAI and Ollama chat routes answer a result
or a typed error that is not `internal-error`, never HTTP 500."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
from gw_support import LiveGateway
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_gateway_socket import collect, connect

from processors.base.client import RequestResponseClient
from schemas.documents import Document, LoadDocuments
from schemas.services import DOCUMENT_LOAD

REPORTED = ["谁拍摄了照片？", "写真を撮ったのは誰ですか？", "🔬🧪☢️", "—", "…", "Ⅻ？"]
CHARS = st.characters(exclude_categories=("Cs",))  # any character JSON can carry
TEXT = st.text(CHARS, min_size=1, max_size=60)
QUESTION = st.one_of(st.sampled_from(REPORTED), TEXT)
COLLECTION = st.one_of(
    st.sampled_from(["docs", "sample"]), st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
)
DOCS = [
    Document(id="zh", title="照片", text="这张照片是张伟在北京拍摄的。"),
    Document(id="en", title="Marie Curie", text="Marie Curie was a physicist. She worked in Paris."),
]


def rest_calls(q: str, coll: str) -> list[tuple[str, dict[str, Any]]]:
    """(path, body) of each REST route a question reaches."""
    svc = "/api/v1/flow/default/service/"
    return [
        (svc + "document-rag", {"query": q, "collection": coll}),
        (svc + "graph-rag", {"query": q, "collection": coll}),
        (svc + "lazy-rag", {"query": q, "collection": coll, "no-llm": True}),
        (svc + "documents", {"operation": "search", "text": q, "collection": coll}),
        ("/v1/chat/completions", {"model": f"kgflow/lazy-rag@{coll}", "messages": [{"role": "user", "content": q}]}),
        ("/api/chat", {"model": f"kgflow/drift@{coll}", "messages": [{"role": "user", "content": q}], "stream": False}),
    ]


async def assert_not_internal(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> None:
    async with session.post(url, data=json.dumps(body)) as r:
        text = await r.text()
        assert r.status < 500 and "internal-error" not in text, (url, body, r.status, text[:300])


async def ws_not_internal(ws: aiohttp.ClientWebSocketResponse, rid: str, q: str, coll: str) -> None:
    request = {"query": q, "collection": coll}
    await ws.send_json({"id": rid, "service": "document-rag", "flow": "default", "request": request})
    for frame in await collect(ws, rid):
        assert (frame.get("error") or {}).get("type") != "internal-error", (q, coll, frame)


async def test_any_question_through_every_route_is_never_an_internal_error(live: LiveGateway) -> None:
    load = LoadDocuments(user="default", collection="docs", documents=DOCS)
    async for _ in RequestResponseClient.for_service(live.system.bus, DOCUMENT_LOAD, "default", 120).stream(load):
        pass
    seen = {"n": 0}
    loop = asyncio.get_running_loop()

    async def check(q: str, coll: str) -> None:
        async with aiohttp.ClientSession() as s:
            for path, body in rest_calls(q, coll):
                await assert_not_internal(s, live.url + path, body)
            ws = await connect(live, s)
            seen["n"] += 1
            await ws_not_internal(ws, f"q{seen['n']}", q, coll)
            await ws.close()

    # hypothesis runs no coroutine: each example runs on this test's loop, from a worker thread
    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(q=QUESTION, coll=COLLECTION)
    def one(q: str, coll: str) -> None:
        asyncio.run_coroutine_threadsafe(check(q, coll), loop).result(timeout=300)

    await asyncio.to_thread(one)
    for q in REPORTED:  # every question the issue reported, whatever hypothesis drew
        async with aiohttp.ClientSession() as s:
            for path, body in rest_calls(q, "docs"):
                await assert_not_internal(s, live.url + path, body)
    assert seen["n"] >= 10
