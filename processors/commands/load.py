"""`kgflow load triples`."""

from __future__ import annotations

import argparse
import sys

from tqdm import tqdm

from processors.commands.options import runtime_settings, store_settings
from processors.ingest.triples_loader import guess_format, read_triples
from processors.ingest.triples_loader import load_triples as load
from processors.models.embeddings.model import OnnxMiniLM
from processors.stores.factory import open_stores
from schemas.flows import GraphChanged
from schemas.topics import GRAPH_CHANGED


def _count_lines(path) -> int | None:  # type: ignore[no-untyped-def]
    try:
        with path.open("rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


async def load_triples(a: argparse.Namespace) -> int:
    """Load a file into the configured stores, then tell running processors the collection changed."""
    if not a.file.exists():
        raise FileNotFoundError(f"no such file: {a.file}")
    fmt = a.format or guess_format(a.file)
    stores = open_stores(store_settings(a))
    total = _count_lines(a.file) if fmt in ("tsv", "jsonl") else None
    bar = tqdm(
        total=total,
        unit="line" if total else "triple",
        desc=f"loading {a.file.name}",
        disable=a.no_progress,
        file=sys.stderr,
    )
    try:
        triples = read_triples(a.file, fmt)
        # TSV/JSONL lines expand into label triples; count progress in source lines there.
        per_line = 4 if fmt == "tsv" else 1
        counts = await load(
            stores,
            OnnxMiniLM.shared(),
            a.user,
            a.collection,
            triples,
            progress=lambda n: bar.update(n // per_line if total else n),
        )
    finally:
        bar.close()
        await stores.close()
    rt = runtime_settings(a)
    if rt.bus == "pulsar":
        from processors.base.runtime import make_bus

        bus = make_bus(rt)
        prod = await bus.producer(GRAPH_CHANGED)
        await prod.send(GraphChanged(user=a.user, collection=a.collection).model_dump_json().encode(), {})
        await bus.close()
    print(
        f"loaded {counts['triples']} new triples ({counts['entities']} entities, "
        f"{counts['relations']} relations) into {a.user}/{a.collection}",
        file=sys.stderr,
    )
    return 0
