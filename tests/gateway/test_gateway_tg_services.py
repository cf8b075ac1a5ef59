"""TrustGraph's workspace and flow services the gateway answers itself, through REST on an in-process
system: config items (kept by the flow registry, persisted), kgflow's read-only prompts and the prompt
service, the library and its processing, TrustGraph's reranker shape, the metrics query, refusals."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from gw_support import LiveGateway

from processors.base.flow_registry import FlowRegistry
from processors.gateway.tg_metrics import QueryError, evaluate, parse
from schemas.flows import ConfigItem, FlowRequest
from tests.documents.format_files import text_pdf


async def post(live: LiveGateway, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as s, s.post(f"{live.url}/api/v1/{path}", json=body) as r:
        return r.status, await r.json()


async def test_config_items_round_trip_per_workspace(live: LiveGateway) -> None:
    put = {"operation": "put", "values": [{"type": "tool", "key": "lookup", "value": '{"name": "lookup"}'}]}
    assert (await post(live, "config", put)) == (200, {})
    _, listed = await post(live, "config", {"operation": "list", "type": "tool"})
    assert listed["directory"] == ["lookup"]
    _, got = await post(live, "config", {"operation": "get", "keys": [{"type": "tool", "key": "lookup"},
                                                                      {"type": "tool", "key": "missing"}]})  # fmt: skip
    assert [v["value"] for v in got["values"]] == ['{"name": "lookup"}', None]  # a missing key reads null
    _, other = await post(live, "config", {"operation": "list", "type": "tool", "workspace": "bob"})
    assert other["directory"] == []  # another workspace's items are its own
    _, flow_config = await post(live, "flow", {"operation": "get-config"})
    assert "lookup" not in json.dumps(flow_config)  # never shown through the flow service
    await post(live, "config", {"operation": "delete", "keys": [{"type": "tool", "key": "lookup"}]})
    _, listed = await post(live, "config", {"operation": "list", "type": "tool"})
    assert listed["directory"] == []


def test_config_items_are_kept_with_the_flows(tmp_path: Path) -> None:
    path = tmp_path / "flows.json"
    item = ConfigItem(type="token-cost", key="gpt", value='{"input_price": 1e-06}')
    FlowRegistry(path).handle(FlowRequest(operation="put-config-items", workspace="alice", items=[item]))
    assert FlowRegistry(path).state.items == {"alice": {"token-cost": {"gpt": '{"input_price": 1e-06}'}}}
    assert FlowRegistry(path).state.redacted().items == {}


async def test_kgflow_prompts_are_read_only_and_user_templates_are_invoked(live: LiveGateway) -> None:
    _, prompts = await post(live, "config", {"operation": "getvalues", "type": "prompt"})
    shown = {v["key"]: v["value"] for v in prompts["values"]}
    summary = json.loads(shown["template.lazy-rag-summary"])
    assert summary["read-only"] and summary["response-type"] == "json" and "summary" in summary["schema"]["required"]
    write = {"operation": "put", "values": [{"type": "prompt", "key": "template.lazy-rag-summary", "value": "{}"}]}
    status, refused = await post(live, "config", write)
    assert status == 200 and refused["error"]["type"] == "not-supported" and "read-only" in refused["error"]["message"]
    same = {"operation": "put", "values": [{"type": "prompt", "key": "template.lazy-rag-summary",
                                            "value": shown["template.lazy-rag-summary"]}]}  # fmt: skip
    assert (await post(live, "config", same)) == (200, {})  # putting back what is shown changes nothing

    template = json.dumps({"id": "greet", "prompt": "Say hello to {{ name }}.", "response-type": "text"})
    await post(live, "config", {"operation": "put", "values": [{"type": "prompt", "key": "template.greet",
                                                                 "value": template}]})  # fmt: skip
    status, answer = await post(live, "flow/default/service/prompt", {"id": "greet", "variables": {"name": "Ada"}})
    assert status == 200 and answer["text"].startswith("No language model is configured"), answer
    status, missing = await post(live, "flow/default/service/prompt", {"id": "greet", "variables": {}})
    assert status == 400 and "'name'" in missing["error"]["message"]
    status, builtin = await post(live, "flow/default/service/prompt", {"id": "graph-rag-answer"})
    assert builtin["error"]["type"] == "not-supported"


async def test_library_add_process_and_remove(live: LiveGateway) -> None:
    text = "The Valdren orchard grows quince and medlar trees, watered by a canal dug in 1902."
    meta = {"id": "orchard", "title": "Valdren", "kind": "text/plain", "tags": ["farm"], "metadata": []}
    add = {"operation": "add-document", "document-metadata": meta, "content": base64.b64encode(text.encode()).decode()}
    assert (await post(live, "librarian", add)) == (200, {})
    status, again = await post(live, "librarian", add)
    assert status == 200 and "already in the library" in again["error"]["message"]
    _, listed = await post(live, "librarian", {"operation": "list-documents"})
    assert [(d["id"], d["title"], d["tags"]) for d in listed["document-metadatas"]] == [
        ("orchard", "Valdren", ["farm"])
    ]
    processing = {"id": "p1", "document-id": "orchard", "flow": "default", "collection": "farm"}
    status, report = await post(live, "librarian", {"operation": "add-processing", "processing-metadata": processing})
    assert status == 200 and report["loaded"] == 1 and report["chunks"] >= 1, report
    _, answer = await post(live, "flow/default/service/lazy-rag", {"query": "What trees grow in the orchard?",
                                                                   "collection": "farm", "no-llm": True})  # fmt: skip
    assert "quince" in answer["response"]
    # what processing would refuse is refused at add-document, with its reason, in the body of a 200 (the
    # field trustgraph-cli prints: it shows only `Status code N` for anything else)
    binary = {**add, "document-metadata": {**meta, "id": "scan"}, "content": base64.b64encode(b"\xff\xfe\x00").decode()}
    status, refused = await post(live, "librarian", binary)
    assert status == 200 and "cannot be processed: not utf-8 text" in refused["error"]["message"], refused
    status, missing = await post(
        live, "librarian", {"operation": "add-processing", "processing-metadata": {**processing, "document-id": "scan"}}
    )
    assert status == 200 and "no document 'scan' in the library" in missing["error"]["message"]
    pdf = text_pdf("Ferry Log", ["The Halvard ferry crosses the Sundmere strait twice a day."])
    add_pdf = {**add, "document-metadata": {**meta, "id": "ferry", "kind": "application/pdf", "title": ""},
               "content": base64.b64encode(pdf).decode()}  # fmt: skip
    assert (await post(live, "librarian", add_pdf)) == (200, {})
    ferry = {"operation": "add-processing", "processing-metadata": {**processing, "document-id": "ferry"}}
    status, report = await post(live, "librarian", ferry)
    assert status == 200 and report["loaded"] == 1, report
    _, answer = await post(live, "flow/default/service/lazy-rag", {"query": "Which strait does the ferry cross?",
                                                                   "collection": "farm", "no-llm": True})  # fmt: skip
    assert "Sundmere" in answer["response"] and "Ferry Log" in json.dumps(answer), answer
    await post(live, "librarian", {"operation": "remove-document", "document-id": "orchard"})
    _, listed = await post(live, "librarian", {"operation": "list-documents"})
    assert [d["id"] for d in listed["document-metadatas"]] == ["ferry"]
    status, unknown = await post(live, "librarian", {"operation": "stream-document"})
    assert status == 200 and "not supported by kgflow" in unknown["error"]["message"]


async def test_trustgraph_reranker_shape(live: LiveGateway) -> None:
    documents = [{"document_id": "a", "document_text": "quince trees in an orchard"},
                 {"document_id": "b", "document_text": "Marie Curie discovered radium"}]  # fmt: skip
    body = {"queries": [{"query_id": "q", "query_text": "who discovered radium"}], "documents": documents, "limit": 2}
    status, res = await post(live, "flow/default/service/reranker", body)
    assert status == 200, res
    assert [r["document_id"] for r in res["results"]] == ["b", "a"] and res["results"][0]["score"] > 0.3


def test_metrics_query_selectors() -> None:
    assert parse('consumer_state{consumer_state="running",flow="default"}') == (
        "consumer_state", {"consumer_state": "running", "flow": "default"})  # fmt: skip
    with pytest.raises(QueryError, match="not supported by kgflow"):
        parse("rate(input_tokens_total[5m])")


async def test_metrics_query_sees_running_processors(live: LiveGateway) -> None:
    processors = {r["metric"]["processor"] for r in evaluate("processor_info")}
    assert {"graph-rag", "lazy-rag", "gateway"} <= processors
    consumers = evaluate('consumer_state{consumer_state="running",flow="default"}')
    assert {("graph-rag", "graph-rag")} <= {(r["metric"]["processor"], r["metric"]["service"]) for r in consumers}
    async with aiohttp.ClientSession() as s, s.get(f"{live.url}/api/metrics/query", params={"query": "up{"}) as r:
        assert r.status == 400 and "not supported" in (await r.json())["error"]
