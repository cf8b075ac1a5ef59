"""Load triples into the stores, honestly and resumably.

A load first records an unfinished `LoadState` for the collection, then stores the triples in
batches, then embeds the labels of entities and relations that lack a vector (or whose label
changed), then records the load finished. A load that fails or is killed leaves the unfinished
state behind: queries over the collection say it is incomplete and why, and loading the same
data again completes it (triples are idempotent; only missing vectors are embedded) and reports
what it repaired.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

from processors.algorithms.iris import iri_label
from processors.models.embeddings.model import Embedder
from processors.stores.factory import Stores
from processors.stores.protocol import LoadState, VectorKind
from schemas.terms import RDFS_LABEL, Triple

BATCH = 2000
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


@dataclass
class _Seen:
    """What the triples of a load name."""

    labels: dict[str, str] = field(default_factory=dict)
    changed: set[str] = field(default_factory=set)  # IRIs whose label is new or different
    entities: set[str] = field(default_factory=set)
    predicates: set[str] = field(default_factory=set)
    stored: int = 0


def _take(it: Iterator[Triple], n: int) -> list[Triple]:
    return list(itertools.islice(it, n))


async def load_triples(
    stores: Stores,
    embedder: Embedder,
    user: str,
    collection: str,
    triples: Iterable[Triple],
    progress: Progress | None = None,
    source: str = "data",
) -> LoadReport:
    """Store `triples` in `user`/`collection` and embed their labels, recording the load's state
    before and after (see the module docstring)."""
    tell = progress or (lambda _phase, _n, _total: None)
    prior = await stores.triples.load_state(user, collection)
    state = LoadState(started=time.time(), source=source)
    await stores.triples.set_load_state(user, collection, state)
    try:
        fresh = prior is None  # a new collection: every label is new, no vector exists (nothing to look up)
        seen = await _store(stores, user, collection, iter(triples), tell, fresh)
        embedded = await _embed(stores, embedder, user, collection, seen, tell, fresh)
    except Exception as e:  # recorded for queries; a kill leaves the state unfinished without a reason
        reason = " ".join(str(e).split())[:500] or type(e).__name__
        await stores.triples.set_load_state(user, collection, replace(state, error=reason))
        raise
    done = replace(state, finished=time.time(), triples=seen.stored, vectors=embedded)
    await stores.triples.set_load_state(user, collection, done)
    repaired = None
    if prior is not None and not prior.complete:
        repaired = (
            f"completed the unfinished load of {prior.source}: stored {seen.stored} missing triples "
            f"and {embedded} missing label vectors"
        )
    return LoadReport(seen.stored, len(seen.entities), len(seen.predicates), embedded, repaired)


async def _store(
    stores: Stores, user: str, collection: str, it: Iterator[Triple], tell: Progress, fresh: bool
) -> _Seen:
    """Store the triples in batches (read and parsed off the event loop); note labels and names."""
    seen = _Seen()
    while batch := await asyncio.to_thread(_take, it, BATCH):
        labelled = {t.s.value: t.o.value for t in batch if t.p.value == RDFS_LABEL and not t.o.is_iri}
        if labelled:
            old = {} if fresh else await stores.triples.labels(user, collection, list(labelled))
            seen.changed.update(i for i, label in labelled.items() if old.get(i) != label)
            seen.labels.update(labelled)
        for t in batch:
            if t.p.value != RDFS_LABEL or t.o.is_iri:
                seen.entities.add(t.s.value)
                seen.predicates.add(t.p.value)
                if t.o.is_iri:
                    seen.entities.add(t.o.value)
        seen.stored += await stores.triples.add_triples(user, collection, batch)
        tell("store", len(batch), None)
    return seen


async def _embed(
    stores: Stores, embedder: Embedder, user: str, collection: str, seen: _Seen, tell: Progress, fresh: bool
) -> int:
    """Embed the labels that lack a vector or changed; returns how many were embedded."""
    todo: list[tuple[VectorKind, list[str]]] = []
    for kind, iris in (("entity", sorted(seen.entities)), ("predicate", sorted(seen.predicates - seen.entities))):
        unchanged = [] if fresh else [i for i in iris if i not in seen.changed]
        have: set[str] = set()
        for i in range(0, len(unchanged), BATCH):
            have.update(await stores.entities.vectors(user, collection, unchanged[i : i + BATCH]))
        todo.append((kind, [i for i in iris if i not in have]))  # type: ignore[arg-type]
    total = sum(len(iris) for _, iris in todo)
    for kind, iris in todo:
        for i in range(0, len(iris), BATCH):
            chunk = iris[i : i + BATCH]
            unlabelled = [] if fresh else [iri for iri in chunk if iri not in seen.labels]
            stored = await stores.triples.labels(user, collection, unlabelled) if unlabelled else {}
            texts = [seen.labels.get(iri) or stored.get(iri) or iri_label(iri) for iri in chunk]
            vecs = await embedder.embed(texts)
            await stores.entities.upsert(user, collection, list(zip(chunk, texts, vecs, strict=True)), kind)
            tell("embed", len(chunk), total)
    return total
