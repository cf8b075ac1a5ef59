"""The `llm` extractor's step of a load: one text-completion call per chunk, at most
`concurrency` at once, for the typed relations between the things the chunk names.

A chunk whose call fails or whose reply holds no relations keeps its concepts and
co-occurrences; it is counted, by reason, in the load's warnings. No model configured (or a
misconfigured one) fails the whole load before anything is stored: every chunk would fail the
same way, and the user asked for relations. Bus-free: the model is a `complete` callable.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from processors.algorithms.text_match import title_key
from processors.ingest.extractor.prompts import RELATIONS_MAX_TOKENS, RELATIONS_SCHEMA, RELATIONS_SYSTEM
from processors.ingest.extractor.prompts import relations_prompt as build_prompt
from processors.ingest.extractor.relations import FoundRelation, RelationsParseError, parse_relations
from processors.ingest.extractor.relations import resolve_relations as resolve
from processors.models.text_completion.prompting import ModelAnswer
from schemas.documents import Chunk
from schemas.extraction import ConceptMention

NEEDS_MODEL = (
    "extractor=llm needs a language model, and text-completion has none configured: set the flow "
    "parameter `llm` (local or openai, with `llm-model`) or KGFLOW_LLM, or use extractor=concepts"
)

# (system, prompt, json schema, max tokens) -> the model's answer
Complete = Callable[[str, str, dict[str, Any], int], Awaitable[ModelAnswer]]


class ExtractorNeedsModel(RuntimeError):
    """The `llm` extractor has no usable model (none configured, or misconfigured)."""


class ModelCallFailed(RuntimeError):
    """One model call failed (its `reason` is what the load's warning counts)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class RelationsOutcome:
    """Per chunk: its relations, and the mentions of ends only the model found; what it cost."""

    relations: list[list[FoundRelation]]
    mentions: list[list[ConceptMention]]
    calls: int = 0
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> chunks whose relations were skipped
    dropped: Counter[str] = field(default_factory=Counter)  # reason -> relations dropped

    def warnings(self) -> list[str]:
        """What the step skipped, one line per kind (nothing when all went well)."""
        out = []
        if self.skipped:
            why = ", ".join(f"{n} {reason}" for reason, n in self.skipped.most_common())
            skipped = sum(self.skipped.values())
            out.append(f"llm extractor: relations of {skipped} of {self.calls} chunks skipped ({why})")
        if self.dropped:
            why = ", ".join(f"{n} {reason}" for reason, n in self.dropped.most_common())
            out.append(f"llm extractor: {sum(self.dropped.values())} relations dropped ({why})")
        return out


def known_concepts(chunk: Chunk, found: Sequence[ConceptMention]) -> dict[str, str]:
    """The concept keys of a chunk (its title's first, as indexing adds it) and their labels."""
    known = {}
    if chunk.title and (tk := title_key(chunk.title)) and any(c.isalpha() for c in tk):
        known[tk] = chunk.title
    for m in found:
        known.setdefault(m.key, m.label)
    return known


async def extract_relations(
    complete: Complete,
    chunks: Sequence[Chunk],
    mentions: Sequence[list[ConceptMention]],
    concurrency: int,
    progress: Callable[[str, int], None] = lambda stage, n: None,
) -> RelationsOutcome:
    """Typed relations of each chunk (see the module docstring); `progress("related", 1)` per chunk."""
    out = RelationsOutcome([[] for _ in chunks], [list(m) for m in mentions])
    slots = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        known = known_concepts(chunks[i], mentions[i])
        prompt = build_prompt(chunks[i].text, list(known.values()))
        async with slots:
            out.calls += 1
            try:
                answer = await complete(RELATIONS_SYSTEM, prompt, RELATIONS_SCHEMA, RELATIONS_MAX_TOKENS)
            except ModelCallFailed as e:
                out.skipped[e.reason] += 1
                progress("related", 1)
                return
        if not answer.configured:
            raise ExtractorNeedsModel(NEEDS_MODEL)
        try:
            raw, invalid = parse_relations(answer.text)
        except RelationsParseError:
            out.skipped["reply held no JSON relations"] += 1
            progress("related", 1)
            return
        found, added, dropped = resolve(raw, chunks[i].text, known)
        out.relations[i] = found
        out.dropped.update(dropped)
        out.mentions[i] += added
        if invalid:
            out.dropped["invalid item"] += invalid
        progress("related", 1)

    tasks = [asyncio.create_task(one(i)) for i in range(len(chunks))]
    try:
        await asyncio.gather(*tasks)
    finally:  # a load without a model stops at its first answer: the other calls are not needed
        for t in tasks:
            t.cancel()
    return out
