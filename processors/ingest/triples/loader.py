"""Load triples into the stores, honestly and resumably.

A load checks that the flow's embedding model is the one the collection's vectors are of (nothing
is written otherwise), records an unfinished `LoadState` for the collection, stores the triples in
batches, then embeds the labels of entities and relations that lack a vector (or whose label
changed), then records the load finished. A load that fails or is killed leaves the unfinished
state behind: queries over the collection say it is incomplete and why, and loading the same data
again completes it (triples are idempotent; only missing vectors are embedded) and reports what it
repaired.

The steps (`LoadSteps`) are what the triples-store service does for each request of a load;
`run_load` drives them, over the bus (`kgflow load triples`) or directly on the stores
(`StoreSteps`: the service itself, and `load_triples`).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from processors.algorithms.iris import iri_label
from processors.models.embeddings.model import Embedder
from processors.stores.factory import Stores
from processors.stores.protocol import LoadState, VectorKind, VectorModel
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Triple

BATCH = 2000
IN_FLIGHT = 2  # label batches embedding at once (the embeddings service's two bulk places: both cores)
MODEL_PROBE = "kgflow embedding model check"  # embedded once per load: which model, how many dimensions
# (phase "store" | "embed", items just done, the phase's total when known)
Progress = Callable[[str, int, int | None], None]


@dataclass
class LoadReport:
    """What one load did."""

    triples: int  # new triples stored
    entities: int
    relations: int
    embedded: int  # labels embedded (new, changed, or missing a vector)
    repaired: str | None = None  # what an earlier unfinished load had left undone, when this one completed it


@dataclass(frozen=True)
class Begun:
    """A load just begun: whether the collection is new (nothing to look up), and the source of an
    earlier load it completes (one that did not finish)."""

    fresh: bool
    repairing: str | None = None


@dataclass
class Tally:
    """What the triples of a load name, kept by whoever drives the load."""

    labels: dict[str, str] = field(default_factory=dict)
    changed: set[str] = field(default_factory=set)  # IRIs whose label is new or different
    entities: set[str] = field(default_factory=set)
    predicates: set[str] = field(default_factory=set)
    stored: int = 0

    def add(self, batch: Sequence[Triple]) -> None:
        """Note a batch's labels, entities and predicates."""
        for t in batch:
            if t.p.value == RDFS_LABEL and not t.o.is_iri:
                self.labels[t.s.value] = t.o.value
                continue
            self.entities.add(t.s.value)
            self.predicates.add(t.p.value)
            if t.o.is_iri:
                self.entities.add(t.o.value)

    def plan(self, fresh: bool) -> list[tuple[VectorKind, list[str], list[str]]]:
        """The labels to embed, in requests of BATCH: (kind, IRIs, those of them whose label did not
        change, whose stored vector is kept when they have one; none in a new collection)."""
        out: list[tuple[VectorKind, list[str], list[str]]] = []
        kinds: tuple[tuple[VectorKind, list[str]], ...] = (
            ("entity", sorted(self.entities)),
            ("predicate", sorted(self.predicates - self.entities)),
        )
        for kind, iris in kinds:
            for i in range(0, len(iris), BATCH):
                chunk = iris[i : i + BATCH]
                out.append((kind, chunk, [] if fresh else [x for x in chunk if x not in self.changed]))
        return out


class LoadSteps(Protocol):
    """The writes of one load into one user's collection (the triples-store service's operations)."""

    async def begin(self, source: str) -> Begun:
        """Check the flow's embedding model against the collection's; record the load unfinished."""
        ...

    async def store(self, batch: list[Triple], fresh: bool) -> tuple[int, set[str]]:
        """Store a batch; (new triples, IRIs whose label it changed)."""
        ...

    async def embed(self, kind: VectorKind, iris: list[str], labels: dict[str, str], keep: list[str]) -> int:
        """Embed the labels of `iris` lacking a vector (all but those of `keep` that have one); how many."""
        ...

    async def finish(self, stored: int, vectors: int, error: str | None = None) -> None:
        """Record the load finished (or failed, with why)."""
        ...


def _take(it: Iterator[Triple], n: int) -> list[Triple]:
    return list(itertools.islice(it, n))


async def run_load(
    steps: LoadSteps, triples: Iterable[Triple], progress: Progress | None = None, source: str = "data"
) -> LoadReport:
    """Store `triples` and embed their labels through `steps`, recording the load's state before
    and after (see the module docstring). A batch is stored while the next is read, and labels are
    embedded IN_FLIGHT requests at a time."""
    tell = progress or (lambda _phase, _n, _total: None)
    begun = await steps.begin(source)
    tally, embedded = Tally(), 0
    try:
        await _store_all(steps, iter(triples), begun.fresh, tally, tell)
        plan = tally.plan(begun.fresh)
        total = sum(len(iris) for _, iris, _ in plan)
        slots = asyncio.Semaphore(IN_FLIGHT)

        async def embed(kind: VectorKind, iris: list[str], keep: list[str]) -> None:
            nonlocal embedded
            async with slots:
                n = await steps.embed(kind, iris, {i: tally.labels[i] for i in iris if i in tally.labels}, keep)
            embedded += n  # after the await: two requests run at once
            tell("embed", len(iris), total)

        async with asyncio.TaskGroup() as tg:  # the first failure cancels the others
            for kind, iris, keep in plan:
                tg.create_task(embed(kind, iris, keep))
    except BaseException as e:  # a failure is recorded for queries; a kill leaves the state unfinished
        if not isinstance(e, Exception):
            raise
        first = e.exceptions[0] if isinstance(e, BaseExceptionGroup) else e
        await steps.finish(tally.stored, embedded, " ".join(str(first).split())[:500] or type(first).__name__)
        raise first from None
    await steps.finish(tally.stored, embedded)
    repaired = None
    if begun.repairing is not None:
        repaired = (
            f"completed the unfinished load of {begun.repairing}: stored {tally.stored} missing triples "
            f"and {embedded} missing label vectors"
        )
    return LoadReport(tally.stored, len(tally.entities), len(tally.predicates), embedded, repaired)


async def _store_all(steps: LoadSteps, it: Iterator[Triple], fresh: bool, tally: Tally, tell: Progress) -> None:
    """Store every batch, the next read (off the event loop) while the previous one is written."""
    pending: tuple[asyncio.Task[tuple[int, set[str]]], int] | None = None
    try:
        while batch := await asyncio.to_thread(_take, it, BATCH):
            tally.add(batch)
            if pending is not None:
                _stored(tally, await pending[0], pending[1], tell)
            pending = (asyncio.ensure_future(steps.store(batch, fresh)), len(batch))
        if pending is not None:
            _stored(tally, await pending[0], pending[1], tell)
    finally:
        if pending is not None and not pending[0].done():  # a failure while a batch is written: it ends first
            await asyncio.wait({pending[0]})
            if not pending[0].cancelled():
                pending[0].exception()  # retrieved: the failure being raised is the one to report


def _stored(tally: Tally, result: tuple[int, set[str]], sent: int, tell: Progress) -> None:
    tally.stored += result[0]
    tally.changed |= result[1]
    tell("store", sent, None)


async def flow_model(embedder: Embedder) -> VectorModel:
    """The model `embedder` embeds with and the dimension of its vectors (one short text embedded)."""
    (vector,) = await embedder.embed([MODEL_PROBE])
    return VectorModel(embedder.model, len(vector))


@dataclass
class StoreSteps:
    """`LoadSteps` on the stores, embedding with `embedder` (the triples-store service's own)."""

    stores: Stores
    embedder: Embedder
    tenant: Tenant

    async def begin(self, source: str) -> Begun:
        offered = await flow_model(self.embedder)
        held = await self.stores.entities.vector_model(self.tenant)
        offered.require(self.tenant.collection, held)  # before anything is written
        prior = await self.stores.triples.load_state(self.tenant)
        await self.stores.triples.set_load_state(self.tenant, LoadState(started=time.time(), source=source))
        return Begun(prior is None, prior.source if prior is not None and not prior.complete else None)

    async def store(self, batch: list[Triple], fresh: bool) -> tuple[int, set[str]]:
        labelled = {t.s.value: t.o.value for t in batch if t.p.value == RDFS_LABEL and not t.o.is_iri}
        old = {} if fresh or not labelled else await self.stores.triples.labels(self.tenant, list(labelled))
        changed = {i for i, label in labelled.items() if old.get(i) != label}
        return await self.stores.triples.add_triples(self.tenant, batch), changed

    async def embed(self, kind: VectorKind, iris: list[str], labels: dict[str, str], keep: list[str]) -> int:
        have = set(await self.stores.entities.vectors(self.tenant, keep)) if keep else set()
        todo = [i for i in iris if i not in have]
        if not todo:
            return 0
        unlabelled = [i for i in todo if i not in labels]
        stored = await self.stores.triples.labels(self.tenant, unlabelled) if unlabelled else {}
        texts = [labels.get(i) or stored.get(i) or iri_label(i) for i in todo]
        vectors = await self.embedder.embed(texts)
        await self.stores.entities.upsert(self.tenant, list(zip(todo, texts, vectors, strict=True)), kind,
                                          model=self.embedder.model)  # fmt: skip
        return len(todo)

    async def finish(self, stored: int, vectors: int, error: str | None = None) -> None:
        state = await self.stores.triples.load_state(self.tenant) or LoadState(started=time.time())
        done = replace(state, triples=stored, vectors=vectors, error=error)
        await self.stores.triples.set_load_state(self.tenant, done if error else replace(done, finished=time.time()))


async def load_triples(
    stores: Stores,
    embedder: Embedder,
    tenant: Tenant,
    triples: Iterable[Triple],
    progress: Progress | None = None,
    source: str = "data",
) -> LoadReport:
    """Load `triples` into `tenant` directly on the stores (what the triples-store
    service does for one request; see the module docstring)."""
    return await run_load(StoreSteps(stores, embedder, tenant), triples, progress, source)
