"""Document-retrieval quality and latency on a loaded home (bench/docqa/run.py runs it): every
question asked once of lazy-rag, DRIFT and kg-query (no model), of the chunk search by mode, and
ranked by dense search over the chunk text alone; recall@k per question (summarised per half by
bench/docqa/protocol.py); and the cost of a scope (each question scoped to its own context
paragraphs) against the same questions unscoped."""

from __future__ import annotations

import ast
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.docqa.collection import COLLECTION, USER, client
from bench.docqa.protocol import BASELINES, DENSE_TEXT_ONLY, Recall, mean_recall
from bench.harness.stats import percentile
from processors.algorithms.passage_rank import documents_of
from processors.base.client import RequestResponseClient
from processors.commands.system import System
from processors.models.embeddings.model import OnnxMiniLM
from schemas.documents import ChunkSearch, Scope
from schemas.drift import DriftRequest
from schemas.kg_query import KgQueryRequest
from schemas.lazy_rag import LazyRagRequest
from schemas.services import DOCUMENTS, DRIFT, KG_QUERY, LAZY_RAG

if TYPE_CHECKING:
    from bench.docqa.dense import DenseTextOnly

KS = (2, 5, 10)
KG_MODES = ("local", "global", "hybrid", "mix", "naive")
BASELINE_CHUNKS = 10  # chunks each baseline returns, as lazy-rag does by default (its chunk_limit)


def recall(ranked: Sequence[str], gold: set[str]) -> Recall:
    """recall@k of the gold documents among the first k distinct ranked ones."""
    distinct = list(dict.fromkeys(ranked))
    return {f"recall@{k}": len(gold & set(distinct[:k])) / len(gold) for k in KS}


def _ms(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(percentile(values, 50), 1), "p95_ms": round(percentile(values, 95), 1)}


async def _timed(c: RequestResponseClient[Any], req: Any, into: list[float]) -> Any:
    """`c`'s answer to `req`; its wall time (ms) appended to `into`."""
    began = time.perf_counter()
    res = await c.request(req)
    into.append((time.perf_counter() - began) * 1000)
    return res


@dataclass
class Asked:
    """Every question's recall per service and baseline (`recall[name][question id]`), and the
    services' client-side latencies."""

    recall: dict[str, dict[str, Recall]] = field(default_factory=dict)
    ms: dict[str, list[float]] = field(default_factory=dict)
    lazy_rag_round_trips: list[int] = field(default_factory=list)
    lazy_rag_store_requests: list[int] = field(default_factory=list)

    def put(self, name: str, qid: str, ranked: Sequence[str], gold: set[str]) -> None:
        self.recall.setdefault(name, {})[qid] = recall(ranked, gold)

    def latency(self) -> dict[str, Any]:
        """p50/p95 per service over every question, and lazy-rag's store round trips and requests."""
        out: dict[str, Any] = {name: _ms(ms) for name, ms in self.ms.items()}
        trips = self.lazy_rag_round_trips
        out["lazy_rag"]["store_round_trips_per_query"] = round(sum(trips) / len(trips), 2)
        out["lazy_rag"]["store_round_trips_max"] = max(trips)
        requests = self.lazy_rag_store_requests
        out["lazy_rag"]["store_requests_per_query"] = round(sum(requests) / len(requests), 2)
        out["questions"] = len(trips)
        return out


async def ask_all(
    system: System, questions: list[dict[str, Any]], dense: DenseTextOnly, kg_modes: Sequence[str] = ("mix",)
) -> Asked:
    """Ask every question of every service (no model) and baseline, on the same store."""
    lazy, docs, drift, kg = (client(system, s) for s in (LAZY_RAG, DOCUMENTS, DRIFT, KG_QUERY))
    embedder = OnnxMiniLM.shared()
    out = Asked(ms={"lazy_rag": [], "drift": [], **{f"kg_query_{m}": [] for m in kg_modes}})
    for q in questions:
        qid, text, gold = str(q["id"]), q["question"], set(q["supporting_paragraph_ids"])
        res = await _timed(lazy, LazyRagRequest(user=USER, collection=COLLECTION, query=text, no_llm=True),
                           out.ms["lazy_rag"])  # fmt: skip
        out.lazy_rag_round_trips.append(res.stats.store_round_trips if res.stats else 0)
        out.lazy_rag_store_requests.append(res.stats.store_requests if res.stats else 0)
        out.put("lazy_rag", qid, [d.id for d in res.documents], gold)
        dreq = DriftRequest(user=USER, collection=COLLECTION, query=text, no_llm=True, streaming=False)
        out.put("drift", qid, [d.id for d in (await _timed(drift, dreq, out.ms["drift"])).documents], gold)
        for mode in kg_modes:
            kreq = KgQueryRequest(user=USER, collection=COLLECTION, query=text, mode=mode, no_llm=True)
            found = await _timed(kg, kreq, out.ms[f"kg_query_{mode}"])
            out.put(f"kg_query_{mode}", qid, [d.id for d in found.references], gold)
        vector = (await embedder.embed([text]))[0]
        for mode in BASELINES:
            search = ChunkSearch(user=USER, collection=COLLECTION, vector=vector, text=text, mode=mode,
                                 limit=BASELINE_CHUNKS)  # fmt: skip
            out.put(mode, qid, [d.id for d in documents_of((await docs.request(search)).chunks)], gold)
        out.put(DENSE_TEXT_ONLY, qid, dense.rank(vector, BASELINE_CHUNKS), gold)
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
        rows: list[Recall] = []
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
