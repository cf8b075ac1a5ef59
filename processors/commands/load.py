"""`kgflow load triples`: a file through the flow's triples-store service (in process on the embedded
default, over Pulsar with --pulsar), or into a remote `kgflow up` through its gateway (--url). The
one write path: triples are stored and their labels embedded with the flow's embeddings model, as
every other write does (`run_load(FlowLoadSteps(...), triples)` is the same load for Python callers)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from processors.base.client import RemoteError, RequestResponseClient, RequestTimeout
from processors.commands.connect import flow_bus, service_client
from processors.commands.import_triples import import_over_gateway
from processors.ingest.triples.loader import Begun, LoadReport, run_load
from processors.ingest.triples.readers import Format, guess_format, read_triples
from processors.stores.protocol import VectorKind
from schemas.services import TRIPLES_STORE
from schemas.terms import Triple
from schemas.triples import BeginLoad, EmbedLabels, FinishLoad, StoreTriples

LOAD_TIMEOUT_S = 600.0  # one step: a batch stored, or its labels embedded
BEGIN_TIMEOUT_S = 60.0  # the first step: a flow with no triples-store processor fails here


@dataclass
class FlowLoadSteps:
    """`LoadSteps` over the bus; `begun` tells whether anything may have been written."""

    client: RequestResponseClient[Any]
    user: str
    collection: str
    begun: bool = False

    async def begin(self, source: str) -> Begun:
        req = BeginLoad(user=self.user, collection=self.collection, source=source)
        try:
            res = await self.client.request(req, timeout_s=BEGIN_TIMEOUT_S)
        except RequestTimeout:
            raise RuntimeError(
                f"no triples-store processor answered within {BEGIN_TIMEOUT_S:.0f}s: is one serving the flow "
                "(`kgflow up`, or `kgflow run triples-store`)?"
            ) from None
        self.begun = True
        return Begun(res.fresh, res.repairing)

    async def store(self, batch: list[Triple], fresh: bool) -> tuple[int, set[str]]:
        req = StoreTriples(user=self.user, collection=self.collection, triples=batch, in_load=True, fresh=fresh)
        res = await self.client.request(req)
        return res.stored, set(res.changed)

    async def embed(self, kind: VectorKind, iris: list[str], labels: dict[str, str], keep: list[str]) -> int:
        req = EmbedLabels(user=self.user, collection=self.collection, kind=kind, iris=iris, labels=labels, keep=keep)
        return (await self.client.request(req)).embedded

    async def finish(self, stored: int, vectors: int, error: str | None = None) -> None:
        await self.client.request(FinishLoad(user=self.user, collection=self.collection, stored=stored,
                                             vectors=vectors, error=error))  # fmt: skip


def checked_triples(path: Path, fmt: Format) -> tuple[Iterable[Triple], int]:
    """The file's triples and their count, read once in full before anything is stored, so a
    malformed line stops the load with the store untouched (the count sizes the progress bar).
    N-Triples and Turtle are parsed whole anyway (rdflib); TSV and JSONL are read again to load."""
    if fmt in ("nt", "ttl"):
        found = list(read_triples(path, fmt))
        return found, len(found)
    return read_triples(path, fmt), sum(1 for _ in read_triples(path, fmt))


class _Bars:
    """One progress bar per phase: storing triples, then embedding labels."""

    def __init__(self, name: str, total: int | None, disable: bool) -> None:
        self.name, self.disable = name, disable
        self.bar = tqdm(total=total, unit="triple", desc=f"storing {name}", disable=disable, file=sys.stderr)
        self.phase = "store"

    def __call__(self, phase: str, n: int, total: int | None) -> None:
        if phase != self.phase:
            self.bar.close()
            self.phase = phase
            self.bar = tqdm(total=total, unit="label", desc="embedding labels", disable=self.disable, file=sys.stderr)
        self.bar.update(n)

    def close(self) -> None:
        """Close the current bar."""
        self.bar.close()


async def load_triples_file(a: argparse.Namespace) -> int:
    """Load a file through flow `a.flow`: stored, labels embedded with the flow's model, recorded."""
    fmt = a.format or guess_format(a.file)
    triples, total = await asyncio.to_thread(checked_triples, a.file, fmt)  # errors here: nothing was stored
    bars = _Bars(a.file.name, total, a.no_progress)
    try:
        if a.url:
            token = a.token or os.environ.get("KGFLOW_GATEWAY_TOKEN")
            sent = await import_over_gateway(a.url, token, a.flow, a.user, a.collection, triples, bars)
            print(f"sent {sent} triples to flow {a.flow!r} at {a.url} ({a.user}/{a.collection}); the flow stored "
                  "them and embedded their labels", file=sys.stderr)  # fmt: skip
            return 0
        async with flow_bus(a) as bus, service_client(bus, TRIPLES_STORE, a.flow, LOAD_TIMEOUT_S) as client:
            steps = FlowLoadSteps(client, a.user, a.collection)
            try:
                report = await run_load(steps, triples, bars, source=str(a.file))
            except (RemoteError, RuntimeError, OSError) as e:
                if not steps.begun:  # refused before anything was written (e.g. another embedding model)
                    raise RuntimeError(getattr(e, "message", str(e))) from None
                raise RuntimeError(f"{getattr(e, 'message', e)}\n  {a.user}/{a.collection} is marked incomplete "
                                   "(queries say so); fix the problem and load again") from None  # fmt: skip
    finally:
        bars.close()
    _report(a, report)
    return 0


def _report(a: argparse.Namespace, r: LoadReport) -> None:
    print(
        f"loaded {r.triples} new triples ({r.entities} entities, {r.relations} relations, "
        f"{r.embedded} labels embedded) into {a.user}/{a.collection}",
        file=sys.stderr,
    )
    if r.repaired:
        print(f"repaired: {r.repaired}", file=sys.stderr)
