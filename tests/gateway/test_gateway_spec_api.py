"""The specs' own endpoints on an in-process system (real stores and embedding model, no language model):
LazyRAG's `/api/v1/lazy-rag/query` and `/expand` in the spec's `{data, meta}` wrapper, DRIFT's `/retrieve`
(`project_id` is the collection, nothing found is a 200 with `no_data_found`) and its progress phases as
server-sent events; auth and workspace binding as on every route; refusals are 4xx, never 5xx."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from gw_support import LiveGateway, served

from processors.base.bus import MemoryBus
from processors.base.settings import RuntimeSettings
from processors.gateway.chat_format import WORKSPACE_HEADER
from processors.gateway.service import GatewayProcessor, GatewaySettings
from processors.gateway.spec_routes import KNOBS
from schemas.lazy_rag import LazyRagParams
from schemas.spec_api import LazyRagApiRequest, LazyRagApiResponse, RetrievalProgress, RetrieveResponse

TEXTS = {
    "curie": ("Marie Curie", "Marie Curie was a physicist. She worked in Paris with Pierre Curie. "
              "Marie Curie won the Nobel Prize in Physics with Pierre Curie."),
    "warsaw": ("Warsaw", "Warsaw is the capital of Poland. Marie Curie was born in Warsaw. "
               "The Vistula flows through Warsaw."),
}  # fmt: skip
QUESTION = "Where was Marie Curie born?"


async def post(url: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as s, s.post(url, json=body, headers=headers or {}) as r:
        return r.status, await r.json()


async def load_papers(live: LiveGateway, collection: str = "papers") -> None:
    """The two documents into `collection` of workspace `default`, then its communities."""
    docs = [{"id": i, "title": t, "text": x} for i, (t, x) in TEXTS.items()]
    base = f"{live.url}/api/v1/flow/default/service"
    status, out = await post(f"{base}/document-load", {"collection": collection, "documents": docs})
    assert status == 200 and "error" not in out, out
    status, out = await post(f"{base}/community-build", {"collection": collection})
    assert status == 200 and "error" not in out, out


async def test_lazy_rag_query_and_expand_answer_in_the_spec_wrapper(live: LiveGateway) -> None:
    await load_papers(live)
    status, out = await post(f"{live.url}/api/v1/lazy-rag/query", {"query": QUESTION, "collection": "papers",
                                                                   "max_hops": 1})  # fmt: skip
    assert status == 200, out
    res = LazyRagApiResponse.model_validate(out)
    assert res.meta.requestId and res.data.query == QUESTION and res.data.summary and not res.data.no_data_found
    assert "warsaw" in {c.document_id for c in res.data.chunks} and res.data.generation_time_ms > 0
    status, out = await post(f"{live.url}/api/v1/lazy-rag/expand", {"query": QUESTION, "collection": "papers"})
    expanded = LazyRagApiResponse.model_validate(out).data
    assert status == 200 and expanded.entities and expanded.chunks
    assert expanded.stats is not None and expanded.stats.llm_calls == 0
    status, out = await post(f"{live.url}/api/v1/lazy-rag/query", {"query": QUESTION, "collection": "nope"})
    assert status == 200 and out["data"]["no_data_found"] is True and out["data"]["chunks"] == []


async def test_retrieve_answers_drift_and_nothing_found_is_a_200(live: LiveGateway) -> None:
    await load_papers(live)
    status, out = await post(f"{live.url}/retrieve", {"query": QUESTION, "top_k": 2, "project_id": "papers"})
    assert status == 200, out
    res = RetrieveResponse.model_validate(out)
    assert not res.no_data_found and res.final_answer and res.retrieval_id
    assert "warsaw" in {d.id for d in res.documents}
    status, out = await post(f"{live.url}/retrieve", {"query": QUESTION, "top_k": 1, "project_id": "empty"})
    assert status == 200 and out["no_data_found"] is True
    assert (out["final_answer"], out["key_facts"], out["residual_uncertainty"]) == ("", [], "")


async def test_retrieve_streams_progress_phases_as_server_sent_events(live: LiveGateway) -> None:
    await load_papers(live)
    body = {"query": QUESTION, "top_k": 2, "project_id": "papers"}
    async with aiohttp.ClientSession() as s, s.post(f"{live.url}/retrieve", json=body,
                                                    headers={"Accept": "text/event-stream"}) as r:  # fmt: skip
        assert r.status == 200 and r.content_type == "text/event-stream"
        text = await r.text()
    events = [_event(block) for block in text.strip().split("\n\n")]
    progress = [RetrievalProgress.model_validate(d) for e, d in events if e == "retrieval_progress"]
    assert [e for e, _ in events][-1] == "result" and RetrieveResponse.model_validate(events[-1][1]).final_answer
    phases = [p.phase for p in progress]
    assert phases[0] == "initializing" and phases[-1] == "completed" and "retrieving_communities" in phases
    pcts = [p.progress_pct for p in progress]
    assert pcts == sorted(pcts) and pcts[0] == 0 and pcts[-1] == 100
    assert {p.project_id for p in progress} == {"papers"} and len({p.retrieval_id for p in progress}) == 1
    # no model, so no follow-up questions: none is announced, nor a combination of none
    said = " ".join(p.thought_summary for p in progress)
    assert "follow-up question" not in said and "Combining" not in said and "1 chunks" not in said, said
    assert "No language model: searching the question in" in said


def test_the_lazy_rag_knobs_are_the_services() -> None:
    assert KNOBS <= set(LazyRagParams.model_fields) and KNOBS <= set(LazyRagApiRequest.model_fields)


def _event(block: str) -> tuple[str, dict[str, Any]]:
    fields = dict(line.split(": ", 1) for line in block.splitlines())
    return fields["event"], json.loads(fields["data"])


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/retrieve", {"query": QUESTION, "top_k": 0}),
        ("/retrieve", {"query": "", "project_id": "papers"}),
        ("/retrieve", {"query": QUESTION, "projectid": "papers"}),  # a typo is refused, not ignored
        ("/retrieve", [QUESTION]),
        ("/api/v1/lazy-rag/query", {"query": QUESTION, "max_hops": 9}),
        ("/api/v1/lazy-rag/expand", {"query": QUESTION, "collection": " "}),
        ("/api/v1/lazy-rag/query", {"query": QUESTION, "timeout_s": 1e-300}),  # the flow's budget holds
    ],
)
async def test_malformed_requests_are_400_naming_the_field(live: LiveGateway, path: str, body: Any) -> None:
    status, out = await post(f"{live.url}{path}", body)
    assert status == 400 and out["error"]["type"] == "bad-request", out


async def test_unknown_flow_is_404(live: LiveGateway) -> None:
    for accept in ("application/json", "text/event-stream"):  # refused before a stream would begin
        headers = {"X-Kgflow-Flow": "nope", "Accept": accept}
        status, out = await post(f"{live.url}/retrieve", {"query": QUESTION}, headers)
        assert status == 404 and out["error"]["type"] == "unknown-flow"


@pytest.mark.parametrize("live", [GatewaySettings(token_file=None, token="s3cret")], indirect=True)
async def test_spec_routes_take_the_gateways_auth(live: LiveGateway, tmp_path: Path) -> None:
    body = {"query": QUESTION, "project_id": "papers"}
    status, out = await post(f"{live.url}/retrieve", body)
    assert status == 401 and out["error"]["type"] == "unauthorized"
    status, _ = await post(f"{live.url}/api/v1/lazy-rag/query", {"query": QUESTION}, {"Authorization": "Bearer x"})
    assert status == 401
    ok = {"Authorization": "Bearer s3cret"}
    status, out = await post(f"{live.url}/retrieve", body, ok)
    assert status == 200 and out["no_data_found"] is True  # nothing loaded in workspace default / papers
    status, out = await post(f"{live.url}/api/v1/lazy-rag/query", {"query": QUESTION, "tenant_id": "a",
                                                                   "workspace": "b"}, ok)  # fmt: skip
    assert status == 400 and "conflicting workspaces" in out["error"]["message"]


async def test_a_token_bound_to_a_workspace_may_not_name_another(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("alice-token alice\n", encoding="utf-8")
    app = GatewayProcessor(MemoryBus(), RuntimeSettings(), GatewaySettings(token_file=str(tokens)), tmp_path).app()
    async with served(app) as port:
        url, alice = f"http://127.0.0.1:{port}", {"Authorization": "Bearer alice-token"}
        for path, body in (("/retrieve", {"query": QUESTION, "workspace": "bob"}),
                           ("/api/v1/lazy-rag/query", {"query": QUESTION, "tenant_id": "bob"}),
                           ("/api/v1/lazy-rag/expand", {"query": QUESTION})):  # fmt: skip
            headers = alice if "workspace" in body or "tenant_id" in body else {**alice, WORKSPACE_HEADER: "bob"}
            status, out = await post(f"{url}{path}", body, headers)
            assert status == 403 and out["error"]["type"] == "forbidden", (path, out)


@pytest.mark.parametrize("query", ["÷", "÷º¹", "×"])
async def test_a_question_of_symbols_only_is_answered_not_a_500(live: LiveGateway, query: str) -> None:
    # schemathesis found it: such a "word" is a BM25 term but no FTS5 word, so the SQLite query read "terms : ()"
    await load_papers(live)
    status, out = await post(f"{live.url}/api/v1/lazy-rag/query", {"query": query, "collection": "papers"})
    assert status == 200 and out["data"]["query"] == query, out
