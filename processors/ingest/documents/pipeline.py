"""Indexing documents with no model call: chunk, embed the chunks, extract concepts, link
(with extractor `llm`, also one model call per chunk for typed relations: `llm_relations`).

`load_batch` runs a batch of documents through the pipeline over `IngestSources` (the bus in
the service, fakes in tests): unchanged documents (same content hash) are skipped, a document
that fails is reported by id while the others go on. Pure helpers build what is stored: chunk
ids, the concepts each document mentions (its title included: a document's title names its
subject, which links it to every other document that names it) and sentence co-occurrences.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Protocol

from processors.base.offload import Offload
from processors.ingest.documents.chunker import ChunkingParams, chunk_spans
from processors.ingest.documents.llm_relations import extract_relations
from processors.ingest.documents.params import DocumentLoadParams
from processors.ingest.documents.subjects import Names, one_node_per_entity, subject_key
from processors.ingest.extractor.relations import FoundRelation
from processors.models.embeddings.model import plain_tokenizer
from processors.models.text_completion.prompting import ModelAnswer
from schemas.documents import (
    MAX_CONCEPT_CHARS,
    Chunk,
    ConceptRef,
    CoOccurrence,
    Document,
    IndexedDocument,
    KeyedMention,
    KeyedRelation,
)
from schemas.extraction import ConceptMention

MAX_PAIRS_PER_SENTENCE = 8  # concepts of a sentence that pair up (the first ones): 28 pairs at most
EMBED_BATCH = 256
EXTRACT_BATCH = 32  # ~30,000 characters of spaCy a request: well inside its 60 s timeout on a busy machine
log = logging.getLogger(__name__)
IN_THREAD = Offload(0)  # CPU work in a thread of this process (tests; a caller with no worker processes)


class CollectionDeleted(Exception):
    """The collection was deleted after this load began: the store refused the write (the load stops)."""


class IngestSources(Protocol):
    """What indexing needs from the rest of the system."""

    async def hashes(self, ids: list[str]) -> dict[str, str]:
        """Content hashes of the stored documents among `ids`."""
        ...

    async def begin(self) -> None:
        """Mark the collection incomplete: documents are about to be indexed and stored; raises
        `CollectionDeleted` when the collection was deleted after the load began."""
        ...

    async def finish(self) -> None:
        """Clear the mark `begin` set, when nothing was stored (a store clears it itself)."""
        ...

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text."""
        ...

    async def extract(self, texts: list[str]) -> list[list[ConceptMention]]:
        """The concepts of each text."""
        ...

    async def store(self, documents: list[IndexedDocument]) -> list[str]:
        """Write indexed documents (replacing earlier versions); the ids not written because they
        were deleted after this load began (`CollectionDeleted`: the whole collection was)."""
        ...

    async def complete(self, system: str, prompt: str, json_schema: dict[str, Any], max_tokens: int) -> ModelAnswer:
        """One text-completion call (extractor `llm` only); raises `ModelCallFailed` or
        `ExtractorNeedsModel` (see `llm_relations`)."""
        ...


@dataclass
class LoadReport:
    """What a batch did."""

    loaded: int = 0
    unchanged: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # document id -> why
    chunks: int = 0
    mentions: int = 0
    cooccurrences: int = 0
    relations: int = 0  # typed relations (extractor `llm`)
    llm_calls: int = 0
    warnings: list[str] = field(default_factory=list)


def content_hash(doc: Document) -> str:
    """Hash of everything stored about a document (a reload with the same hash does nothing)."""
    fields: list[Any] = [doc.title, doc.text, doc.timestamp.isoformat() if doc.timestamp else None, doc.metadata]
    if doc.sections:  # (documents without sections keep the hashes they had)
        fields.append([s.model_dump() for s in doc.sections])
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:32]


def chunk_document(doc: Document, tokenizer: Any, params: ChunkingParams) -> list[Chunk]:
    """The document's chunks, with ids derived from the document, position and text, and the
    page and heading of the file where each starts."""
    offsets = tokenizer.encode(doc.text, add_special_tokens=False).offsets
    starts = [s.start for s in doc.sections]
    out = []
    pages = [s.start for s, prev in zip(doc.sections, [None, *doc.sections], strict=False)
             if prev is None or s.page != prev.page]  # fmt: skip
    spans = chunk_spans(doc.text, offsets, params.chunk_tokens, params.chunk_overlap, pages, starts)
    for n, span in enumerate(spans):
        text = doc.text[span.start : span.end]
        digest = hashlib.sha256(f"{doc.id}\0{n}\0{text}".encode()).hexdigest()[:16]
        at = bisect.bisect_right(starts, span.start) - 1
        where = doc.sections[at] if at >= 0 else None
        out.append(Chunk(id=f"c{digest}", document_id=doc.id, ordinal=n, text=text, start=span.start, end=span.end,
                         tokens=span.tokens, title=doc.title, page=where.page if where else None,
                         section=where.heading if where else ""))  # fmt: skip
    return out


def embedded_text(chunk: Chunk) -> str:
    """What a chunk's vector is computed from: its document's title, then its text (a passage
    often names its subject only in the title)."""
    return f"{chunk.title}\n{chunk.text}" if chunk.title else chunk.text


def index_document(
    doc: Document,
    chunks: list[Chunk],
    vectors: list[list[float]],
    mentions: list[list[ConceptMention]],
    relations: Sequence[list[FoundRelation]] | None = None,
) -> IndexedDocument:
    """Concepts (one per entity, with its other names), mentions and sentence co-occurrences of
    one document (mentions per chunk), its subject — a concept of every chunk — and the typed
    relations each chunk states, if an extractor found some. A concept is labelled with a
    spelling of its own key where the text has one: labelled by another of its names ("Falls",
    written more often than "Devon Falls"), it would be found by that name (`named`), and which
    concept a later document's "Falls" links to would depend on the order documents arrive in."""
    # A "name" over MAX_CONCEPT_CHARS is a run of text (an over-long title or word, which the
    # extractor also reads), not a concept: dropped, so the document loads instead of failing.
    mentions = [[m for m in found if len(m.key) <= MAX_CONCEPT_CHARS] for found in mentions]
    names = one_node_per_entity(mentions)
    subject = subject_key(doc.title, doc.text, mentions, names)
    labels: dict[str, Counter[str]] = {}  # each concept's spellings, its other names' too
    own: dict[str, Counter[str]] = {}  # each key's own spellings
    keyed: list[KeyedMention] = []
    pairs: dict[tuple[str, str], list[str]] = {}
    for chunk, found in zip(chunks, mentions, strict=True):
        counts = Counter(names.of(m.key) for m in found)
        for m in found:
            labels.setdefault(names.of(m.key), Counter())[m.label] += 1
            own.setdefault(m.key, Counter())[m.label] += 1
        if subject:
            if subject not in labels and doc.title:  # a subject named by the title only
                labels.setdefault(subject, Counter())[doc.title] += 1
            counts[subject] += 1
        keyed += [KeyedMention(chunk_id=chunk.id, key=k, count=n) for k, n in counts.items()]
        for sentence in _sentences(found, subject, names):
            for a, b in combinations(sorted(sentence), 2):
                pairs.setdefault((a, b), []).append(chunk.id)
    concepts = [
        ConceptRef(key=k, label=(own.get(k) or c).most_common(1)[0][0][:MAX_CONCEPT_CHARS],
                   aliases=[a for a in sorted(names.aliases.get(k, ())) if len(a) <= MAX_CONCEPT_CHARS][:32])
        for k, c in labels.items()
    ]  # fmt: skip
    cooc = [CoOccurrence(a=a, b=b, chunk_ids=list(dict.fromkeys(ids))) for (a, b), ids in pairs.items()]
    typed: dict[FoundRelation, list[str]] = {}
    for chunk, found_relations in zip(chunks, relations or [], strict=False):
        for r in found_relations:
            if max(len(r.s), len(r.o)) > MAX_CONCEPT_CHARS:
                continue
            typed.setdefault(FoundRelation(names.of(r.s), r.p, names.of(r.o)), []).append(chunk.id)
    rels = [KeyedRelation(s=r.s, p=r.p, o=r.o, chunk_ids=ids) for r, ids in typed.items()]
    return IndexedDocument(document=doc, content_hash=content_hash(doc), chunks=chunks, vectors=vectors,
                           concepts=concepts, mentions=keyed, cooccurrences=cooc, relations=rels,
                           subject_key=subject if subject in labels else "")  # fmt: skip


def _sentences(found: Sequence[ConceptMention], subject: str, names: Names) -> list[set[str]]:
    """The concepts of each sentence (the first `MAX_PAIRS_PER_SENTENCE`). The document's subject
    joins the first sentence, where a document usually says what it is about, and every sentence
    whose own subject is no concept ("She was born in Warsaw": a pronoun, most often the subject)."""
    by_sentence: dict[int, list[str]] = {}
    has_subject: set[int] = set()
    for m in found:
        if m.sentence < 0:  # an end only a model's relation found: the relation links it already
            continue
        keys = by_sentence.setdefault(m.sentence, [])
        key = names.of(m.key)
        if key not in keys and len(keys) < MAX_PAIRS_PER_SENTENCE:
            keys.append(key)
        if m.subject:
            has_subject.add(m.sentence)
    out = []
    for n, (sentence, keys) in enumerate(sorted(by_sentence.items())):
        joined = set(keys)
        if subject and (n == 0 or sentence not in has_subject):
            joined.add(subject)
        out.append(joined)
    return out


@functools.cache
def local_tokenizer() -> Any:
    """The local embedding model's tokenizer, loaded once per process (an indexing worker loads its
    own instead of receiving a pickled copy with every batch)."""
    return plain_tokenizer()


def chunk_all(
    docs: Sequence[Document], tokenizer: Any | None, params: ChunkingParams
) -> tuple[list[tuple[Document, list[Chunk]]], dict[str, str]]:
    """Each document with its chunks, and why each that could not be chunked failed (the others go
    on); `tokenizer` None: the local model's."""
    chunked: list[tuple[Document, list[Chunk]]] = []
    failed: dict[str, str] = {}
    tokenizer = tokenizer or local_tokenizer()
    for d in docs:
        try:
            chunked.append((d, chunk_document(d, tokenizer, params)))
        except Exception as e:  # one bad document must not stop the others
            failed[d.id] = f"chunking failed: {e}"
    return chunked, failed


async def _batched(fn: Callable[[list[str]], Any], texts: list[str], size: int) -> list[Any]:
    out: list[Any] = []
    for i in range(0, len(texts), size):
        out += await fn(texts[i : i + size])
    return out


async def _by_length(embed: Callable[[list[str]], Any], chunks: list[Chunk]) -> list[list[float]]:
    """The vectors of `chunks` in order, requested shortest first: each request then holds texts of
    about one length, which the model embeds in fewer, fuller calls with less padding (HotpotQA:
    380 calls instead of 585, 2% fewer padded tokens)."""
    order = sorted(range(len(chunks)), key=lambda i: chunks[i].tokens + len(chunks[i].title) // 4)  # ~4 chars a token
    found = await _batched(embed, [embedded_text(chunks[i]) for i in order], EMBED_BATCH)
    vectors: list[list[float]] = [[] for _ in chunks]
    for i, v in zip(order, found, strict=True):
        vectors[i] = v
    return vectors


async def load_batch(
    sources: IngestSources,
    docs: Sequence[Document],
    tokenizer: Any | None,
    params: ChunkingParams,
    progress: Callable[[str, int], None] = lambda stage, n: None,
    offload: Offload = IN_THREAD,
) -> LoadReport:
    """Index and store `docs` (see the module docstring) chunked by `tokenizer` (None: the local
    model's); `progress(stage, n)` counts work done; `offload` runs the CPU work (chunking, indexing)."""
    report = LoadReport()
    stored = await sources.hashes([d.id for d in docs])
    todo = [d for d in docs if stored.get(d.id) != content_hash(d)]
    report.unchanged = len(docs) - len(todo)
    progress("unchanged", report.unchanged)
    # marked before the work, so a load killed anywhere in it leaves the mark; also when every
    # document is unchanged, to clear a mark a killed write left after its last document was stored
    await sources.begin()
    # tokenizing (and indexing, below) a batch is CPU work that holds the GIL: not in the interpreter
    # the processor's other requests share (a 50,000-character document held it 0.2-0.3 s at a time)
    clock = StageClock()
    with clock("chunk"):
        chunked, report.failed = await offload.run("chunking documents", chunk_all, todo, tokenizer, params)
    texts = [c.text for _, cs in chunked for c in cs]

    async def embed() -> list[list[float]]:
        with clock("embed"):
            found = await _by_length(sources.embed, [c for _, cs in chunked for c in cs])
        progress("embedded", len(texts))
        return found

    async def extract() -> list[list[ConceptMention]]:
        with clock("extract"):
            found = await _batched(sources.extract, texts, EXTRACT_BATCH)
        progress("extracted", len(texts))
        return found

    # The embedding model and spaCy each keep a core busy: run them side by side.
    vectors, mentions = await asyncio.gather(embed(), extract())
    relations: list[list[FoundRelation]] | None = None
    if isinstance(params, DocumentLoadParams) and params.extractor == "llm" and texts:
        every = [c for _, cs in chunked for c in cs]
        outcome = await extract_relations(sources.complete, every, mentions, params.extractor_concurrency, progress)
        relations, mentions = outcome.relations, outcome.mentions
        report.llm_calls = outcome.calls
        report.warnings += outcome.warnings()
    with clock("index"):
        indexed = await offload.run("indexing documents", index_all, chunked, vectors, mentions, relations)
    with clock("store"):
        await _store(sources, indexed, report)
    if not todo:  # nothing to store: no store request clears the mark
        await sources.finish()
    report.loaded = len(indexed) - sum(1 for x in indexed if x.document.id in report.failed)
    report.chunks = sum(len(x.chunks) for x in indexed if x.document.id not in report.failed)
    report.mentions = sum(len(x.mentions) for x in indexed if x.document.id not in report.failed)
    report.cooccurrences = sum(len(x.cooccurrences) for x in indexed if x.document.id not in report.failed)
    report.relations = sum(len(x.relations) for x in indexed if x.document.id not in report.failed)
    progress("stored", report.loaded)
    tokens = sum(c.tokens for _, cs in chunked for c in cs)
    log.info("indexed a batch", extra={"documents": len(todo), "chunks": len(texts), "tokens": tokens, **clock.seconds})
    return report


class StageClock:
    """Wall seconds of each stage of a batch (`<stage>_s`), logged at INFO with the batch: where a
    load's time goes (bench/documents/load_rate.py sums them). Stages overlap (embed, extract)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            key = f"{stage}_s"
            self.seconds[key] = round(self.seconds.get(key, 0.0) + time.perf_counter() - started, 3)


def index_all(
    chunked: Sequence[tuple[Document, list[Chunk]]],
    vectors: list[list[float]],
    mentions: list[list[ConceptMention]],
    relations: list[list[FoundRelation]] | None,
) -> list[IndexedDocument]:
    """`index_document` of each document, its share of the batch's vectors, mentions and relations."""
    indexed, at = [], 0
    for d, cs in chunked:
        span = slice(at, at + len(cs))
        indexed.append(index_document(d, cs, vectors[span], mentions[span], relations[span] if relations else None))
        at += len(cs)
    return indexed


async def _store(sources: IngestSources, indexed: list[IndexedDocument], report: LoadReport) -> None:
    """Store the batch; if it is refused, store one by one so only the bad documents fail (a deleted
    collection refuses every one: it stops the load)."""
    if not indexed:
        return
    try:
        _withdrawn(await sources.store(indexed), report)
        return
    except CollectionDeleted:
        raise
    except Exception as e:
        if len(indexed) == 1:
            report.failed[indexed[0].document.id] = str(e)
            return
    for doc in indexed:
        try:
            _withdrawn(await sources.store([doc]), report)
        except CollectionDeleted:
            raise
        except Exception as e:
            report.failed[doc.document.id] = str(e)


def _withdrawn(ids: list[str], report: LoadReport) -> None:
    """Documents deleted while their load ran are reported by name, not silently dropped."""
    for i in ids:
        report.failed[i] = "deleted after this load began: not stored"
