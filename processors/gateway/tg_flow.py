"""TrustGraph flow services kgflow answers with services of its own, beyond those in tg_documents.py:

- `prompt` (tg-invoke-prompt): a template of the workspace's config (tg_config.py) filled with the
  request's `variables`, completed by the flow's text-completion; frames `{"text", "response",
  "end_of_stream", "model"?, "in_token"?, "out_token"?}`.
- `reranker` in TrustGraph's shape (`queries: [{query_id, query_text}]`, `documents: [{document_id,
  document_text}]`, `limit`): each query's documents scored by kgflow's reranker (`semantic`: the cosine
  of the query to each document's text) and answered as `{"results": [{query_id, document_id, score}]}`,
  best first, at most `limit` per query. A request in kgflow's own shape (`query`, `results`) is
  passed through as before.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from processors.gateway.translate import DEFAULT_COLLECTION, BadRequest, require_object, validate_as
from schemas.reranker import RerankItem, RerankRequest, RerankResponse
from schemas.text_completion import TextCompletionResponse

MAX_TEXT = 8192


def is_trustgraph_rerank(wire: object) -> TypeGuard[dict[str, Any]]:
    """True for TrustGraph's reranker shape (it has `queries` and `documents`)."""
    return isinstance(wire, dict) and "queries" in wire and "documents" in wire


def _pairs(wire: dict[str, Any], field: str, id_field: str, text_field: str) -> list[tuple[str, str]]:
    raw = wire.get(field)
    if not isinstance(raw, list) or not raw:
        raise BadRequest(f"invalid request: {field}: expected a non-empty list")
    out = []
    for i, item in enumerate(raw):
        item = require_object(item, f"{field}[{i}]")
        text = item.get(text_field)
        if not isinstance(text, str) or not text or len(text) > MAX_TEXT:
            raise BadRequest(f"invalid request: {field}[{i}].{text_field}: expected text of 1-{MAX_TEXT} characters")
        out.append((str(item.get(id_field, i)), text))
    return out


def rerank_requests(wire: object, user: str) -> tuple[list[tuple[str, RerankRequest]], int]:
    """One kgflow rerank request per query (semantic scores of the documents' texts), and the limit."""
    wire = require_object(wire)
    queries = _pairs(wire, "queries", "query_id", "query_text")
    documents = _pairs(wire, "documents", "document_id", "document_text")
    limit = wire.get("limit", 10)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise BadRequest("invalid request: limit: expected a positive integer")
    items = [RerankItem(id=f"{i}", kind="triple", text=text) for i, (_, text) in enumerate(documents)]
    collection = wire.get("collection") or DEFAULT_COLLECTION
    reqs = [
        (qid, validate_as(RerankRequest, {"user": user, "collection": collection, "query": text,
                                          "strategy": "semantic", "results": items, "question_entities": []}))
        for qid, text in queries
    ]  # fmt: skip
    return reqs, limit


def rerank_results(qid: str, res: RerankResponse, document_ids: list[str], limit: int) -> list[dict[str, Any]]:
    """A query's results in TrustGraph's shape, best first (score: the semantic similarity)."""
    out = []
    for r in res.results[:limit]:
        score = r.graph_context.semantic_score if r.graph_context.semantic_score is not None else r.combined_score
        out.append({"query_id": qid, "document_id": document_ids[int(r.id)], "score": score})
    return out


def document_ids(wire: dict[str, Any]) -> list[str]:
    """The documents' ids in request order."""
    return [str(d.get("document_id", i)) for i, d in enumerate(wire["documents"])]


def prompt_frame(res: TextCompletionResponse) -> dict[str, Any]:
    """A text-completion answer as a prompt-service frame."""
    d: dict[str, Any] = {"text": res.response, "response": res.response, "end_of_stream": res.end_of_stream}
    for name in ("model", "in_token", "out_token"):
        if getattr(res, name, None) is not None:
            d[name] = getattr(res, name)
    return d
