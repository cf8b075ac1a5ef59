"""The gateway's `/mcp` route with the MCP SDK's own streamable-HTTP client, against a real `kgflow up`:
tools, citations (document, page, chunk id), tool errors, and the gateway's auth and workspace binding."""

from __future__ import annotations

import httpx2
import pytest

from tests.mcp.mcp_support import (
    ADMIN_TOKEN,
    ALICE_TOKEN,
    COLLECTION,
    PAGE_TWO,
    PDF_ID,
    Gateway,
    call,
    http_session,
    text,
)

pytestmark = pytest.mark.timeout(900)


async def test_tools_listed_with_typed_inputs_and_outputs(gateway: Gateway) -> None:
    async with http_session(gateway.mcp, ADMIN_TOKEN) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
    assert {"ask_lazy_rag", "ask_kg_query", "ask_drift", "ask_graph_rag", "search_chunks", "list_collections",
            "list_documents", "read_document", "read_chunks", "load_documents"} <= set(tools)  # fmt: skip
    kg = tools["ask_kg_query"]
    assert kg.input_schema["required"] == ["question"]
    assert "mode" in kg.input_schema["properties"] and kg.output_schema is not None
    assert "passages" in kg.output_schema["properties"]


async def test_lazy_rag_answer_cites_document_and_chunk(gateway: Gateway) -> None:
    async with http_session(gateway.mcp, ADMIN_TOKEN) as s:
        res = await call(s, "ask_lazy_rag", question="Which element did Marie Curie name after her homeland?",
                         collection=COLLECTION)  # fmt: skip
    assert not res.is_error, text(res)
    passages = res.structured_content["passages"]
    assert passages and all(p["chunk_id"] and p["document_id"] for p in passages)
    assert any("polonium" in p["text"].lower() for p in passages[:3])
    assert any(p["document_id"] == "polonium-and-radium.md" for p in passages[:3])
    # the readable text cites them too
    assert f"chunk {passages[0]['chunk_id']}" in text(res) and "Sources:" in text(res)


async def test_search_and_read_carry_the_page(gateway: Gateway) -> None:
    async with http_session(gateway.mcp, ADMIN_TOKEN) as s:
        found = await call(s, "search_chunks", query="radium chloride crystals glowing", collection=COLLECTION,
                           document_ids=[PDF_ID], limit=5)  # fmt: skip
        assert not found.is_error, text(found)
        hit = found.structured_content["passages"][0]
        assert hit["document_id"] == PDF_ID and hit["page"] == 2 and PAGE_TWO in hit["text"]
        assert "p. 2" in text(found)

        chunk = await call(s, "read_chunks", chunk_ids=[hit["chunk_id"]], collection=COLLECTION)
        assert chunk.structured_content["passages"][0]["page"] == 2

        doc = await call(s, "read_document", document_id=PDF_ID, collection=COLLECTION)
        assert not doc.is_error, text(doc)
        assert PAGE_TWO in doc.structured_content["text"] and "pitchblende" in doc.structured_content["text"]
        assert {p["page"] for p in doc.structured_content["passages"]} == {1, 2}


async def test_each_retrieval_service_answers(gateway: Gateway) -> None:
    question = "Who discovered radium?"
    async with http_session(gateway.mcp, ADMIN_TOKEN) as s:
        for tool, extra in (("ask_kg_query", {"mode": "naive"}), ("ask_kg_query", {"mode": "local"}),
                            ("ask_drift", {}), ("ask_graph_rag", {})):  # fmt: skip
            res = await call(s, tool, question=question, collection=COLLECTION, **extra)
            assert not res.is_error, (tool, text(res))
            out = res.structured_content
            assert out["answer"] and (out["passages"] or out["facts"]), (tool, out)
            for p in out["passages"]:
                assert p["document_id"] and p["chunk_id"]


async def test_listing_collections_and_documents(gateway: Gateway) -> None:
    async with http_session(gateway.mcp, ADMIN_TOKEN) as s:
        cols = (await call(s, "list_collections")).structured_content["collections"]
        docs = (await call(s, "list_documents", collection=COLLECTION)).structured_content["documents"]
    assert COLLECTION in [c["collection"] for c in cols]
    assert {"marie-curie.md", "polonium-and-radium.md", PDF_ID} <= {d["id"] for d in docs}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as http:
        exported = (await http.get(f"{gateway.url}/api/metrics")).text
    assert 'kgflow_gateway_requests_total{outcome="ok",service="documents",transport="mcp"}' in exported


async def test_bad_input_is_a_tool_error(gateway: Gateway) -> None:
    async with http_session(gateway.mcp, ADMIN_TOKEN) as s:
        blank = await call(s, "ask_lazy_rag", question="   ", collection=COLLECTION)
        unknown = await call(s, "ask_lazy_rag", question="Who was Pierre Curie?", collection="no-such")
        scope = await call(s, "ask_kg_query", question="Who?", collection=COLLECTION, document_ids=[])
        mode = await call(s, "ask_kg_query", question="Who?", collection=COLLECTION, mode="sideways")
        missing = await call(s, "read_document", document_id="nope.md", collection=COLLECTION)
        after = await call(s, "list_collections")  # the session still works after errors
    assert blank.is_error and "blank" in text(blank)
    assert unknown.is_error and "unknown collection 'no-such'" in text(unknown) and COLLECTION in text(unknown)
    assert scope.is_error and "document_ids" in text(scope)
    assert mode.is_error and "mode" in text(mode)
    assert missing.is_error and "nope.md" in text(missing)
    assert not after.is_error

    async with http_session(gateway.mcp, ADMIN_TOKEN, flow="no-such-flow") as s:
        stopped = await call(s, "list_collections")
    assert stopped.is_error and "'no-such-flow' is not running" in text(stopped)


async def test_a_refused_token_gets_no_session(gateway: Gateway) -> None:
    for token in ("wrong-token", None):
        seen: list[httpx2.Response] = []
        with pytest.raises(Exception, match="unhandled errors|error response"):
            async with http_session(gateway.mcp, token, seen=seen) as s:
                await call(s, "list_collections")
        assert [r.status_code for r in seen] == [401]  # refused at initialize: MCP never saw it
        assert seen[0].headers["WWW-Authenticate"].startswith("Bearer")
        assert seen[0].json()["error"]["type"] == "unauthorized"


async def test_a_bound_token_acts_only_in_its_workspace(gateway: Gateway) -> None:
    seen: list[httpx2.Response] = []
    with pytest.raises(Exception, match="unhandled errors|error response"):
        async with http_session(gateway.mcp, ALICE_TOKEN, workspace="default", seen=seen) as s:
            await call(s, "list_collections")
    assert [r.status_code for r in seen] == [403]
    assert "workspace 'default'" in seen[0].json()["error"]["message"]

    async with http_session(gateway.mcp, ALICE_TOKEN) as s:  # alice's own workspace: the corpus is not hers
        mine = await call(s, "list_collections")
        theirs = await call(s, "ask_lazy_rag", question="Who discovered radium?", collection=COLLECTION)
        note = {"id": "a1", "title": "Alice's note", "text": "Alice keeps her lab notes on the thorium samples."}
        loaded = await call(s, "load_documents", collection="notes", documents=[note])
        found = await call(s, "search_chunks", query="thorium samples", collection="notes")
    assert [c["collection"] for c in mine.structured_content["collections"]] == []
    assert theirs.is_error and "unknown collection" in text(theirs)
    assert not loaded.is_error and loaded.structured_content["loaded"] == 1
    assert found.structured_content["passages"][0]["document_id"] == "a1"

    async with http_session(gateway.mcp, ADMIN_TOKEN) as s:  # the admin's default workspace does not see it
        cols = (await call(s, "list_collections")).structured_content["collections"]
    assert "notes" not in [c["collection"] for c in cols]
