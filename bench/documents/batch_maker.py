"""The distractor batches of a corpus build, made in a child process while the build's process
writes (bench/documents/corpus.py).

Made in a thread of the writing process, a batch held the GIL against the store's writes (the
SQLite stores write from an executor thread of that process), so the build ran at the sum of the
two instead of the slower one; on a shared 2-core machine a second process also gets its own
share of the cores. The child makes the batches in order, as `DirectWriter.prepare` makes them
(each batch sees the concepts the ones before it made), at most `AHEAD` batches ahead of the writes.
A batch crosses as plain tuples where it holds many small objects (a 2,000-distractor batch has
~76,000 relations, ~32,000 mentions and ~15,000 triples): unpickled as models they cost the writer
~1 ms of CPU a distractor, as much as making them (`to_wire`, `from_wire`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import queue
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from processors.stores.documents_protocol import Relation
from schemas.documents import Mention

if TYPE_CHECKING:
    from bench.documents.corpus import CorpusSpec, DirectWriter, Prepared
    from bench.documents.sources import Sources

AHEAD = 2  # batches made and not yet written (a 2,000-distractor batch is ~30 MB in the writer)
POLL_S = 1.0  # how often a wait for the next batch checks that the child is still there


@dataclasses.dataclass
class WriterState:
    """What a `DirectWriter` knows after `start` (the collection's concepts, by name and label),
    handed to the child's writer."""

    named: dict[str, str]
    labels: dict[str, str]
    label_vectors: dict[str, Any]  # those `start` embedded (the sources hold the others)


class BatchMaker:
    """The planned batches, in order, from a child process."""

    def __init__(self, spec: CorpusSpec, sources: Sources, writer: DirectWriter, plan: list[tuple[int, int]]) -> None:
        extra = {k: v for k, v in writer.label_vectors.items() if k not in sources.label_vectors}
        state = WriterState(dict(writer.named), dict(writer.labels), extra)
        slim = dataclasses.replace(sources, public={})  # the child makes distractors only
        context = multiprocessing.get_context("spawn")  # the writer's process runs threads: no fork
        self._batches: Any = context.Queue(maxsize=AHEAD)
        self._child = context.Process(target=_make_all, args=(spec, slim, state, plan, self._batches), daemon=True)
        self._child.start()
        self.seconds: Counter[str] = Counter()  # the child's time per part, once it has made every batch

    async def next(self) -> Prepared:
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


def _make_all(spec: CorpusSpec, sources: Sources, state: WriterState, plan: list[tuple[int, int]], out: Any) -> None:
    """The child: every planned batch, in order, then its time per part (or what failed)."""
    from bench.documents.corpus import DirectWriter, distractors

    writer = DirectWriter(None, "", sources)  # type: ignore[arg-type]  # it prepares; the parent writes
    writer.named, writer.labels = state.named, state.labels
    writer.label_vectors.update(state.label_vectors)
    try:
        for start, count in plan:
            t = time.perf_counter()
            batch = distractors(spec, sources, start, count)
            writer.seconds["generate"] += time.perf_counter() - t
            out.put(("batch", to_wire(writer.prepare(batch))))
        out.put(("seconds", dict(writer.seconds)))
    except Exception as e:  # noqa: BLE001 - said to the parent, which raises it
        out.put(("error", f"{type(e).__name__}: {e}"))


def to_wire(batch: Prepared) -> Prepared:
    """The batch with its records' mentions and relations and its triples as tuples."""
    records = [dataclasses.replace(r, mentions=[(m.chunk_id, m.entity, m.count) for m in r.mentions],
                                   relations=[(x.s, x.p, x.o, x.chunk_ids) for x in r.relations])
               for r in batch.linked.records]  # fmt: skip
    triples = [(t.s.value, t.p.value, t.o.value, t.o.type) for t in batch.triples]
    return dataclasses.replace(batch, linked=dataclasses.replace(batch.linked, records=records), triples=triples)


def from_wire(batch: Prepared) -> Prepared:
    """`to_wire`'s batch as it was made (equal models)."""
    from bench.documents.corpus import _Terms

    for r in batch.linked.records:
        r.mentions = [Mention(chunk_id=c, entity=e, count=n) for c, e, n in r.mentions]
        r.relations = [Relation(*x) for x in r.relations]
    terms = _Terms()
    batch.triples = [terms.triple(*t) for t in batch.triples]
    return batch
