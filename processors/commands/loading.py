"""Loading documents through a flow's `document-load` service, for the API and the CLI: files are
read (and PDFs, office files and web pages converted) off the event loop, sent in request-sized
batches (two in flight), a batch the service refuses is retried document by document so only the
bad ones fail, and the collection's communities are rebuilt when the load changed it. Everything
skipped is reported by name: unreadable files and lines, duplicate ids, failed documents. Every
batch carries the collection's write stamp read when the load began: if the collection is deleted
during the load, the store refuses the rest and the load stops, saying so."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from pydantic import BaseModel

from processors.base.client import RemoteError, RequestTimeout
from processors.ingest.documents.files import DocumentFormat, Unreadable, read_documents
from schemas.base import COLLECTION_DELETED, Response
from schemas.communities import BuildCommunities, CommunitiesResponse, ListCommunities
from schemas.documents import Document, DocumentStatus, LoadDocuments, LoadResponse
from schemas.services import COMMUNITIES, COMMUNITY_BUILD, DOCUMENT_LOAD, DOCUMENTS, Service

R = TypeVar("R", bound=Response)

BATCH_CHARS = 200_000  # a batch closes at this much text (long documents make many chunks)
LOAD_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class Batching:
    """How a load is cut into requests: at most `documents` per batch (and about BATCH_CHARS of
    text), `in_flight` batches being embedded and parsed at once — one embeds while another is
    parsed; over Pulsar, about 2 per document-load instance keeps every instance busy. A batch
    whose chunks are embedded and parsed gives its place to the next while it is stored (one batch
    more may be storing), so the model and the parser do not wait for the store."""

    documents: int = 64
    in_flight: int = 2

    def __post_init__(self) -> None:
        if self.documents < 1 or self.in_flight < 1:
            raise ValueError("a load's batch size and batches in flight must be at least 1")


DEFAULT_BATCHING = Batching()


# (stage, n): "documents" (n to load), "unchanged" and "loaded" (n documents done), "chunks"
# (n more chunks found), "extracted" (n chunks indexed)
LoadProgress = Callable[[str, int], None]


class Stream(Protocol):
    """The responses of a service to a request (progress, then the answer), each typed as the service's."""

    def __call__(self, service: Service[BaseModel, R], request: BaseModel, timeout_s: float) -> AsyncIterator[R]: ...


@dataclass
class DocumentsLoaded:
    """What a documents load did; `skipped` holds what was never sent (file or line -> why),
    `failed` the documents the flow could not load (id -> why)."""

    loaded: int = 0
    unchanged: int = 0
    chunks: int = 0
    relations: int = 0  # typed relations (extractor `llm`)
    llm_calls: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    communities: CommunitiesResponse | None = None  # the rebuild, when the load changed the collection
    # the collection was deleted during the load: what was loaded before went with it, and these
    # documents (the batches under way and every later one) were refused
    collection_deleted: bool = False
    refused: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Whether every document given was loaded (or was already stored unchanged)."""
        return not self.failed and not self.skipped and not self.collection_deleted


def batches(docs: Sequence[Document], per_batch: int = Batching.documents) -> list[list[Document]]:
    """Documents in request-sized batches."""
    out: list[list[Document]] = [[]]
    size = 0
    for d in docs:
        if out[-1] and (len(out[-1]) >= per_batch or size + len(d.text) > BATCH_CHARS):
            out.append([])
            size = 0
        out[-1].append(d)
        size += len(d.text)
    return [b for b in out if b]


def _read(sources: Sequence[Path | Document], fmt: DocumentFormat) -> tuple[list[Document], dict[str, str]]:
    """The documents of `sources` (paths are read; Documents kept) and what could not be read; a
    second document with an id already seen is skipped, naming both (only one could be stored)."""
    docs: list[Document] = []
    skipped: dict[str, str] = {}
    seen: dict[str, str] = {}
    paths = [s for s in sources if isinstance(s, Path)]
    found: list[Document | Unreadable] = [s for s in sources if isinstance(s, Document)]
    found += list(read_documents(paths, fmt)) if paths else []
    for item in found:
        if isinstance(item, Unreadable):
            skipped[item.where] = item.error
        elif item.id in seen:
            skipped[f"{item.id} ({item.title or 'untitled'})"] = f"duplicate id: {seen[item.id]} has it too"
        else:
            seen[item.id] = item.title or item.id
            docs.append(item)
    return docs, skipped


async def load_documents(
    stream: Stream,
    user: str,
    collection: str,
    sources: Sequence[Path | Document],
    fmt: DocumentFormat = "auto",
    progress: LoadProgress | None = None,
    batching: Batching = DEFAULT_BATCHING,
) -> DocumentsLoaded:
    """Load `sources` (paths, or Documents) into `user`/`collection` (see the module docstring)."""
    tell = progress or (lambda _stage, _n: None)
    docs, skipped = await asyncio.to_thread(_read, sources, fmt)  # parsing files is CPU work
    out = DocumentsLoaded(skipped=skipped)
    tell("documents", len(docs))
    working = asyncio.Semaphore(batching.in_flight)  # batches being embedded and parsed
    sent = asyncio.Semaphore(batching.in_flight + 1)  # ...and being stored
    stamp = await _write_stamp(stream, user, collection, docs)

    async def one(batch: list[Document]) -> None:
        async with sent:
            await working.acquire()
            place = _Place(working)
            try:
                if out.collection_deleted:  # refused by the store: not sent
                    _refused(batch, tell, out)
                    return
                req = LoadDocuments(user=user, collection=collection, documents=batch, stamp=stamp)
                await _load_batch(stream, req, tell, out, place)
            finally:
                place.give_up()

    await asyncio.gather(*(one(b) for b in batches(docs, batching.documents)))
    if out.collection_deleted:
        return out
    if out.loaded or out.failed or await _communities_outdated(stream, user, collection):
        out.communities = await _last(stream, COMMUNITY_BUILD, BuildCommunities(user=user, collection=collection))
    return out


async def _write_stamp(stream: Stream, user: str, collection: str, docs: list[Document]) -> float | None:
    """The collection's write stamp, read before the first batch is sent: a delete answered after
    it refuses every batch of the load."""
    if not docs:
        return None
    req = DocumentStatus(user=user, collection=collection, document_ids=[docs[0].id])
    return (await _last(stream, DOCUMENTS, req)).stamp


async def _last(stream: Stream, service: Service[BaseModel, R], request: BaseModel) -> R:
    last: R | None = None
    async for res in stream(service, request, LOAD_TIMEOUT_S):
        last = res
    if last is None:
        raise RemoteError("bad-response", f"{service.name} answered nothing")
    return last


class _Place:
    """A batch's place among those being embedded and parsed, given up once (when both are done)."""

    def __init__(self, places: asyncio.Semaphore) -> None:
        self.places, self.held, self.done = places, True, set[str]()

    def passed(self, stage: str | None) -> None:
        if stage in ("embedded", "extracted"):
            self.done.add(stage)
            if len(self.done) == 2:
                self.give_up()

    def give_up(self) -> None:
        if self.held:
            self.held = False
            self.places.release()


async def _load_batch(
    stream: Stream, req: LoadDocuments, tell: LoadProgress, out: DocumentsLoaded, place: _Place
) -> None:
    try:
        async for res in stream(DOCUMENT_LOAD, req, LOAD_TIMEOUT_S):
            place.passed(res.stage)
            _step(res, tell, out)
    except (RemoteError, RequestTimeout) as e:
        if isinstance(e, RemoteError) and e.type == COLLECTION_DELETED:
            out.collection_deleted = True
            _refused(req.documents, tell, out)
            return
        if len(req.documents) == 1:
            out.failed[req.documents[0].id] = str(e)
            tell("loaded", 1)
            return
        for d in req.documents:  # find the document the batch failed on; the others still load
            await _load_batch(stream, req.model_copy(update={"documents": [d]}), tell, out, place)


def _refused(batch: list[Document], tell: LoadProgress, out: DocumentsLoaded) -> None:
    out.refused += [d.id for d in batch]
    tell("loaded", len(batch))


def _step(res: LoadResponse, tell: LoadProgress, out: DocumentsLoaded) -> None:
    if res.stage == "unchanged":
        tell("unchanged", res.done)
    elif res.stage == "embedded":
        tell("chunks", res.done)
    elif res.stage == "extracted":
        tell("extracted", res.done)
    elif res.end_of_stream:
        tell("loaded", res.loaded + len(res.failed))
        out.loaded += res.loaded
        out.unchanged += res.unchanged
        out.chunks += res.chunks
        out.relations += res.relations
        out.llm_calls += res.llm_calls
        out.warnings += res.warnings
        out.failed.update({f.id: f.error for f in res.failed})


async def _communities_outdated(stream: Stream, user: str, collection: str) -> bool:
    """Whether the collection has no communities or stale ones (a load stopped before rebuilding)."""
    found = await _last(stream, COMMUNITIES, ListCommunities(user=user, collection=collection, limit=100_000))
    return not found.communities or any(c.stale for c in found.communities)
