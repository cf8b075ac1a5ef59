"""The public doc-QA sets as the bench indexes them, each into a cached embedded home.

Each set comes in two variants: `titles` (the corpus as published) and `notitles` (each
document's `title` dropped, text unchanged: exactly what ../shared/tools/docqa_eval.py
--drop-titles loads). Each variant is indexed once, through the real documents flow, into its own
embedded home under bench/.cache/docqa/<set>-<variant>-<key>/, where the key hashes the corpus
variant and the source files that decide what indexing stores (INDEXING_SOURCES): a rerun with
unchanged code reuses the home, a changed indexer rebuilds it. `indexed.json` in the home, written
last, records what the build cost (a home without it is an interrupted build and is rebuilt).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY

from bench.docqa.collection import COLLECTION, TIMEOUT_S, USER, client
from bench.harness.results import CACHE as BENCH_CACHE
from bench.harness.results import DATASETS, ROOT
from bench.harness.stats import load_average, peak_rss_mb
from processors.algorithms.iris import RELATED_TO
from processors.base.settings import RuntimeSettings
from processors.commands.loading import batches
from processors.commands.system import System, embedded
from processors.models.embeddings.service import EmbeddingsParams
from processors.stores.settings import StoreSettings
from schemas.communities import BuildCommunities
from schemas.documents import Document, LoadDocuments
from schemas.services import COMMUNITY_BUILD, DOCUMENT_LOAD
from schemas.tenant import Tenant
from schemas.terms import Term

DOCQA = DATASETS / "docqa"
SETS = {"hotpotqa": DOCQA / "hotpotqa_dev200_migres", "musique": DOCQA / "musique_train100_kag"}
VARIANTS = ("titles", "notitles")  # titles kept; titles removed (text unchanged)
CACHE = BENCH_CACHE / "docqa"
# What decides the stored index: chunking, extraction, linking, communities (ingest), how it is
# written and searched (stores), the algorithms both use, and the model that embeds the chunks.
INDEXING_SOURCES = ("processors/ingest", "processors/stores", "processors/algorithms", "processors/models/embeddings")
MARKER = "indexed.json"
DEFAULT_EMBEDDER: str = EmbeddingsParams.model_fields["embeddings_backend"].default
EMBEDDERS = (DEFAULT_EMBEDDER, "bge-small")  # the local backends a home may be indexed with


@dataclass
class VariantHome:
    """One indexed variant of a set: its home, what the build cost, and whether this run built it."""

    name: str
    variant: str
    home: Path
    cost: dict[str, Any]
    built_now: bool


def drop_title(line: str) -> str:
    """A corpus line without its document's `title` (every other field unchanged)."""
    doc = json.loads(line)
    doc.pop("title", None)
    return json.dumps(doc)


def corpus_lines(name: str, variant: str) -> list[str]:
    """The corpus of set `name` in `variant`, one JSON document per line."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    lines = [x for x in (SETS[name] / "corpus.jsonl").read_text().splitlines() if x.strip()]
    return lines if variant == "titles" else [drop_title(x) for x in lines]


def questions(name: str) -> list[dict[str, Any]]:
    """The questions of set `name` that have supporting paragraphs (as docqa_eval.py keeps them)."""
    rows = [json.loads(x) for x in (SETS[name] / "questions.jsonl").read_text().splitlines() if x.strip()]
    return [q for q in rows if q.get("supporting_paragraph_ids")]


def source_files(root: Path = ROOT) -> list[Path]:
    """The Python files under INDEXING_SOURCES, in a stable order."""
    return sorted(p for d in INDEXING_SOURCES for p in (root / d).rglob("*.py"))


def cache_key(lines: list[str], root: Path = ROOT) -> str:
    """Hash of a corpus variant and the indexing source files (path and content)."""
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode() + b"\n")
    for path in source_files(root):
        h.update(b"\0" + str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


def _llm_requests() -> float:
    """Text-completion requests served so far in this process (the model calls)."""
    total = 0.0
    for metric in REGISTRY.collect():
        for sample in metric.samples:
            if sample.name == "kgflow_requests_total" and sample.labels.get("service") == "text-completion":
                total += sample.value
    return total


async def index(system: System, docs: list[Document]) -> dict[str, Any]:
    """Index `docs` through the documents flow; what it cost."""
    llm_before, began = _llm_requests(), time.perf_counter()
    load_at_start = load_average()
    loader, chunks, failed, reported_calls = client(system, DOCUMENT_LOAD), 0, 0, 0
    slots = asyncio.Semaphore(2)

    async def one(batch: list[Document]) -> None:
        nonlocal chunks, failed, reported_calls
        async with slots:
            async for res in loader.stream(LoadDocuments(user=USER, collection=COLLECTION, documents=batch)):
                if res.end_of_stream:
                    chunks += res.chunks
                    failed += len(res.failed)
                    reported_calls += res.llm_calls

    await asyncio.gather(*(one(b) for b in batches(docs)))
    loaded_s = time.perf_counter() - began
    built = await client(system, COMMUNITY_BUILD).request(BuildCommunities(user=USER, collection=COLLECTION))
    total_s = time.perf_counter() - began
    relations = await system.stores.triples.pattern(
        Tenant(USER, COLLECTION), None, Term.iri(RELATED_TO), None, 10_000_000
    )
    concepts = (await system.stores.entities.collections(USER)).get(COLLECTION, 0)
    return {
        "documents": len(docs),
        "failed": failed,
        "chunks": chunks,
        "concepts": concepts,
        "relations": len(relations),
        "communities_per_level": {str(k): v for k, v in sorted(built.levels.items())},
        "load_s": round(loaded_s, 1),
        "community_build_s": round(built.build_ms / 1000, 2),
        "index_s": round(total_s, 1),
        "documents_per_s": round(len(docs) / total_s, 1),
        "chunks_per_s": round(chunks / total_s, 1),
        "llm_calls_at_index_time": int(_llm_requests() - llm_before),  # text-completion's own request counter
        "llm_calls_reported_by_load": reported_calls,  # the load responses' count (extractor `llm`: one per chunk)
        "peak_rss_mb": peak_rss_mb(),  # of the process so far
        "load_average": {"start": load_at_start, "end": load_average()},
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def embedder_params(embedder: str) -> dict[str, str]:
    """The flow parameters that make every flow of a home embed with `embedder` (the default: none)."""
    return {} if embedder == DEFAULT_EMBEDDER else {"embeddings-backend": embedder}


def home_prefix(name: str, variant: str, embedder: str = DEFAULT_EMBEDDER) -> str:
    """What the homes of a set's variant indexed with `embedder` are named by, before the key."""
    return f"{name}-{variant}" if embedder == DEFAULT_EMBEDDER else f"{name}-{variant}-{embedder}"


def stale_homes(prefix: str, cache: Path = CACHE) -> list[Path]:
    """The homes named `prefix`-<key> in `cache`: other corpora's or indexers', or interrupted
    builds; never another embedder's (`prefix`-bge-small-<key>)."""
    return sorted(h for h in cache.glob(f"{prefix}-*") if h.name.removeprefix(f"{prefix}-").isalnum())


async def indexed_home(
    name: str, variant: str, log: Callable[[str], None], embedder: str = DEFAULT_EMBEDDER
) -> VariantHome:
    """The home holding variant `variant` of set `name`, indexed with `embedder` (an embeddings
    backend; the chunks' vectors differ, so each has its own home), built now unless cached."""
    lines = corpus_lines(name, variant)
    key = cache_key(lines)
    prefix = home_prefix(name, variant, embedder)
    home = CACHE / f"{prefix}-{key}"
    marker = home / MARKER
    if marker.exists():
        return VariantHome(name, variant, home, json.loads(marker.read_text()), built_now=False)
    for stale in stale_homes(prefix):
        shutil.rmtree(stale, ignore_errors=True)
    docs = [Document.model_validate_json(x) for x in lines]
    rt = RuntimeSettings(request_timeout_s=TIMEOUT_S)
    async with embedded(StoreSettings(home=home), rt, embedder_params(embedder)) as system:
        log(f"[docqa] {name}/{variant}: indexing {len(docs)} documents into {home.name} (cached afterwards)")
        cost = await index(system, docs)
    cost["cache_key"] = key
    marker.write_text(json.dumps(cost, indent=1))
    log(f"[docqa] {name}/{variant}: indexed in {cost['index_s']} s")
    return VariantHome(name, variant, home, cost, built_now=True)
