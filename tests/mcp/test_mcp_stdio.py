"""`kgflow mcp` with the MCP SDK's own stdio client: on the embedded stores, and through a real gateway
(`--url`), where the gateway's tokens and workspace binding apply."""

from __future__ import annotations

import pytest

from tests.mcp.mcp_support import ADMIN_TOKEN, ALICE_TOKEN, COLLECTION, Corpus, Gateway, call, stdio_session, text

pytestmark = pytest.mark.timeout(900)


async def test_embedded_stdio_answers_with_citations(corpus: Corpus) -> None:
    log = corpus.copy.parent / "stdio.log"
    async with stdio_session(log, "--home", str(corpus.copy)) as s:
        tools = {t.name for t in (await s.list_tools()).tools}
        res = await call(s, "ask_lazy_rag", question="Which element did Marie Curie name after her homeland?",
                         collection=COLLECTION)  # fmt: skip
        unknown = await call(s, "search_chunks", query="polonium", collection="elsewhere")
        docs = await call(s, "list_documents", collection=COLLECTION)
        steps: list[str | None] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            steps.append(message)

        drift = await s.call_tool("ask_drift", {"question": "What did the Curies discover?", "collection": COLLECTION,
                                                "no_llm": True}, progress_callback=progress)  # fmt: skip
    assert {"ask_lazy_rag", "ask_graph_rag", "search_chunks", "load_documents"} <= tools
    assert not res.is_error, text(res)
    top = res.structured_content["passages"][:3]
    assert any(p["document_id"] == "polonium-and-radium.md" and "polonium" in p["text"].lower() for p in top)
    assert unknown.is_error and "unknown collection 'elsewhere'" in text(unknown)
    assert "marie-curie.md" in {d["id"] for d in docs.structured_content["documents"]}
    # DRIFT's steps arrive as MCP progress notifications before its answer
    assert not drift.is_error and drift.structured_content["passages"]
    assert len(steps) >= 3 and any("communities" in (m or "") for m in steps), steps


async def test_stdio_through_the_gateway(corpus: Corpus, gateway: Gateway) -> None:
    log = corpus.home.parent / "stdio-url.log"
    async with stdio_session(log, "--url", gateway.url, "--token", ADMIN_TOKEN) as s:
        res = await call(s, "search_chunks", query="Who coined the word radioactivity?", collection=COLLECTION)
    assert not res.is_error, text(res)
    assert res.structured_content["passages"][0]["chunk_id"]

    async with stdio_session(log, "--url", gateway.url, "--token", "not-a-token") as s:
        refused = await call(s, "list_collections")
    assert refused.is_error and "token" in text(refused).lower()

    async with stdio_session(log, "--url", gateway.url, "--token", ALICE_TOKEN, "--user", "default") as s:
        foreign = await call(s, "list_documents", collection=COLLECTION)
    assert foreign.is_error and "workspace" in text(foreign)


async def test_stdio_with_a_bound_token_acts_in_its_workspace(corpus: Corpus, gateway: Gateway) -> None:
    log = corpus.home.parent / "stdio-bound.log"
    async with stdio_session(log, "--url", gateway.url, "--token", ALICE_TOKEN) as s:  # no --user
        own = await call(s, "list_collections")
    assert not own.is_error, text(own)  # alice's workspace (empty), not `default`, which her token may not use

    async with stdio_session(log, "--url", gateway.url, "--token", ALICE_TOKEN, "--user", "bob") as s:
        other = await call(s, "list_collections")
    assert other.is_error and "may not act in workspace 'bob'" in text(other)
