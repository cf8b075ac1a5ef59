"""`kgflow load documents PATH...`: documents through the documents flow (in-process by default,
over Pulsar with --pulsar, into a remote `kgflow up` with --url), with a progress bar over
documents and chunks. Exits 1 when any document was skipped or failed (each is named)."""

from __future__ import annotations

import argparse
import sys

from tqdm import tqdm

from processors.algorithms.wording import plural
from processors.commands.connect import client
from processors.commands.loading import LOAD_TIMEOUT_S, Batching, DocumentsLoaded


class _Bars:
    """A bar over documents and one over chunks, fed by the load's progress steps."""

    def __init__(self, disable: bool) -> None:
        self.docs = tqdm(total=0, unit="doc", desc="documents", disable=disable, file=sys.stderr)
        self.chunks = tqdm(total=0, unit="chunk", desc="chunks   ", disable=disable, file=sys.stderr, position=1)

    def __call__(self, stage: str, n: int) -> None:
        if stage == "documents":
            self.docs.total = n
            self.docs.refresh()
        elif stage in ("unchanged", "loaded"):
            self.docs.update(n)
        elif stage == "chunks":
            self.chunks.total = (self.chunks.total or 0) + n
            self.chunks.refresh()
        elif stage == "extracted":
            self.chunks.update(n)

    def close(self) -> None:
        """Close both bars."""
        self.chunks.close()
        self.docs.close()


async def load_documents(a: argparse.Namespace) -> int:
    """Load the documents of every PATH into user/collection."""
    if a.batch_size < 1 or a.in_flight < 1:
        raise ValueError("--batch-size and --in-flight must be at least 1")
    batching = Batching(a.batch_size, a.in_flight)
    bars = _Bars(a.no_progress)
    try:
        async with client(a, LOAD_TIMEOUT_S) as kg:
            a.user = kg.user  # the token's workspace when --user was not given
            done = await kg.load_documents(
                a.paths, collection=a.collection, format=a.format, progress=bars, batching=batching
            )
    finally:
        bars.close()
    report(a, done)
    return 0 if done.complete else 1


def report(a: argparse.Namespace, done: DocumentsLoaded) -> None:
    """What the load did, on stderr: everything it skipped or could not load, by name."""
    for where, why in done.skipped.items():
        print(f"kgflow: skipped {where}: {why}", file=sys.stderr)
    for doc_id, why in done.failed.items():
        print(f"kgflow: document {doc_id!r} failed: {why}", file=sys.stderr)
    for warning in done.warnings:
        print(f"kgflow: {warning}", file=sys.stderr)
    if done.llm_calls:  # extractor `llm` only: the default load makes no model call and says nothing here
        print(f"{done.llm_calls} model calls, {done.relations} typed relations", file=sys.stderr)
    if done.collection_deleted:  # what was loaded went with the collection: no "loaded N"
        print(
            f"kgflow: collection {a.user}/{a.collection} deleted during load: {plural(done.loaded, 'document')} "
            f"stored before (deleted with it), the rest refused ({len(done.refused)} not stored)",
            file=sys.stderr,
        )
        return
    print(
        f"loaded {plural(done.loaded, 'document')} ({plural(done.chunks, 'chunk')}; {done.unchanged} unchanged, "
        f"{len(done.failed)} failed, {len(done.skipped)} skipped) into {a.user}/{a.collection}",
        file=sys.stderr,
    )
    if done.communities is not None:
        c = done.communities
        per_level = ", ".join(f"level {lv}: {n}" for lv, n in sorted(c.levels.items())) or "none"
        print(f"communities rebuilt in {c.build_ms / 1000:.1f} s ({per_level})", file=sys.stderr)
