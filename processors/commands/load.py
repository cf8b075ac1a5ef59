"""`kgflow load triples`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterable
from pathlib import Path

from tqdm import tqdm

from processors.commands.options import runtime_settings, store_settings
from processors.ingest.triples.loader import LoadReport, load_triples
from processors.ingest.triples.readers import Format, guess_format, read_triples
from processors.models.embeddings.model import OnnxMiniLM
from processors.stores.factory import open_stores
from schemas.flows import GraphChanged
from schemas.terms import Triple
from schemas.topics import GRAPH_CHANGED


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
    """Load a file into the configured stores, then tell running processors the collection changed."""
    fmt = a.format or guess_format(a.file)
    triples, total = await asyncio.to_thread(checked_triples, a.file, fmt)  # errors here: nothing was stored
    stores = open_stores(store_settings(a))
    bars = _Bars(a.file.name, total, a.no_progress)
    try:
        report = await load_triples(
            stores, OnnxMiniLM.shared(), a.user, a.collection, triples, bars, source=str(a.file)
        )
    except Exception as e:
        raise RuntimeError(
            f"{e}\n  {a.user}/{a.collection} is marked incomplete (queries say so); fix the problem and load again"
        ) from None
    finally:
        bars.close()
        await stores.close()
    await _announce(a)
    _report(a, report)
    return 0


async def _announce(a: argparse.Namespace) -> None:
    """Tell processors on Pulsar that the collection changed (label caches)."""
    rt = runtime_settings(a)
    if rt.bus == "pulsar":
        from processors.base.runtime import make_bus

        bus = make_bus(rt)
        prod = await bus.producer(GRAPH_CHANGED)
        await prod.send(GraphChanged(user=a.user, collection=a.collection).model_dump_json().encode(), {})
        await bus.close()


def _report(a: argparse.Namespace, r: LoadReport) -> None:
    print(
        f"loaded {r.triples} new triples ({r.entities} entities, {r.relations} relations, "
        f"{r.embedded} labels embedded) into {a.user}/{a.collection}",
        file=sys.stderr,
    )
    if r.repaired:
        print(f"repaired: {r.repaired}", file=sys.stderr)
