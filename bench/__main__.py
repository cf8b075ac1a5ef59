"""The bench's one entry point: `python -m bench SECTION [options]` (`python -m bench SECTION --help`
for a section's options; `python -m bench all` runs what `make bench` runs, with defaults)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    """One runnable section: what it measures and how it is run with its arguments."""

    measures: str
    run: Callable[[list[str]], object]
    in_make_bench: bool = False
    worker: bool = False  # run by another section in a child process, not by hand


def _graph(argv: list[str]) -> object:
    from bench.graph.run import main

    return asyncio.run(main(argv))


def _communities(argv: list[str]) -> object:
    from bench.graph.communities import main

    return main(argv)


def _docqa(argv: list[str]) -> object:
    from bench.docqa.run import main

    return asyncio.run(main(argv))


def _rerank(argv: list[str]) -> object:
    from bench.docqa.rerank import main

    return asyncio.run(main(argv))


def _tune(argv: list[str]) -> object:
    from bench.docqa.tune import main

    return main(argv)


def _documents(argv: list[str]) -> object:
    from bench.documents.scale import main

    return asyncio.run(main(argv))


def _corpora(argv: list[str]) -> object:
    from bench.documents.stores import main

    return asyncio.run(main(argv))


def _documents_measure(argv: list[str]) -> object:
    from bench.documents.measure import measure, parse_args

    return asyncio.run(measure(parse_args(argv)))


def _documents_serve(argv: list[str]) -> object:
    import json

    from bench.documents.fleet import serve

    return asyncio.run(serve(argv[0], argv[1], json.loads(argv[2]) if len(argv) > 2 else {}))


def _ingest(argv: list[str]) -> object:
    from bench.documents.ingest import main

    return main(argv)


def _reliability(argv: list[str]) -> object:
    from bench.reliability.run import main

    return main(argv)


SECTIONS: dict[str, Section] = {
    "graph": Section("graph-rag retrieval against the classic baseline, every backend and path", _graph, True),
    "docqa": Section("document-retrieval recall on the public doc-QA sets, by the halves protocol", _docqa, True),
    "rerank": Section("the reranker's latency, store round trips and effect on recall", _rerank, True),
    "ingest": Section("ingestion throughput over Pulsar, one worker against two", _ingest, True),
    "communities": Section("the community build's time and peak memory by graph size", _communities, True),
    "documents": Section("lazy-rag and kg-query over 10k to 1M chunks, SQLite and Neo4j", _documents, True),
    "tune": Section("recall of a ranking knob's values on one half of a doc-QA set", _tune),
    "reliability": Section("fuzzed frames, heavy tenants and killed loads against a running kgflow", _reliability),
    "corpora": Section("build (or find cached) one document scale corpus", _corpora, worker=True),
    "documents-measure": Section(
        "measure one backend and size of the documents section", _documents_measure, worker=True
    ),
    "documents-serve": Section("serve one processor of the documents section's fleet", _documents_serve, worker=True),
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
            section.run([])
        return 0
    if name not in SECTIONS:
        print(f"unknown section {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    SECTIONS[name].run(rest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
