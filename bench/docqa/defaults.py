"""Where each ranking default came from: every default the bench reports says the half it was
chosen on. The values live once, in the processors' settings models; this file holds only
their provenance, and the bench reports both side by side. Whoever changes a default after tuning
with `python -m bench tune` updates its label here (a test checks every knob has one)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from processors.algorithms.passage_rank import PassageRankParams
from processors.retrieval.lazy_rag.retrieve import LazyRagSettings

# A label starts with one of these.
TUNING = "tuning half"  # chosen on the tuning halves only (the validation halves confirm it)
IN_SAMPLE = "in-sample"  # chosen before the split, on questions that now sit in both halves
NOT_TUNED = "not tuned"  # a bound, a protocol constant or a knob that does not change the ranked chunks
KINDS = (TUNING, IN_SAMPLE, NOT_TUNED)

_RESEARCH = f"{IN_SAMPLE}: every question of hotpotqa and musique (chosen before the split)"
_HOPS = f"{IN_SAMPLE}: every question of musique, hotpotqa checked unchanged (chosen before the split)"
_BOUND = f"{NOT_TUNED}: a read bound (scale), checked to rank as the whole collection did on every question"
_ENTITIES = f"{NOT_TUNED}: ranks lazy-rag's entities and context, not its chunks (the recall measured here)"

CHOSEN_ON: dict[str, dict[str, str]] = {
    "documents": {  # processors/algorithms/passage_rank.py PassageRankParams
        "w_lex": _RESEARCH,
        "title_boost": _RESEARCH,
        "seeds": _RESEARCH,
        "tau": _RESEARCH,
        "beta": _RESEARCH,
        "w_title_link": _RESEARCH,
        "w_concept_link": _RESEARCH,
        "max_df": _RESEARCH,
        "hops": _HOPS,
        "hop_decay": _HOPS,
        "candidates": _BOUND,
        "max_concept_chunks": _BOUND,
    },
    "lazy-rag": {  # processors/retrieval/lazy_rag/retrieve.py LazyRagSettings
        "max_hops": _ENTITIES,
        "max_entities": _ENTITIES,
        "chunk_limit": f"{NOT_TUNED}: a protocol constant (10 chunks, for recall@10)",
        "use_communities": _ENTITIES,
        "timeout_s": f"{NOT_TUNED}: a time limit",
        "stage_timeout_s": f"{NOT_TUNED}: a time limit",
        "search_depth": _ENTITIES,
        "seed_entities": _ENTITIES,
        "per_entity": _ENTITIES,
        "chunk_seed_weight": _ENTITIES,
        "reranker": f"{IN_SAMPLE}: every question of hotpotqa and musique (the rerank section measures each)",
        "rerank_depth": f"{NOT_TUNED}: used only with a reranker",
        "bridge_seeds": f"{TUNING}: 0 vs 2 on both sets' tuning halves, titles kept and removed; 2 confirmed",
        "bridge_names": f"{NOT_TUNED}: used only with bridge_seeds",
        "bridge_depth": f"{NOT_TUNED}: used only with bridge_seeds",
        "bridge_sentences": f"{TUNING}: 0 (off) kept, against 1-3 (bench/docqa/METHODS.md, rows 25, 33)",
        "decompose_hops": f"{TUNING}: 0 (off) kept, against 2-3 (bench/docqa/METHODS.md, rows 24, 27-32)",
        "bridge_next_hop": f"{TUNING}: off (false) kept, against on (bench/docqa/METHODS.md, row 34)",
        "hop_seeds": f"{NOT_TUNED}: used only with decompose_hops",
        "hop_names": f"{NOT_TUNED}: used only with decompose_hops",
        "first_hop_weight": f"{NOT_TUNED}: used only with decompose_hops",
        "hop_weight": f"{NOT_TUNED}: used only with decompose_hops",
    },
}

MODELS: dict[str, type[BaseModel]] = {"documents": PassageRankParams, "lazy-rag": LazyRagSettings}


def defaults() -> dict[str, dict[str, dict[str, Any]]]:
    """Every ranking knob's default value (from its settings model) and where it was chosen."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for processor, model in MODELS.items():
        values = model().model_dump(mode="json")
        labels = CHOSEN_ON[processor]
        out[processor] = {name: {"value": values[name], "chosen_on": labels.get(name)} for name in values}
    return out
