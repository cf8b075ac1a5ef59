"""The bench's one entry point: `python -m bench SECTION [options]` (`python -m bench SECTION --help`
for a section's options; `python -m bench all` runs what `make bench` runs, with defaults)."""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass

from bench.docqa import no_model_answer, rerank, tune
from bench.docqa import run as docqa
from bench.documents import (
    fleet,
    index_size,
    ingest,
    load_rate,
    measure,
    scale,
    stores,
    vector_index,
    write_at_size,
    write_rate,
)
from bench.graph import communities
from bench.graph import run as graph
from bench.reliability import run as reliability


@dataclass(frozen=True)
class Section:
    """One runnable section: what it measures and how it is run with its arguments."""

    measures: str
    main: Callable[[list[str]], object]  # may return a coroutine: run to its end
    in_make_bench: bool = False
    worker: bool = False  # run by another section in a child process, not by hand


SECTIONS: dict[str, Section] = {
    "graph": Section("graph-rag retrieval against the classic baseline, every backend and path", graph.main, True),
    "docqa": Section("document-retrieval recall on the public doc-QA sets, by the halves protocol", docqa.main, True),
    "rerank": Section("the reranker's latency, store round trips and effect on recall", rerank.main, True),
    "ingest": Section("ingestion throughput over Pulsar, one worker against two", ingest.main, True),
    "communities": Section("a community build's time and peak memory, one update's time", communities.main, True),
    "documents": Section("lazy-rag and kg-query over 10k to 1M chunks, SQLite and Neo4j", scale.main, True),
    "index-size": Section("bytes per chunk of an index, by file, table and index (Neo4j: by label)", index_size.main),
    "no-model-answer": Section(
        "the gold answer in the no-model answer text, per retrieval service", no_model_answer.main
    ),
    "load-rate": Section("kgflow load documents' tokens/s against the embedding model's alone", load_rate.main),
    "write-rate": Section("the document store's chunks/s by batch size, SQLite and Neo4j", write_rate.main),
    "write-at-size": Section("the SQLite store's chunks/s at a built corpus's size, by batch size", write_at_size.main),
    "vector-index": Section("today's IVF vector index against sqlite-vec, usearch and faiss", vector_index.main),
    "tune": Section("recall of a ranking knob's values on one half of a doc-QA set", tune.main),
    "reliability": Section("fuzzed frames, heavy tenants and killed loads against a running kgflow", reliability.main),
    "corpora": Section("build (or find cached) one document scale corpus", stores.main, worker=True),
    "documents-measure": Section("measure one backend and size of the documents section", measure.main, worker=True),
    "documents-serve": Section("serve one processor of the documents section's fleet", fleet.main, worker=True),
}


def usage() -> str:
    """The sections, one a line."""
    lines = ["usage: python -m bench SECTION [options]   (python -m bench SECTION --help)", "", "sections:"]
    lines += [f"  {name:<18} {s.measures}" for name, s in SECTIONS.items() if not s.worker]
    in_make = ", ".join(name for name, s in SECTIONS.items() if s.in_make_bench)
    lines += [f"  {'all':<18} {in_make} in turn, with their defaults (`make bench`)", "",
              "run by the sections above in child processes:"]  # fmt: skip
    lines += [f"  {name:<18} {s.measures}" for name, s in SECTIONS.items() if s.worker]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Run the named section with the rest of the arguments; usage on no or an unknown section."""
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name == "all":
        for section in (s for s in SECTIONS.values() if s.in_make_bench):
            run(section, [])
        return 0
    if name not in SECTIONS:
        print(f"unknown section {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    run(SECTIONS[name], rest)
    return 0


def run(section: Section, argv: list[str]) -> None:
    """Run one section's main with its arguments, on an event loop of its own when it is async."""
    result = section.main(argv)
    if inspect.iscoroutine(result):
        asyncio.run(result)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
