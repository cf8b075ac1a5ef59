"""The distractor batches of a corpus build, made in a child process while the build's process
writes (bench/documents/corpus.py).

Made in a thread of the writing process, a batch held the GIL against the store's writes (the
SQLite stores write from an executor thread of that process), so the build ran at the sum of the
two instead of the slower one; on a shared 2-core machine a second process also gets its own
share of the cores. The child makes the batches in order, as `DirectWriter.prepare` makes them
(each batch sees the concepts the ones before it made), at most `AHEAD` batches ahead of the writes.
A batch crosses as plain tuples where it holds many small objects (a 2,000-distractor batch has
~76,000 relations, ~32,000 mentions and ~15,000 triples): unpickled as models a batch cost the
writer ~2.0 CPU-s, as tuples rebuilt into equal models 1.2-1.6 (`to_wire`, `from_wire`; load ~25, so
+-30%). The round trip still costs the writer about what making the batch costs the child: the
child buys a second core, not less CPU.
"""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import queue
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from processors.stores.documents_protocol import Relation
from schemas.documents import Mention
from schemas.terms import Term, Triple

AHEAD = 2  # batches made and not yet written (a 2,000-distractor batch is ~30 MB in the writer)
POLL_S = 1.0  # how often a wait for the next batch checks that the child is still there

# What the child runs: `make(*args, seconds)` yields the batches in order (each a corpus
# `Prepared`), adding its time per part to `seconds`. A module-level function: the spawned child
# imports it by name.
MakeBatches = Callable[..., Iterator[Any]]


class BatchMaker:
    """The batches `make(*args)` yields, in order, from a child process."""

    def __init__(self, make: MakeBatches, *args: Any) -> None:
        context = multiprocessing.get_context("spawn")  # the writer's process runs threads: no fork
        self._batches: Any = context.Queue(maxsize=AHEAD)
        self._child = context.Process(target=_make_all, args=(make, args, self._batches), daemon=True)
        self._child.start()
        self.seconds: Counter[str] = Counter()  # the child's time per part, once it has made every batch

    async def next(self) -> Any:
        """The next batch (waits for the child to make it)."""
        kind, value = await asyncio.to_thread(self._get)
        if kind == "seconds":  # the child is done: every planned batch was taken
            self.seconds.update(value)
            raise RuntimeError("no batch left: the child made every planned batch")
        if kind == "error":
            raise RuntimeError(f"the batch maker failed: {value}")
        return from_wire(value)

    async def finish(self) -> None:
        """Take the child's timings (after the last batch) and wait for it to exit."""
        kind, value = await asyncio.to_thread(self._get)
        if kind == "seconds":
            self.seconds.update(value)
        await asyncio.to_thread(self._child.join, 30.0)

    def stop(self) -> None:
        """End the child (still there when a build stops early) and let its queue go."""
        if self._child.is_alive():
            self._child.kill()
        self._child.join(5.0)
        self._batches.close()

    def _get(self) -> tuple[str, Any]:
        while True:
            try:
                return self._batches.get(timeout=POLL_S)  # type: ignore[no-any-return]
            except queue.Empty:
                if not self._child.is_alive():
                    return "error", f"the child exited (exit code {self._child.exitcode})"


def _make_all(make: MakeBatches, args: tuple[Any, ...], out: Any) -> None:
    """The child: every batch, in order, then its time per part (or what failed)."""
    seconds: Counter[str] = Counter()
    try:
        for batch in make(*args, seconds):
            out.put(("batch", to_wire(batch)))
        out.put(("seconds", dict(seconds)))
    except Exception as e:  # noqa: BLE001 - said to the parent, which raises it
        out.put(("error", f"{type(e).__name__}: {e}"))


def to_wire(batch: Any) -> Any:
    """The batch with its records' mentions and relations and its triples as tuples."""
    records = [dataclasses.replace(r, mentions=[(m.chunk_id, m.entity, m.count) for m in r.mentions],
                                   relations=[(x.s, x.p, x.o, x.chunk_ids) for x in r.relations])
               for r in batch.linked.records]  # fmt: skip
    triples = [(t.s.value, t.p.value, t.o.value, t.o.type) for t in batch.triples]
    return dataclasses.replace(batch, linked=dataclasses.replace(batch.linked, records=records), triples=triples)


def from_wire(batch: Any) -> Any:
    """`to_wire`'s batch as it was made (equal models)."""
    for r in batch.linked.records:
        r.mentions = [Mention(chunk_id=c, entity=e, count=n) for c, e, n in r.mentions]
        r.relations = [Relation(*x) for x in r.relations]
    terms = Terms()
    batch.triples = [terms.triple(*t) for t in batch.triples]
    return batch


class Terms(dict[tuple[str, str], Term]):
    """One term for each IRI or literal of a batch (terms are frozen; a hub's IRI is in thousands of
    triples): building each once is a third of making the batch's triples."""

    def __missing__(self, key: tuple[str, str]) -> Term:
        kind, value = key
        self[key] = term = Term.iri(value) if kind == "iri" else Term.literal(value)
        return term

    def triple(self, s: str, p: str, o: str, o_kind: str = "iri") -> Triple:
        """The triple (s, p, o) of IRIs, or with `o` a literal."""
        return Triple(s=self["iri", s], p=self["iri", p], o=self[o_kind, o])
