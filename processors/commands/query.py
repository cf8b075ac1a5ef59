"""`kgflow query graph-rag`: in-process by default, over Pulsar with --pulsar, via a gateway with --url."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from processors.base.bus import Bus
from processors.base.client import RemoteError, RequestResponseClient, RequestTimeout
from processors.base.settings import describe_errors
from processors.commands.options import runtime_settings, store_settings
from schemas.graph_rag import GraphRagRequest, GraphRagResponse
from schemas.services import GRAPH_RAG

Ask = Callable[[GraphRagRequest], Awaitable[GraphRagResponse]]
PARAMS = GRAPH_RAG.param_names()


def parse_params(pairs: list[str]) -> dict[str, Any]:
    """`NAME=VALUE` pairs (gateway names) as request fields."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or name not in PARAMS:
            raise ValueError(f"bad --param {pair!r}; known names: {', '.join(PARAMS)}")
        out[name.replace("-", "_")] = value
    return out


def to_json(question: str, res: GraphRagResponse) -> dict[str, Any]:
    """The CLI's JSON object for one answered question."""
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


@contextlib.asynccontextmanager
async def _asker(a: argparse.Namespace) -> AsyncIterator[Ask]:
    if a.url:
        from processors.gateway.client import GatewayClient  # type: ignore[import-not-found]

        async with GatewayClient(a.url, a.token or os.environ.get("KGFLOW_GATEWAY_TOKEN")) as gw:
            yield lambda req: gw.graph_rag(a.flow, req)
        return
    rt = runtime_settings(a)

    @contextlib.asynccontextmanager
    async def over(bus: Bus) -> AsyncIterator[Ask]:
        client = RequestResponseClient.for_service(bus, GRAPH_RAG, a.flow, rt.request_timeout_s)
        try:
            yield client.request
        finally:
            await client.stop()

    if rt.bus == "pulsar":
        from processors.base.runtime import make_bus

        bus = make_bus(rt)
        try:
            async with over(bus) as ask:
                yield ask
        finally:
            await bus.close()
        return
    from processors.base.runtime import embedded

    stores = store_settings(a)
    if stores.triples_backend == "sqlite" and not (stores.home / "graph.db").exists():
        raise ValueError(
            f"no kgflow data in {stores.home.resolve()} (set --home or KGFLOW_HOME, or load first: "
            "kgflow load triples FILE --collection C)"
        )
    async with embedded(stores, rt) as system, over(system.bus) as ask:
        yield ask


def _print_text(res: GraphRagResponse) -> None:
    print(res.response)
    if res.triples and res.model:  # a model answered: show the facts it had (else the answer lists them)
        print("\nretrieved facts:")
        for t in res.triples:
            print(f"  {t.s} | {t.p} | {t.o}")
    if res.stats:
        print(
            f"\n({len(res.triples)} triples, {res.stats.store_round_trips} store round trips, "
            f"{res.stats.elapsed_ms:.0f} ms)"
        )


async def graph_rag(a: argparse.Namespace) -> int:
    """Answer one question, or every line of --batch (JSON lines, in input order)."""
    if bool(a.question) == bool(a.batch):
        raise ValueError("give a QUESTION or --batch FILE (not both)")
    params = parse_params(a.param)

    def request(q: str) -> GraphRagRequest:
        try:
            return GraphRagRequest(query=q, user=a.user, collection=a.collection, no_llm=a.no_llm, **params)
        except ValidationError as e:
            raise ValueError(f"invalid --param {describe_errors(e)}") from None

    async with _asker(a) as ask:
        if a.question:
            res = await ask(request(a.question))
            if a.json:
                print(json.dumps(to_json(a.question, res), ensure_ascii=False))
            else:
                _print_text(res)
            for w in res.warnings:
                print(f"kgflow: warning: {w.message}", file=sys.stderr)
            return 1 if any(w.type == "unknown-collection" for w in res.warnings) else 0
        questions = [ln.split("\t", 1)[0].strip() for ln in a.batch.read_text(encoding="utf-8").splitlines()]
        questions = [q for q in questions if q]
        slots = asyncio.Semaphore(max(1, a.parallel))

        async def one(q: str) -> dict[str, Any]:
            async with slots:
                try:
                    return to_json(q, await ask(request(q)))
                except (RemoteError, RequestTimeout, ValueError) as e:
                    return {"question": q, "error": {"type": getattr(e, "type", type(e).__name__), "message": str(e)}}

        tasks = [asyncio.create_task(one(q)) for q in questions]
        for t in tasks:  # in input order, each as soon as it and those before it are done
            print(json.dumps(await t, ensure_ascii=False), flush=True)
        print(f"answered {len(questions)} questions", file=sys.stderr)
    return 0
