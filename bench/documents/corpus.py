"""Synthetic document corpora of 10k to 1M chunks for the document scale benchmark, written
through the store API (bench/documents/scale.py measures them; bench/README.md says how they are
made).

A corpus is the public sets' documents (HotpotQA, MuSiQue: really indexed, bench/documents/sources.py),
written through the real document-store writer, among seeded distractors up to `chunks` chunks.
A distractor is one untitled one-chunk document recombined from real sentences: a run of 1-3
sentences of one real chunk then a run of 1-3 of another (of HotpotQA, MuSiQue or the MSFT
transcripts: a set drawn uniformly, then a chunk of it), at most `max_tokens` tokens, with those
sentences' concept mentions (so its co-occurrences are theirs and popular concepts become hubs),
and a vector near both sources: their real vectors mixed by sentence share, a random unit vector
times `noise` added, renormalised. The distractors are written as the writer writes (concepts
linked, new ones' label vectors upserted, label and relation triples added, records stored), in
batches, with what the writer would write twice left out (a relation's vector and triple after
its first time: the stores keep the first).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.documents import distractor_links
from bench.documents.batch_maker import BatchMaker, Terms
from bench.documents.distractor_links import index_distractors, link_distractors
from bench.documents.sources import Sentence, Sources
from bench.harness.results import ROOT
from processors.algorithms.iris import concept_iri
from processors.algorithms.text_match import normalize
from processors.ingest.document_store.linking import Linked
from processors.ingest.documents.pipeline import index_document
from processors.ingest.documents.subjects import first_and_last
from processors.models.embeddings.model import OnnxMiniLM
from processors.stores.factory import Stores
from schemas.documents import Chunk, Document, IndexedDocument
from schemas.extraction import ConceptMention
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Triple

USER = "bench-docscale"
SIZES = {"1k": 1_000, "10k": 10_000, "100k": 100_000, "1m": 1_000_000}


@dataclass(frozen=True)
class CorpusSpec:
    """Everything a corpus depends on (all of it goes into the cache key)."""

    chunks: int  # in the collection: the public sets' chunks + one per distractor
    seed: int = 30
    subset: int | None = None  # None: every real document; N (tests): see doc_sources._docs
    run_sentences: tuple[int, int] = (1, 3)  # sentences taken from each of a distractor's two sources
    max_tokens: int = 200  # the chunker's chunk size: a distractor is no longer than a real chunk
    noise: float = 0.5  # norm of the random unit vector added to the mixed source vector
    batch: int = 2000  # distractors per store write (a new concept is owned by its first batch)


def data_key(spec: CorpusSpec, sources: Sources) -> str:
    """What the corpus holds: the spec, the sources (their key covers the indexing code), the code
    that generates and writes it, and the writer's package (linking, the document-store writer)."""
    from bench.graph.graphs import _code_shape

    h = hashlib.sha256(json.dumps(dataclasses.asdict(spec), sort_keys=True).encode() + sources.key.encode())
    for obj in (distractors, _one, _within, Distractor, DirectWriter, write_public, Sentence, distractor_links):
        h.update(_code_shape(obj).encode())
    for f in sorted((ROOT / "processors" / "ingest" / "document_store").glob("*.py")):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


# --- distractors ----------------------------------------------------------------------------------
@dataclass
class Distractor:
    """One generated document: its single chunk, the real sentences it is made of, its vector."""

    document: Document
    chunk: Chunk
    sentences: list[Sentence]
    vector: list[float]

    def mentions(self) -> list[ConceptMention]:
        """What the extractor found in its sentences, numbered by their place in it."""
        return [m.model_copy(update={"sentence": i}) for i, s in enumerate(self.sentences) for m in s.mentions]

    def indexed(self) -> IndexedDocument:
        """As the indexing pipeline hands it to the writer (`index_document`)."""
        return index_document(self.document, [self.chunk], [self.vector], [self.mentions()])


def distractors(spec: CorpusSpec, sources: Sources, start: int, count: int) -> list[Distractor]:
    """Distractors `start` .. `start + count - 1` (the same every time: seeded by `start`)."""
    rng = np.random.default_rng([spec.seed, start])
    pools = [[i for i, s in enumerate(sources.bank_sets) if s == name and sources.bank[i]]
             for name in sorted(set(sources.bank_sets))]  # fmt: skip
    flat, sizes = np.array([i for p in pools for i in p]), np.array([len(p) for p in pools])
    which = rng.integers(len(pools), size=(2, count))  # a set each, uniformly, then a chunk of it
    picks = flat[(np.cumsum(sizes) - sizes)[which] + (rng.random((2, count)) * sizes[which]).astype(np.int64)]
    lo, hi = spec.run_sentences
    runs = rng.integers(lo, hi + 1, size=(2, count))
    offsets = rng.random(size=(2, count))
    chosen: list[list[Sentence]] = []
    shares = np.zeros((count, 2), dtype=np.float32)
    for n in range(count):
        parts = []
        for side in (0, 1):
            sents = sources.bank[int(picks[side][n])]
            k = min(int(runs[side, n]), len(sents))
            at = int(offsets[side, n] * (len(sents) - k + 1))
            parts.append(sents[at : at + k])
        kept = _within(parts[0], parts[1], spec.max_tokens)
        shares[n] = kept
        chosen.append(parts[0][: kept[0]] + parts[1][: kept[1]])
    mixed = shares[:, :1] * sources.bank_vectors[picks[0]] + shares[:, 1:] * sources.bank_vectors[picks[1]]
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    noise = rng.standard_normal(mixed.shape).astype(np.float32)
    noise *= spec.noise / np.linalg.norm(noise, axis=1, keepdims=True)
    vectors = mixed + noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [_one(start + n, sents, v) for n, (sents, v) in enumerate(zip(chosen, vectors.tolist(), strict=True))]


def _within(a: list[Sentence], b: list[Sentence], budget: int) -> tuple[int, int]:
    """How many of `a`'s and `b`'s sentences fit `budget` tokens (dropping from the end of `b`,
    then of `a`; at least one sentence)."""
    ka, kb = len(a), len(b)
    while ka + kb > 1 and sum(s.tokens for s in a[:ka] + b[:kb]) > budget:
        if kb > 0:
            kb -= 1
        else:
            ka -= 1
    return ka, kb


def _one(n: int, sentences: list[Sentence], vector: list[float]) -> Distractor:
    """Distractor `n`: an untitled one-chunk document of these sentences (built unvalidated: at
    1M, validating every model was a third of the build; the test checks what it makes)."""
    text = " ".join(s.text for s in sentences)
    doc = Document.model_construct(id=f"dx-{n:07d}", text=text)
    digest = hashlib.sha256(f"{doc.id}\0{0}\0{text}".encode()).hexdigest()[:16]
    chunk = Chunk.model_construct(id=f"c{digest}", document_id=doc.id, text=text, end=len(text),
                                  tokens=sum(s.tokens for s in sentences))  # fmt: skip
    return Distractor(doc, chunk, sentences, vector)


# --- writing --------------------------------------------------------------------------------------
async def write_public(system: Any, collection: str, docs: list[IndexedDocument], batch: int = 64) -> None:
    """The public sets' documents through the real document-store writer (a `store` request)."""
    from processors.base.client import RequestResponseClient
    from schemas.documents import StoreDocuments
    from schemas.services import DOCUMENT_STORE

    client = RequestResponseClient.for_service(system.bus, DOCUMENT_STORE, "default", 3600.0)
    try:
        for i in range(0, len(docs), batch):
            await client.request(StoreDocuments(user=USER, collection=collection, documents=docs[i : i + batch]))
    finally:
        await client.stop()


@dataclass
class Prepared:
    """A batch ready to write: its records and what the graph gains."""

    linked: Linked
    entities: list[tuple[str, str, list[float]]]  # new concepts: (IRI, label, label vector)
    triples: list[Triple]  # their label triples and the relations written for the first time
    claims: dict[str, str]  # new concepts: IRI -> key, claimed (owned by documents) before they are named


class DirectWriter:
    """Writes distractors as the document-store writer writes indexed documents (processors/
    ingest/document_store/service.py: link, upsert new concepts' label vectors, add label and
    relation triples, store the records), straight to the stores. It asks the entity index once
    for every concept the bank can mention, then links each batch from what it wrote before (in a
    worker thread, while the previous batch is written), and writes a relation's vector and triple
    only the first time (the stores keep the first of each anyway)."""

    def __init__(self, stores: Stores, collection: str, sources: Sources) -> None:
        self.stores, self.collection, self.sources = stores, collection, sources
        self.label_vectors = dict(sources.label_vectors)
        self.named: dict[str, str] = {}  # an entity's name (its normalised label) -> IRI, as `entities.named`
        self.labels: dict[str, str] = {}  # entity IRI -> its label (the first written: the triple keeps it)
        self.relations: set[tuple[str, str, str]] = set()
        self.seconds: Counter[str] = Counter()  # time per part of the write path

    async def start(self) -> None:
        """Resolve the bank's concepts against the collection (the public documents linked some)."""
        t, user, coll = time.perf_counter(), USER, self.collection
        mentions = [m for c in self.sources.bank for s in c for m in s.mentions]
        keys = sorted({k for m in mentions for k in (m.key, first_and_last(m.key), *m.aliases)})
        for i in range(0, len(keys), 5000):
            self.named.update(await self.stores.entities.named(Tenant(user, coll), keys[i : i + 5000]))
        known = sorted(set(self.named.values()))
        iris = sorted({concept_iri(k) for k in keys} | set(known))  # what a new concept's IRI may be
        for i in range(0, len(iris), 5000):
            self.labels.update(await self.stores.triples.labels(Tenant(user, coll), iris[i : i + 5000]))
        missing = sorted(({m.label for m in mentions} | set(self.labels.values())) - set(self.label_vectors))
        if missing:  # the sources embedded every mention's label; the collection's kept labels may differ
            found = await OnnxMiniLM.shared().embed(missing)
            self.label_vectors.update({x: np.asarray(v, dtype=np.float32) for x, v in zip(missing, found, strict=True)})
        self.seconds["resolve"] += time.perf_counter() - t

    def prepare(self, batch: list[Distractor]) -> Prepared:
        """Index and link a batch with the pipeline's own functions (`index_document`, `link`; in
        order: each batch sees the concepts the ones before it made). Every concept of the corpus
        was created by a document write, so every named one is claimed (owned by documents)."""
        t = time.perf_counter()
        indexed = index_distractors(batch)
        keys = {k for d in indexed for k in d.concepts}
        named = {k: self.named[k] for k in keys if k in self.named}
        linked = link_distractors(indexed, named, set(named.values()))
        for iri, label in linked.new_concepts.items():
            # an IRI labelled before keeps that label: the triple keeps the first, and the writer
            # indexes the kept one (`_agree_labels`); the entity index names an entity by its label
            kept = self.labels.setdefault(iri, label)
            self.named[normalize(kept)] = min(iri, self.named.get(normalize(kept), iri))
        new = [(iri, self.labels[iri], self._label_vector(self.labels[iri])) for iri in linked.new_concepts]
        t = self._lap("link", t)
        fresh = linked.relations - self.relations  # a relation's triple is written once
        self.relations |= fresh
        terms = Terms()
        triples = [terms.triple(i, RDFS_LABEL, lab, "literal") for i, lab, _ in new]
        triples += [terms.triple(s, p, o) for s, p, o in sorted(fresh)]
        claims = {i: k for r in linked.records for i, k in r.keys.items() if i in linked.new_concepts}
        return Prepared(linked, [(iri, label, v.tolist()) for iri, label, v in new], triples, claims)

    def _label_vector(self, label: str) -> np.ndarray:
        """A concept label's MiniLM vector (the sources embedded every mention label; a label the
        pipeline made otherwise, e.g. cut to its maximum length, is embedded here)."""
        if label not in self.label_vectors:
            self.seconds["labels_embedded_here"] += 1
            (v,) = asyncio.run(OnnxMiniLM.shared().embed([label]))
            self.label_vectors[label] = np.asarray(v, dtype=np.float32)
        return self.label_vectors[label]

    async def write(self, batch: Prepared) -> None:
        """Write one prepared batch."""
        t, user, coll = time.perf_counter(), USER, self.collection
        await self.stores.documents.claim(Tenant(user, coll), batch.claims)  # as the writer: claimed before named
        if batch.entities:
            await self.stores.entities.upsert(Tenant(user, coll), batch.entities, "entity", model=OnnxMiniLM.model)
        t = self._lap("entities", t)
        await self.stores.triples.add_triples(Tenant(user, coll), batch.triples, replace_labels=True)
        t = self._lap("triples", t)
        await self.stores.documents.store(Tenant(user, coll), batch.linked.records)
        self._lap("documents", t)

    def _lap(self, part: str, since: float) -> float:
        now = time.perf_counter()
        self.seconds[part] += now - since
        return now


def batches(spec: CorpusSpec, public_chunks: int) -> Iterator[tuple[int, int]]:
    """(start, count) of each batch of distractors the spec asks for."""
    total = max(0, spec.chunks - public_chunks)
    for start in range(0, total, spec.batch):
        yield start, min(spec.batch, total - start)


RETRY_PAUSE_S = 30.0  # times the attempt: a busy server gets longer each time


async def _retried(write: Callable[[], Awaitable[None]], log: Callable[[str], None], attempts: int = 4) -> None:
    """`write()`, again after a pause when it fails (a batch written twice is the same batch:
    records replace their ids, triples and vectors are kept once), at most `attempts` times."""
    for attempt in range(1, attempts + 1):
        try:
            await write()
            return
        except Exception as e:  # noqa: BLE001 - a busy server's timeout; the last one is raised
            if attempt == attempts:
                raise
            log(f"[docscale] a batch write failed ({type(e).__name__}: {e}); again in {RETRY_PAUSE_S * attempt} s")
            await asyncio.sleep(RETRY_PAUSE_S * attempt)


def make_batches(
    spec: CorpusSpec,
    sources: Sources,
    state: tuple[dict[str, str], dict[str, str], dict[str, Any]],
    plan: list[tuple[int, int]],
    seconds: Counter[str],
) -> Iterator[Prepared]:
    """The planned batches, in order, as a writer that knows `state` (the collection's concepts by
    name and label, and the label vectors its `start` embedded) prepares them (in the batch
    maker's child: it prepares, the build's process writes)."""
    writer = DirectWriter(None, "", sources)  # type: ignore[arg-type]
    writer.named, writer.labels = state[0], state[1]
    writer.label_vectors.update(state[2])
    writer.seconds = seconds
    for start, count in plan:
        t = time.perf_counter()
        batch = distractors(spec, sources, start, count)
        seconds["generate"] += time.perf_counter() - t
        yield writer.prepare(batch)


STORE_PARTS = ("entities", "triples", "documents")  # `DirectWriter.write`'s laps


@dataclass
class _Progress:
    """Distractors written so far, logged and checkpointed about once a minute."""

    began: float  # when the build began (a checkpoint's elapsed time is from here)
    since: float  # when its distractors began
    resumed_after: int
    collection: str
    log: Callable[[str], None]
    checkpoint: Callable[[float, int], Awaitable[None]] | None
    written: int = 0
    last_log: float = dataclasses.field(default_factory=time.perf_counter)

    async def add(self, n: int) -> None:
        """`n` more written."""
        self.written += n
        if time.perf_counter() - self.last_log > 60:
            rate = self.written / (time.perf_counter() - self.since)
            self.log(f"[docscale] {self.collection}: {self.resumed_after + self.written} distractors written "
                     f"({rate:.0f}/s)")  # fmt: skip
            self.last_log = time.perf_counter()
            if self.checkpoint:
                await self.checkpoint(time.perf_counter() - self.began, self.resumed_after + self.written)


async def _write_all(
    writer: DirectWriter, spec: CorpusSpec, sources: Sources, plan: list[tuple[int, int]], progress: _Progress
) -> float:
    """Write the planned batches as a child process makes them; the seconds spent waiting for one."""
    waited_s = 0.0
    extra = {k: v for k, v in writer.label_vectors.items() if k not in sources.label_vectors}
    state = (dict(writer.named), dict(writer.labels), extra)
    maker = BatchMaker(make_batches, spec, dataclasses.replace(sources, public={}), state, plan)
    try:
        for _ in plan:
            t = time.perf_counter()
            batch = await maker.next()
            waited_s += time.perf_counter() - t
            await _retried(functools.partial(writer.write, batch), progress.log)
            await progress.add(len(batch.linked.records))
        await maker.finish()
        writer.seconds.update(maker.seconds)
    finally:
        maker.stop()
    return waited_s


async def build(
    system: Any,
    collection: str,
    spec: CorpusSpec,
    sources: Sources,
    log: Callable[[str], None] = print,
    resume: int | None = None,
    checkpoint: Callable[[float, int], Awaitable[None]] | None = None,
) -> dict[str, Any]:
    """Write the corpus into `collection` of `system`'s stores (empty before; with `resume`, the
    public documents and that many distractors are there); what it took. `checkpoint(seconds,
    distractors)` is called about once a minute, after a batch is written."""
    began = time.perf_counter()
    public = [d for name in sorted(sources.public) for d in sources.public[name]]
    public_chunks = sum(len(d.chunks) for d in public)
    if resume is None:
        await write_public(system, collection, public)
        log(f"[docscale] {collection}: {len(public)} public documents ({public_chunks} chunks)")
    public_s = time.perf_counter() - began
    writer = DirectWriter(system.stores, collection, sources)
    await writer.start()
    plan = [(start, count) for start, count in batches(spec, public_chunks) if start >= (resume or 0)]

    progress = _Progress(began, began + public_s, resume or 0, collection, log, checkpoint)
    waited_s = await _write_all(writer, spec, sources, plan, progress) if plan else 0.0
    written = progress.written
    return {
        "public_documents": len(public),
        "public_chunks": public_chunks,
        "distractors": (resume or 0) + written,
        "public_write_s": round(public_s, 1),
        "distractor_waited_for_generation_s": round(waited_s, 1),  # the writes' wait for the next batch
        "distractor_write_s": {k: round(v, 1) for k, v in sorted(writer.seconds.items())},
        "distractors_per_s": round(written / max(time.perf_counter() - began - public_s, 1e-9), 1),
        # chunks per second inside the store calls (claim, entities, triples, records): the store's rate
        "store_write_chunks_per_s": round(written / max(sum(writer.seconds[k] for k in STORE_PARTS), 1e-9), 1),
        "build_s": round(time.perf_counter() - began, 1),
    }
