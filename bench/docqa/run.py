"""Retrieval quality on the public doc-QA sets by the halves protocol (bench/README.md), with the
index cost, the cost of a scope and a few answers by the local model.

    python -m bench docqa [--datasets hotpotqa,musique] [--variants titles,notitles]
                          [--questions N] [--llm-questions N] [--out bench/results.json]

For each set and variant (titles kept; titles removed, text unchanged), in one run: the corpus is
indexed into its own home through the real documents flow, or the cached home is reused
(bench/docqa/homes.py); every question is asked once of lazy-rag, DRIFT and kg-query mix (no
model; kg-query's other modes too with titles kept), of the chunk search by mode (vector,
lexical, fused) and of dense search over the chunk text alone (bench/docqa/dense.py); recall@2/5/10
(distinct documents in rank order, as ../shared/tools/docqa_eval.py counts) is then summarised on
the tuning half and the validation half separately (bench/docqa/halves.py), with each service's
gain over the best of vector, lexical and fused, and lazy-rag's over dense text-only
(bench/docqa/protocol.py). With titles kept, the questions scoped to their own context paragraphs
give the cost of a scope, and lazy-rag and DRIFT answer the first few questions of the first set
with the local model (bench/docqa/llm.py). The section is merged into bench/results.json under
`docqa`, with the ranking defaults (and the half each was chosen on) and the targets.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.docqa.cli_latency import cli_latency
from bench.docqa.collection import COLLECTION, TIMEOUT_S, USER
from bench.docqa.defaults import defaults
from bench.docqa.dense import dense_text_only
from bench.docqa.homes import SETS, VARIANTS, corpus_lines, indexed_home, questions
from bench.docqa.llm import local_model_figures
from bench.docqa.protocol import HALVES, split_ids, summarise_half, targets
from bench.docqa.quality import KG_MODES, ask_all, scope_cost
from bench.harness.results import RESULTS, write_section
from bench.harness.stats import load_average
from processors.base.settings import RuntimeSettings
from processors.commands.system import embedded
from processors.stores.settings import StoreSettings
from schemas.documents import Document


def log(msg: str) -> None:
    """Progress on stderr."""
    print(msg, file=sys.stderr, flush=True)


async def bench_variant(name: str, variant: str, limit: int | None, llm_questions: int = 0) -> dict[str, Any]:
    """One variant of one set: its (cached) index, then every figure of the protocol."""
    built = await indexed_home(name, variant, log)
    qs = questions(name)[:limit]
    docs = [Document.model_validate_json(x) for x in corpus_lines(name, variant)]
    load_at_start = load_average()
    out: dict[str, Any] = {
        "titles": "kept" if variant == "titles" else "dropped (text unchanged)",
        "index": {**built.cost, "built_in_this_run": built.built_now, "home": built.home.name},
    }
    async with embedded(StoreSettings(home=built.home), RuntimeSettings(request_timeout_s=TIMEOUT_S)) as system:
        dense = await dense_text_only(built.home, system.stores.documents, docs, built.cost["chunks"])
        log(f"[docqa] {name}/{variant}: {len(qs)} questions")
        asked = await ask_all(system, qs, dense, KG_MODES if variant == "titles" else ("mix",))
        split = split_ids(qs)
        out["halves"] = {half: summarise_half(asked.recall, split[half]) for half in HALVES}
        out["latency"] = asked.latency()
        if variant == "titles":
            out["scope_cost"] = await scope_cost(system, qs)
    # the same questions through `kgflow query` (a child process on the same home), as a CLI user
    # and docqa_eval.py see them (bench/docqa/cli_latency.py)
    texts = [str(q["question"]) for q in qs]
    in_process = out["latency"]["lazy_rag"]["p50_ms"]
    out["latency"]["lazy_rag"]["cli"] = await cli_latency(built.home, texts, USER, COLLECTION, in_process)
    out["load_average"] = {"start": load_at_start, "end": load_average()}
    if llm_questions:
        out["with_local_model"] = await local_model_figures(built.home, qs[:llm_questions], log)
    out["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return out


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the documents benchmark and merge it into the results file."""
    ap = argparse.ArgumentParser(prog="python -m bench docqa", description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=",".join(SETS))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--questions", type=int, default=None, help="questions per set (default all; both halves)")
    ap.add_argument("--llm-questions", type=int, default=3, help="questions answered with the local model")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    load_at_start = load_average()
    began = time.perf_counter()
    earlier = json.loads(a.out.read_text()).get("docqa", {}) if a.out.exists() else {}
    section: dict[str, Any] = {k: v for k, v in earlier.items() if k in SETS}  # a partial run keeps the rest
    for i, name in enumerate(a.datasets.split(",")):
        figures = section[name] if isinstance(section.get(name), dict) and "index" not in section[name] else {}
        for variant in a.variants.split(","):
            llm = a.llm_questions if i == 0 and variant == "titles" else 0
            figures[variant] = await bench_variant(name, variant, a.questions, llm)
        section[name] = figures
    section["defaults"] = defaults()
    section["run"] = {
        "wall_s": round(time.perf_counter() - began, 1),
        "llm": "none at index time and for recall (no_llm); with_local_model: SmolLM2-135M (llama.cpp)",
        "protocol": "bench/README.md (documents): halves by bench/docqa/halves.py, gains over the best of "
        "vector, lexical and fused per half",
    }
    section["targets"] = targets(section)
    write_section(a.out, "docqa", section, load_at_start)
    return section
