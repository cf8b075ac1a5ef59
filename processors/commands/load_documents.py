"""`kgflow load documents PATH...`: documents through the documents flow (in-process by default,
over Pulsar with --pulsar), with a progress bar over documents and chunks."""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass, field

from tqdm import tqdm

from processors.base.bus import Bus
from processors.base.client import RemoteError, RequestResponseClient, RequestTimeout
from processors.commands.connect import flow_bus, service_client
from processors.ingest.documents.files import Unreadable, read_documents
from schemas.communities import BuildCommunities, CommunitiesResponse, ListCommunities
from schemas.documents import Document, LoadDocuments, LoadResponse
from schemas.services import COMMUNITIES, COMMUNITY_BUILD, DOCUMENT_LOAD

BATCH_DOCUMENTS = 64
BATCH_CHARS = 200_000  # a batch closes at this much text (long documents make many chunks)
IN_FLIGHT = 2  # batches loading at once: one embeds while the other is parsed
LOAD_TIMEOUT_S = 3600.0


@dataclass
class Totals:
    """What the whole load did."""

    loaded: int = 0
    unchanged: int = 0
    chunks: int = 0
    relations: int = 0  # typed relations (extractor `llm`)
    llm_calls: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def batches(docs: list[Document], per_batch: int = BATCH_DOCUMENTS) -> list[list[Document]]:
    """Documents in request-sized batches (at most `per_batch` documents and about BATCH_CHARS of text)."""
    out: list[list[Document]] = [[]]
    size = 0
    for d in docs:
        if out[-1] and (len(out[-1]) >= per_batch or size + len(d.text) > BATCH_CHARS):
            out.append([])
            size = 0
        out[-1].append(d)
        size += len(d.text)
    return [b for b in out if b]


async def _load_batch(
    client: RequestResponseClient[LoadResponse], req: LoadDocuments, docs_bar: tqdm, chunks_bar: tqdm, totals: Totals
) -> None:
    try:
        async for res in client.stream(req, LOAD_TIMEOUT_S):
            if res.stage == "unchanged":
                docs_bar.update(res.done)
            elif res.stage == "embedded":
                chunks_bar.total = (chunks_bar.total or 0) + res.done
                chunks_bar.refresh()
            elif res.stage == "extracted":
                chunks_bar.update(res.done)
            elif res.end_of_stream:
                docs_bar.update(res.loaded + len(res.failed))
                totals.loaded += res.loaded
                totals.unchanged += res.unchanged
                totals.chunks += res.chunks
                totals.relations += res.relations
                totals.llm_calls += res.llm_calls
                totals.warnings += res.warnings
                totals.failed.update({f.id: f.error for f in res.failed})
    except (RemoteError, RequestTimeout) as e:
        if len(req.documents) == 1:
            totals.failed[req.documents[0].id] = str(e)
            docs_bar.update(1)
            return
        for d in req.documents:  # find the document the batch failed on; the others still load
            one = req.model_copy(update={"documents": [d]})
            await _load_batch(client, one, docs_bar, chunks_bar, totals)


async def load_documents(a: argparse.Namespace) -> int:
    """Load the documents of every PATH into user/collection."""
    if a.batch_size < 1 or a.in_flight < 1:
        raise ValueError("--batch-size and --in-flight must be at least 1")
    read = list(read_documents(a.paths, a.format))
    docs = [d for d in read if isinstance(d, Document)]
    for bad in (d for d in read if isinstance(d, Unreadable)):
        print(f"kgflow: skipped {bad.where}: {bad.error}", file=sys.stderr)
    totals = Totals()
    communities, rebuilt = CommunitiesResponse(), False
    docs_bar = tqdm(total=len(docs), unit="doc", desc="documents", disable=a.no_progress, file=sys.stderr)
    chunks_bar = tqdm(total=0, unit="chunk", desc="chunks   ", disable=a.no_progress, file=sys.stderr, position=1)
    try:
        async with flow_bus(a) as bus, service_client(bus, DOCUMENT_LOAD, a.flow, LOAD_TIMEOUT_S) as client:
            slots = asyncio.Semaphore(a.in_flight)

            async def one(batch: list[Document]) -> None:
                async with slots:
                    req = LoadDocuments(user=a.user, collection=a.collection, documents=batch)
                    await _load_batch(client, req, docs_bar, chunks_bar, totals)

            await asyncio.gather(*(one(b) for b in batches(docs, a.batch_size)))
            rebuilt = bool(totals.loaded or totals.failed) or await communities_outdated(bus, a)
            if rebuilt:  # also after an interrupted load whose rerun found every document stored
                communities = await build_communities(bus, a)
    finally:
        chunks_bar.close()
        docs_bar.close()
    for doc_id, why in totals.failed.items():
        print(f"kgflow: document {doc_id!r} failed: {why}", file=sys.stderr)
    for warning in totals.warnings:
        print(f"kgflow: {warning}", file=sys.stderr)
    if totals.llm_calls:  # extractor `llm` only: the default load makes no model call and says nothing here
        print(f"{totals.llm_calls} model calls, {totals.relations} typed relations", file=sys.stderr)
    print(
        f"loaded {totals.loaded} documents ({totals.chunks} chunks; {totals.unchanged} unchanged, "
        f"{len(totals.failed)} failed, {len(read) - len(docs)} unreadable) into {a.user}/{a.collection}",
        file=sys.stderr,
    )
    if rebuilt:
        per_level = ", ".join(f"level {lv}: {n}" for lv, n in sorted(communities.levels.items())) or "none"
        print(f"communities rebuilt in {communities.build_ms / 1000:.1f} s ({per_level})", file=sys.stderr)
    return 1 if totals.failed or len(read) != len(docs) else 0


async def communities_outdated(bus: Bus, a: argparse.Namespace) -> bool:
    """Whether the collection has no communities or stale ones (a load stopped before rebuilding)."""
    async with service_client(bus, COMMUNITIES, a.flow, LOAD_TIMEOUT_S) as client:
        req = ListCommunities(user=a.user, collection=a.collection, limit=100_000)
        found = (await client.request(req)).communities
    return not found or any(c.stale for c in found)


async def build_communities(bus: Bus, a: argparse.Namespace) -> CommunitiesResponse:
    """Rebuild the collection's communities (after a load changed its documents)."""
    async with service_client(bus, COMMUNITY_BUILD, a.flow, LOAD_TIMEOUT_S) as client:
        return await client.request(BuildCommunities(user=a.user, collection=a.collection))
