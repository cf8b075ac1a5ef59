"""Round trips between the gateway's kebab-case JSON (TrustGraph names) and kgflow's schemas."""

from __future__ import annotations

import json

import pytest

from processors.gateway import translate as tr
from schemas.embeddings import EmbeddingsResponse
from schemas.flows import Blueprint, Flow, FlowResponse, ProcessorBinding
from schemas.graph_embeddings import EntityMatch, GraphEmbeddingsResponse
from schemas.graph_rag import GraphRagRequest, GraphRagResponse, GraphRagStats, SeedEntity
from schemas.terms import LabelledTriple, Term, Triple
from schemas.text_completion import TextCompletionResponse

TERMS = [
    Term.iri("http://example.org/a"),
    Term.literal("plain"),
    Term.literal("42", datatype="http://www.w3.org/2001/XMLSchema#integer"),
    Term.literal("chat", language="fr"),
]


@pytest.mark.parametrize("term", TERMS)
def test_term_round_trip(term: Term) -> None:
    wire = tr.term_to_wire(term)
    assert wire["t"] in ("i", "l")
    assert tr.term_from_wire(wire, "s") == term


def test_terms_use_trustgraph_compact_names() -> None:
    assert tr.term_to_wire(TERMS[0]) == {"t": "i", "i": "http://example.org/a"}
    assert tr.term_to_wire(TERMS[3]) == {"t": "l", "v": "chat", "ln": "fr"}
    assert tr.term_from_wire({"type": "iri", "iri": "urn:x"}, "s") == Term.iri("urn:x")  # long form read too


def test_triple_round_trip() -> None:
    t = Triple(s=TERMS[0], p=Term.iri("http://example.org/p"), o=TERMS[2])
    assert tr.triple_from_wire(tr.triple_to_wire(t), "t") == t


@pytest.mark.parametrize(
    ("wire", "field"),
    [({"t": "t", "tr": {}}, "s.t"), ({"t": "i"}, "s.i"), ("x", "s"), ({"t": "l", "v": 3}, "s.v")],
)
def test_bad_terms_name_the_field(wire: object, field: str) -> None:
    with pytest.raises(tr.BadRequest, match=field.replace(".", r"\.")):
        tr.term_from_wire(wire, "s")


def test_graph_rag_request_round_trip() -> None:
    req = GraphRagRequest(
        user="alice",
        collection="c1",
        query="who?",
        entity_limit=5,
        triple_limit=7,
        max_subgraph_size=9,
        max_path_length=3,
        edge_limit=4,
        traversal="bfs",
        streaming=True,
        no_llm=True,
        timeout_s=12.5,
    )
    wire = tr.graph_rag_request_to_wire(req)
    assert wire["entity-limit"] == 5 and wire["max-subgraph-size"] == 9 and "user" not in wire
    assert tr.graph_rag_request(wire, "alice") == req


def test_graph_rag_request_from_trustgraph_cli() -> None:
    wire = {
        "query": "q",
        "collection": "c",
        "entity-limit": 50,
        "triple-limit": 30,
        "max-subgraph-size": 150,
        "max-path-length": 2,
        "edge-score-limit": 30,  # TrustGraph-only knobs are ignored
        "edge-limit": 25,
        "max-reranker-input": 350,
        "streaming": True,
    }
    req = tr.graph_rag_request(wire, "default")
    assert (req.entity_limit, req.triple_limit, req.max_subgraph_size, req.edge_limit) == (50, 30, 150, 25)
    assert req.user == "default" and req.streaming


def test_graph_rag_request_errors_name_the_gateway_field() -> None:
    with pytest.raises(tr.BadRequest, match="query: Field required"):
        tr.graph_rag_request({"collection": "c"}, "u")
    with pytest.raises(tr.BadRequest, match="entity-limit"):
        tr.graph_rag_request({"query": "q", "entity-limit": 0}, "u")


def _full_response() -> GraphRagResponse:
    return GraphRagResponse(
        response="answer",
        message_type="answer",
        end_of_stream=True,
        end_of_session=True,
        entities=[SeedEntity(id="http://e/a", label="a", score=0.9, lexical=True)],
        triples=[LabelledTriple(s="a", p="knows", o="b", s_id="http://e/a", p_id="http://r/k", o_id="http://e/b")],
        sources=["http://e/a", "http://e/b"],
        stats=GraphRagStats(store_round_trips=3, rows_read=10, elapsed_ms=1.5, stage_ms={"seed": 0.5}),
        model="m",
        in_token=10,
        out_token=2,
    )


def test_graph_rag_response_round_trip() -> None:
    res = _full_response()
    wire = tr.graph_rag_response_to_wire(res)
    assert wire["sources"] == [{"uri": "http://e/a", "title": "a"}, {"uri": "http://e/b", "title": "b"}]
    assert "error" not in wire  # TrustGraph clients treat any `error` key as a failure
    assert tr.graph_rag_response_from_wire(json.loads(json.dumps(wire))) == res


def test_streamed_chunk_round_trip() -> None:
    res = GraphRagResponse(response="piece", message_type="chunk", end_of_stream=False, end_of_session=False)
    assert tr.graph_rag_response_from_wire(tr.graph_rag_response_to_wire(res)) == res


def test_triples_request_and_batches() -> None:
    q = tr.triples_request(
        {"s": {"t": "i", "i": "urn:s"}, "limit": 5, "collection": "c", "streaming": True, "batch-size": 2}, "u"
    )
    assert q.query.s == Term.iri("urn:s") and q.query.limit == 5 and q.query.user == "u"
    assert q.streaming and q.batch_size == 2 and q.graph is None
    t = Triple(s=Term.iri("urn:s"), p=Term.iri("urn:p"), o=Term.literal("x"))
    wire = tr.triples_batch_to_wire([t], is_final=True)
    assert wire["is_final"] is True
    assert [tr.triple_from_wire(x, "t") for x in wire["response"]] == [t]
    with pytest.raises(tr.BadRequest, match="batch-size"):
        tr.triples_request({"batch-size": 0}, "u")


def test_service_responses_use_trustgraph_names() -> None:
    assert tr.embeddings_response_to_wire(EmbeddingsResponse(vectors=[[0.5]])) == {"vectors": [[0.5]]}
    ge = GraphEmbeddingsResponse(entities=[EntityMatch(entity=Term.iri("urn:e"), score=0.5, label="e")])
    assert tr.graph_embeddings_response_to_wire(ge)["entities"][0]["entity"] == {"t": "i", "i": "urn:e"}
    req = tr.graph_embeddings_request({"vector": [0.1, 0.2], "limit": 3, "collection": "c"}, "u")
    assert (req.vector, req.limit, req.collection, req.user) == ([0.1, 0.2], 3, "c", "u")
    tc = tr.text_completion_response_to_wire(TextCompletionResponse(response="hi", model="m", in_token=1))
    assert tc["end_of_stream"] is True and tc["response"] == "hi" and tc["in_token"] == 1


def test_blueprint_round_trip() -> None:
    bp = Blueprint(
        name="bp1",
        description="d",
        processors={"graph-rag": ProcessorBinding(parameters={"entity-limit": 5}), "triples": ProcessorBinding()},
        parameters={"triple-limit": 20},
    )
    definition = json.loads(
        tr.flow_response_to_wire("get-blueprint", FlowResponse(blueprint=bp))["blueprint-definition"]
    )
    assert definition["parameters"]["triple-limit"]["default"] == 20  # described, as tg-show-flows reads them
    req = tr.flow_request(
        {"operation": "put-blueprint", "blueprint-name": "bp1", "blueprint-definition": json.dumps(definition)}
    )
    assert req.blueprint == bp


def test_flow_requests_and_responses() -> None:
    req = tr.flow_request(
        {"operation": "start-flow", "flow-id": "f", "blueprint-name": "b", "description": "x", "parameters": {"a": "1"}}
    )
    assert (req.flow_id, req.blueprint_name, req.description, req.parameters) == ("f", "b", "x", {"a": "1"})
    flow = Flow(id="f", blueprint="b", description="x", parameters={"a": "1"})
    got = json.loads(tr.flow_response_to_wire("get-flow", FlowResponse(flow=flow))["flow"])
    assert got["blueprint-name"] == "b" and got["parameters"] == {"a": "1"}
    assert tr.flow_response_to_wire("list-flows", FlowResponse(flow_ids=["f"])) == {"flow-ids": ["f"]}
    with pytest.raises(tr.BadRequest, match="blueprint-definition.processors"):
        tr.flow_request({"operation": "put-blueprint", "blueprint-name": "b", "blueprint-definition": "{}"})
    with pytest.raises(tr.BadRequest, match="operation"):
        tr.flow_request({"flow-id": "f"})


def test_import_frame() -> None:
    frame = {
        "metadata": {"id": "doc", "metadata": [], "collection": "c"},
        "triples": [{"s": {"t": "i", "i": "urn:s"}, "p": {"t": "i", "i": "urn:p"}, "o": {"t": "l", "v": "x"}}],
    }
    collection, triples = tr.import_frame(frame)
    assert collection == "c" and triples == [Triple(s=Term.iri("urn:s"), p=Term.iri("urn:p"), o=Term.literal("x"))]
    with pytest.raises(tr.BadRequest, match=r"triples\[0\]\.o"):
        tr.import_frame({"metadata": {}, "triples": [{"s": {"t": "i", "i": "a"}, "p": {"t": "i", "i": "b"}}]})
