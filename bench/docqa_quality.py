"""Document-retrieval quality and latency on a loaded home (bench/docqa.py runs it): recall@k of
lazy-rag, DRIFT (no model), kg-query per mode and the chunk search by mode; and the cost of a
scope (each question scoped to its own context paragraphs) against the same questions unscoped."""

from __future__ import annotations

import ast
import time
from collections.abc import Callable
from typing import Any

from bench.measure import percentile
from processors.algorithms.passage_rank import documents_of
from processors.base.client import RequestResponseClient
from processors.base.runtime import System
from processors.models.embeddings.model import OnnxMiniLM
from schemas.documents import ChunkSearch, Scope
from schemas.drift import DriftRequest
from schemas.kg_query import KgQueryRequest
from schemas.lazy_rag import LazyRagRequest
from schemas.services import DOCUMENTS, DRIFT, KG_QUERY, LAZY_RAG

USER, COLLECTION = "bench", "docqa"
KS = (2, 5, 10)
TIMEOUT_S = 3600.0
KG_MODES = ("local", "global", "hybrid", "mix", "naive")
SCOPE_TARGET = 1.5  # scoped p50 within this factor of unscoped (issue 17)


def client(system: System, service: Any) -> RequestResponseClient[Any]:
    """A client of `service` in flow default."""
    return RequestResponseClient.for_service(system.bus, service, "default", TIMEOUT_S)


def recall(ranked: list[str], gold: set[str]) -> dict[str, float]:
    """recall@k of the gold documents among the first k distinct ranked ones."""
    distinct = list(dict.fromkeys(ranked))
    return {f"recall@{k}": len(gold & set(distinct[:k])) / len(gold) for k in KS}


def mean_recall(rows: list[dict[str, float]]) -> dict[str, float]:
    """Each recall@k averaged over the questions."""
    return {k: round(sum(r[k] for r in rows) / len(rows), 4) for k in rows[0]} if rows else {}


def _ms(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(percentile(values, 50), 1), "p95_ms": round(percentile(values, 95), 1)}


async def _timed(c: RequestResponseClient[Any], req: Any, into: list[float]) -> Any:
    """`c`'s answer to `req`; its wall time (ms) appended to `into`."""
    began = time.perf_counter()
    res = await c.request(req)
    into.append((time.perf_counter() - began) * 1000)
    return res


async def quality(system: System, questions: list[dict[str, Any]]) -> dict[str, Any]:
    """recall@k of lazy-rag, DRIFT and the chunk search by mode, same questions, same store."""
    lazy, docs, drift = client(system, LAZY_RAG), client(system, DOCUMENTS), client(system, DRIFT)
    embedder = OnnxMiniLM.shared()
    rows: dict[str, list[dict[str, float]]] = {"lazy_rag": [], "drift": [], "fused": [], "vector": [], "lexical": []}
    latency: list[float] = []
    drift_ms: list[float] = []
    trips: list[int] = []
    requests: list[int] = []
    for q in questions:
        gold = set(q["supporting_paragraph_ids"])
        req = LazyRagRequest(user=USER, collection=COLLECTION, query=q["question"], no_llm=True)
        res = await _timed(lazy, req, latency)
        trips.append(res.stats.store_round_trips if res.stats else 0)
        requests.append(res.stats.store_requests if res.stats else 0)
        rows["lazy_rag"].append(recall([d.id for d in res.documents], gold))
        dreq = DriftRequest(user=USER, collection=COLLECTION, query=q["question"], no_llm=True, streaming=False)
        found_d = await _timed(drift, dreq, drift_ms)
        rows["drift"].append(recall([d.id for d in found_d.documents], gold))
        vector = (await embedder.embed([q["question"]]))[0]
        for mode in ("fused", "vector", "lexical"):
            search = ChunkSearch(
                user=USER, collection=COLLECTION, vector=vector, text=q["question"], mode=mode, limit=10
            )
            found = (await docs.request(search)).chunks
            rows[mode].append(recall([d.id for d in documents_of(found)], gold))
    out: dict[str, Any] = {name: mean_recall(r) for name, r in rows.items()}
    best = max(out["vector"]["recall@5"], out["lexical"]["recall@5"])
    out["lazy_rag_recall@5_over_better_baseline"] = round(out["lazy_rag"]["recall@5"] - best, 4)
    lat = _ms(latency)
    out["lazy_rag_p50_ms"], out["lazy_rag_p95_ms"] = lat["p50_ms"], lat["p95_ms"]
    out["lazy_rag_store_round_trips_per_query"] = round(sum(trips) / len(trips), 2)
    out["lazy_rag_store_round_trips_max"] = max(trips)
    out["lazy_rag_store_requests_per_query"] = round(sum(requests) / len(requests), 2)
    out["drift_recall@5_minus_lazy_rag"] = round(out["drift"]["recall@5"] - out["lazy_rag"]["recall@5"], 4)
    d = _ms(drift_ms)
    out["drift_no_model_p50_ms"], out["drift_no_model_p95_ms"] = d["p50_ms"], d["p95_ms"]
    out["questions"] = len(questions)
    return out


async def kg_query_modes(system: System, questions: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kg-query mode: context-build latency (no model) and recall@k of the context's documents."""
    kg = client(system, KG_QUERY)
    out: dict[str, Any] = {}
    for mode in KG_MODES:
        rows: list[dict[str, float]] = []
        ms: list[float] = []
        for q in questions:
            req = KgQueryRequest(user=USER, collection=COLLECTION, query=q["question"], mode=mode, no_llm=True)
            res = await _timed(kg, req, ms)
            rows.append(recall([d.id for d in res.references], set(q["supporting_paragraph_ids"])))
        out[mode] = {**mean_recall(rows), **_ms(ms)}
    return out


def context_scope(q: dict[str, Any]) -> Scope | None:
    """The question's own context paragraphs as a document scope (None when the set has none)."""
    ids = q.get("context_paragraph_ids")
    if isinstance(ids, str):
        ids = ast.literal_eval(ids)
    return Scope(document_ids=list(ids)) if ids else None


async def scope_cost(system: System, questions: list[dict[str, Any]]) -> dict[str, Any]:
    """The same questions unscoped and scoped to their context paragraphs: p50/p95 of each and the
    ratio (target: scoped within 1.5x), and scoped recall@5 (a scope loses nothing it holds)."""
    scoped_qs = [(q, s) for q in questions if (s := context_scope(q)) is not None]
    if not scoped_qs:
        return {"skipped": "the set names no context paragraphs per question"}
    services: dict[str, Callable[[str, Scope | None], Any]] = {
        "lazy_rag": lambda text, scope: LazyRagRequest(
            user=USER, collection=COLLECTION, query=text, no_llm=True, scope=scope
        ),
        "kg_query_mix": lambda text, scope: KgQueryRequest(
            user=USER, collection=COLLECTION, query=text, mode="mix", no_llm=True, scope=scope
        ),
    }
    out: dict[str, Any] = {}
    for name, make in services.items():
        c = client(system, LAZY_RAG if name == "lazy_rag" else KG_QUERY)
        plain: list[float] = []
        scoped: list[float] = []
        rows: list[dict[str, float]] = []
        for q, scope in scoped_qs:
            await _timed(c, make(q["question"], None), plain)
            res = await _timed(c, make(q["question"], scope), scoped)
            docs = res.documents if name == "lazy_rag" else res.references
            assert {d.id for d in docs} <= set(scope.document_ids or []), f"{name}: a result outside the scope"
            rows.append(recall([d.id for d in docs], set(q["supporting_paragraph_ids"])))
        ratio = percentile(scoped, 50) / max(percentile(plain, 50), 1e-9)
        out[name] = {"unscoped": _ms(plain), "scoped": _ms(scoped), "scoped_p50_over_unscoped": round(ratio, 2),
                     "scoped_recall": mean_recall(rows)}  # fmt: skip
    out["questions"] = len(scoped_qs)
    return out
