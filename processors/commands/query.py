"""`kgflow query SERVICE`: graph-rag over triples, lazy-rag, kg-query and drift over documents.
In-process by default, over Pulsar with --pulsar, via a gateway with --url; one question (a
service that streams progress shows it on stderr), or --batch (JSON lines out, in input order)."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from processors.algorithms.wording import plural
from processors.base.client import RemoteError, RequestTimeout
from processors.base.settings import describe_errors
from processors.commands.connect import client, require_data
from processors.commands.options import runtime_settings
from schemas.base import Response
from schemas.documents import Chunk, Scope
from schemas.drift import DriftProgress, DriftRequest, DriftResponse
from schemas.graph_rag import GraphRagRequest, GraphRagResponse
from schemas.kg_query import KgQueryRequest, KgQueryResponse
from schemas.lazy_rag import LazyRagRequest, LazyRagResponse
from schemas.retrieval import Citation, DocumentRef, RequestCost
from schemas.scope import MetadataValue
from schemas.services import DRIFT, GRAPH_RAG, KG_QUERY, LAZY_RAG, Service


@dataclass(frozen=True)
class QueryKind:
    """How the CLI asks one service and shows its answer."""

    service: Service
    request: Callable[[argparse.Namespace, str, dict[str, Any]], BaseModel]
    to_json: Callable[[str, Any], dict[str, Any]]
    show: Callable[[Any], None]
    progress: Callable[[Any], None] | None = None  # shows a streamed progress step (stderr)


def parse_params(service: Service, pairs: list[str]) -> dict[str, Any]:
    """`NAME=VALUE` pairs (gateway names) as request fields of `service`."""
    known = service.param_names()
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or name not in known:
            raise ValueError(f"bad --param {pair!r}; known names: {', '.join(known)}")
        out[name.replace("-", "_")] = value
    return out


def scope_values(text: str) -> list[MetadataValue]:
    """What `--scope KEY=VALUE` matches: a number, `true` or `false` matches that value and the
    same text (metadata loaded as `{"year": 2024}` or as `{"year": "2024"}`); a JSON string in
    quotes (`'"2024"'`) only that string; anything else, the text as written."""
    try:
        value = json.loads(text)
    except ValueError:
        return [text]
    if isinstance(value, str):
        return [value]
    if isinstance(value, bool | int | float) and math.isfinite(value):
        return [value, text]
    return [text]  # null, NaN, a list or an object: the text itself


def parse_scope(a: argparse.Namespace) -> Scope | None:
    """--scope-document ID ... and --scope KEY=VALUE ... as a scope (None when neither is given)."""
    meta: dict[str, list[MetadataValue]] = {}
    for pair in getattr(a, "scope", None) or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"bad --scope {pair!r}: expected KEY=VALUE")
        meta.setdefault(key, []).extend(scope_values(value))
    docs = getattr(a, "scope_document", None) or None
    if docs is None and not meta:
        return None
    return Scope(document_ids=docs, metadata={k: v if len(v) > 1 else v[0] for k, v in meta.items()} or None)


def _graph_rag_json(question: str, res: GraphRagResponse) -> dict[str, Any]:
    return {
        "question": question,
        "answer": res.response,
        "entities": [e.model_dump() for e in res.entities],
        "triples": [t.model_dump() for t in res.triples],
        "sources": res.sources,
        "stats": res.stats.model_dump() if res.stats else None,
        "model": res.model,
        "in_token": res.in_token,
        "out_token": res.out_token,
        "warnings": [w.model_dump() for w in res.warnings],
    }


def _graph_rag_text(res: GraphRagResponse) -> None:
    print(res.response)
    if res.triples and res.model:  # a model answered: show the facts it had (else the answer lists them)
        print("\nretrieved facts:")
        for t in res.triples:
            print(f"  {t.s} | {t.p} | {t.o}")
    if res.stats:
        print(f"\n({plural(len(res.triples), 'triple')}, {_store_cost(res.stats)}, {res.stats.elapsed_ms:.0f} ms)")


def _store_cost(stats: RequestCost) -> str:
    """What a request cost the stores, for a person."""
    return f"{stats.store_requests} store requests in {stats.store_round_trips} round trips"


def _source(d: DocumentRef, chunks: list[Chunk]) -> str:
    """A source document as a reader cites it: title (id, the pages of its retrieved chunks, the
    page of the best chunk first)."""
    pages = list(dict.fromkeys(c.page for c in chunks if c.document_id == d.id and c.page))
    where = f", p. {', '.join(str(p) for p in pages[:6])}" if pages else ""
    return f"{d.title or d.id} ({d.id}{where})"


def _cited(c: Citation) -> str:
    where = f", p. {c.page}" if c.page else (f", {c.section}" if c.section else "")
    return f"{c.document_name} ({c.chunk_id}{where})"


def _document_json(question: str, res: Response) -> dict[str, Any]:
    """A document service's response as the CLI's JSON (`answer` is its `response`)."""
    out = res.model_dump(mode="json", exclude={"schema_version", "error", "end_of_stream", "message_type", "progress"})
    return {"question": question, "answer": out.pop("response"), **out}


def _lazy_rag_text(res: LazyRagResponse) -> None:
    print(res.response)
    if res.missing_info:
        print("\nmissing: " + "; ".join(res.missing_info))
    if res.documents:
        print("\nsources: " + "; ".join(_source(d, res.chunks) for d in res.documents[:5]))
    if res.stats:
        print(
            f"\n(confidence {res.confidence:.2f}; {plural(len(res.chunks), 'chunk')}, "
            f"{plural(len(res.entities), 'entity')}; "
            f"{_store_cost(res.stats)}, {plural(res.stats.llm_calls, 'model call')}, "
            f"{res.stats.elapsed_ms:.0f} ms)"
        )


def _kg_query_text(res: KgQueryResponse) -> None:
    print(res.response)  # never the context: it is the model's prompt, not something a reader reads
    if res.references:
        print("\nreferences: " + "; ".join(_source(d, res.chunks) for d in res.references[:8]))
    if res.stats and res.tokens:
        print(
            f"\n(mode {res.mode}; {plural(len(res.entities), 'entity')}, "
            f"{plural(len(res.relationships), 'relationship')}, {plural(len(res.chunks), 'chunk')}; "
            f"{res.tokens.total}/{res.tokens.max_total_tokens} tokens; "
            f"{_store_cost(res.stats)}, {res.stats.elapsed_ms:.0f} ms)"
        )


def _drift_text(res: DriftResponse) -> None:
    print(res.response)
    for f in res.key_facts:
        refs = ", ".join(_cited(c) if isinstance(c, Citation) else c for c in f.citations)
        print(f"- {f.fact}" + (f"  [{refs}]" if refs else ""))
    if res.residual_uncertainty:
        print("\nuncertain: " + res.residual_uncertainty)
    if res.documents:
        print("\nsources: " + "; ".join(_source(d, res.chunks) for d in res.documents[:5]))
    if res.stats:
        st = res.stats
        print(
            f"\n({plural(len(res.followups), 'follow-up')}, {plural(len(res.chunks), 'chunk')}; "
            f"{st.llm_calls}/{st.max_llm_calls} model calls, {st.citations_returned} citations kept, "
            f"{st.citations_dropped} dropped; "
            f"{_store_cost(st)}, {st.elapsed_ms:.0f} ms)"
        )


def _drift_progress(p: DriftProgress) -> None:
    print(f"[{p.progress_pct:3d}%] {p.phase}: {p.thought_summary}", file=sys.stderr, flush=True)


def _asked(a: argparse.Namespace, q: str) -> dict[str, Any]:
    """The fields every query request takes from the command line."""
    return {"query": q, "user": a.user, "collection": a.collection, "no_llm": a.no_llm, "scope": parse_scope(a)}


KINDS: dict[str, QueryKind] = {
    GRAPH_RAG.name: QueryKind(
        GRAPH_RAG, lambda a, q, p: GraphRagRequest(**_asked(a, q), **p), _graph_rag_json, _graph_rag_text
    ),
    LAZY_RAG.name: QueryKind(
        LAZY_RAG,
        lambda a, q, p: LazyRagRequest(**_asked(a, q), operation=a.operation, **p),
        _document_json,
        _lazy_rag_text,
    ),
    KG_QUERY.name: QueryKind(
        KG_QUERY,
        lambda a, q, p: KgQueryRequest(**_asked(a, q), **({"mode": a.mode} if a.mode else {}), **p),
        _document_json,
        _kg_query_text,
    ),
    DRIFT.name: QueryKind(
        DRIFT, lambda a, q, p: DriftRequest(**_asked(a, q), **p), _document_json, _drift_text, _drift_progress
    ),
}


REMOTE_IN_FLIGHT = 4  # --batch questions in flight when the services run in other processes


def batch_parallel(a: argparse.Namespace) -> int:
    """Questions in flight with --batch: as asked, else REMOTE_IN_FLIGHT through a gateway or
    Pulsar (the services answer in other processes, so questions overlap) and one in this process,
    where every stage shares one event loop and the machine's cores: four in flight answered
    HotpotQA's questions in about the same total time (81 s against 76 s; 96 s against 111 s) and
    each one 3-4x slower (bench/README.md)."""
    if a.parallel is not None:
        return int(a.parallel)
    remote = bool(a.url) or runtime_settings(a).bus == "pulsar"
    return REMOTE_IN_FLIGHT if remote else 1


async def run_query(a: argparse.Namespace) -> int:
    """Answer one question, or every line of --batch (JSON lines, in input order). Exit 1 when the
    collection is empty or unknown (a misspelling, another --home), once warned on stderr."""
    if bool(a.question) == bool(a.batch):
        raise ValueError("give a QUESTION or --batch FILE (not both)")
    kind = KINDS[a.what]
    params = parse_params(kind.service, a.param)

    def request(q: str) -> BaseModel:
        try:
            return kind.request(a, q, params)
        except ValidationError as e:
            raise ValueError(f"invalid request: {describe_errors(e)}") from None

    if not a.url:
        require_data(a)
    async with client(a) as kg:
        a.user = kg.user  # the token's workspace when --user was not given
        if a.question:
            res: Response = await kg.ask(kind.service, request(a.question), kind.progress)
            if a.json:
                print(json.dumps(kind.to_json(a.question, res), ensure_ascii=False))
            else:
                kind.show(res)
            warnings = getattr(res, "warnings", [])
            for w in warnings:
                print(f"kgflow: warning: {w.message}", file=sys.stderr)
            return 1 if any(w.type == "unknown-collection" for w in warnings) else 0
        questions = [ln.split("\t", 1)[0].strip() for ln in a.batch.read_text(encoding="utf-8").splitlines()]
        questions = [q for q in questions if q]
        slots = asyncio.Semaphore(max(1, batch_parallel(a)))
        unknown: list[str] = []

        async def one(q: str) -> dict[str, Any]:
            async with slots:
                try:
                    res = await kg.ask(kind.service, request(q))
                except (RemoteError, RequestTimeout, ValueError) as e:
                    return {"question": q, "error": {"type": getattr(e, "type", type(e).__name__), "message": str(e)}}
                unknown.extend(w.message for w in getattr(res, "warnings", []) if w.type == "unknown-collection")
                return kind.to_json(q, res)

        tasks = [asyncio.create_task(one(q)) for q in questions]
        for t in tasks:  # in input order, each as soon as it and those before it are done
            print(json.dumps(await t, ensure_ascii=False), flush=True)
        print(f"answered {len(questions)} questions", file=sys.stderr)
    if unknown:
        print(f"kgflow: warning: {unknown[0]}", file=sys.stderr)
        return 1
    return 0
