"""A fake of everything drift calls: a two-level community hierarchy over six chunks, a small
concept graph, and a scripted model whose replies a test can override (importable helpers)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from processors.base.errors import ServiceError
from processors.models.text_completion.prompting import ModelAnswer
from processors.retrieval.common import Usage
from processors.retrieval.drift import prompts as pr
from schemas.communities import CommunityInfo
from schemas.documents import Chunk, Mention
from schemas.retrieval import RelationshipRef
from schemas.tenant import Tenant

MEMBERS = {"k1": ["c1", "c2", "c3"], "k2": ["c4", "c5", "c6"]}
MENTIONS = {
    "c1": ["azure"],
    "c2": ["azure", "cloud"],
    "c3": ["office"],
    "c4": ["xbox"],
    "c5": ["xbox", "gaming"],
    "c6": ["surface"],
    "n1": ["revenue"],
    "n2": ["revenue"],
}


def vec(text: str) -> list[float]:
    """A deterministic 16-dimensional bag-of-words vector (similar texts, similar vectors)."""
    v = [0.0] * 16
    for w in re.findall(r"\w+", text.lower()):
        v[int(hashlib.md5(w.encode()).hexdigest(), 16) % 16] += 1.0
    return v


def chunk(cid: str) -> Chunk:
    doc = "d2" if cid in MEMBERS["k2"] else "d1"
    return Chunk(id=cid, document_id=doc, text=f"text of {cid} about revenue", title=f"Doc {doc}")


class Fake:
    """DriftSources over the tiny collection; records every call with its tenant."""

    def __init__(self, model: bool = True, communities: list[CommunityInfo] | None = None) -> None:
        self.model = model
        self.calls: list[tuple[str, Tenant | None]] = []
        self.model_calls = 0
        self.summary_calls = 0
        self.prompts: list[tuple[str, str]] = []
        self.communities = (
            communities
            if communities is not None
            else [
                CommunityInfo(id="k1", level=0, score=0.9, top_entity_labels=["Azure"], summary="Cloud."),
                CommunityInfo(id="k2", level=0, score=0.6, top_entity_labels=["Xbox"]),
            ]
        )

    # --- stores ---------------------------------------------------------------------------------
    async def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(("embed", None))
        return [vec(t) for t in texts]

    async def search_communities(self, t: Tenant, vector: list[float], limit: int) -> list[CommunityInfo]:
        self.calls.append(("search_communities", t))
        return self.communities[:limit]

    async def summarize_communities(self, t: Tenant, ids: Sequence[str]) -> tuple[list[CommunityInfo], Usage]:
        self.calls.append(("summarize", t))
        calls = len(ids) if self.model else 0
        self.summary_calls += calls
        found = [c.model_copy(update={"summary": f"summary of {c.id}"}) for c in self.communities if c.id in ids]
        return found, Usage(calls, 10 * calls, 5 * calls)

    async def community_chunks(
        self, t: Tenant, communities: Sequence[str], vector: list[float], text: str, per_community: int
    ) -> dict[str, list[Chunk]]:
        self.calls.append(("community_chunks", t))
        return {k: [chunk(c) for c in MEMBERS.get(k, [])][:per_community] for k in communities if k in MEMBERS}

    async def search_chunks(self, t: Tenant, vector: list[float], text: str | None, limit: int, mode: Any = "fused",
                            communities: Sequence[str] | None = None) -> list[Chunk]:  # fmt: skip
        self.calls.append(("search_chunks", t))
        if not self.communities:
            return []
        ids = [c for k in (communities or MEMBERS) for c in MEMBERS.get(k, [])]
        return [chunk(c) for c in dict.fromkeys(ids)][:limit]

    async def links(
        self, t: Tenant, entities: Sequence[str], chunk_ids: Sequence[str], per_entity: int
    ) -> list[Mention]:
        self.calls.append(("links", t))
        out = [Mention(chunk_id=c, entity=e) for c in chunk_ids for e in MENTIONS.get(c, [])]
        return out + [Mention(chunk_id=c, entity=e) for c, es in MENTIONS.items() for e in es if e in entities]

    async def neighbour_relations(
        self, t: Tenant, entities: Sequence[str], vector: list[float], limit: int
    ) -> list[RelationshipRef]:
        self.calls.append(("neighbour_relations", t))
        return [RelationshipRef(s=e, p="related-to", o="revenue", weight=1.0) for e in entities][:limit]

    async def labels(self, t: Tenant, iris: Sequence[str]) -> dict[str, str]:
        self.calls.append(("labels", t))
        return {i: i.title() for i in iris}

    async def chunks(self, t: Tenant, ids: Sequence[str]) -> list[Chunk]:
        self.calls.append(("chunks", t))
        return [chunk(i) for i in ids]

    # --- the model ------------------------------------------------------------------------------
    async def complete(
        self, system: str, prompt: str, json_schema: dict[str, Any] | None, max_tokens: int | None = None
    ) -> ModelAnswer:
        if not self.model:
            return ModelAnswer("No language model is configured.", configured=False)
        self.model_calls += 1
        self.prompts.append((system, prompt))
        if system == pr.HYDE_SYSTEM:
            return ModelAnswer("Revenue grew in the cloud.", model="fake", in_token=7, out_token=5)
        reply = {pr.PRIMER_SYSTEM: self.primer, pr.LOCAL_SYSTEM: self.local, pr.AGGREGATE_SYSTEM: self.aggregate}
        out = reply[system](prompt)
        await asyncio.sleep(0)
        if isinstance(out, ServiceError):
            raise out
        return ModelAnswer(json.dumps(out), model="fake", in_token=100, out_token=20)

    def primer(self, prompt: str) -> Any:
        return {
            "initial_answer": "Revenue grew.",
            "followups": [
                {"question": "How did Azure revenue grow?", "target_communities": ["K1"]},
                {"question": "How did Xbox revenue change?", "target_communities": ["k2"]},
            ],
            "rationale": "two segments",
        }

    def local(self, prompt: str) -> Any:
        first = valid_ids(prompt)[0]
        return {
            "answer": f"It grew [{first}].",
            "citations": [{"chunk_id": first, "span": "about revenue"}],
            "new_followups": [],
            "confidence": 0.7,
            "should_continue": False,
        }

    def aggregate(self, prompt: str) -> Any:
        tree = json.loads(prompt.split("Q/A tree: ", 1)[1].split("\n</data>")[0])
        cited = [c for f in tree["followups"] for c in f["citations"]]
        return {"final_answer": "Revenue grew.", "key_facts": [{"fact": "Azure grew.", "citations": cited}],
                "residual_uncertainty": "none"}  # fmt: skip


def valid_ids(prompt: str) -> list[str]:
    """The passage handles a local prompt lists as valid."""
    line = next(ln for ln in prompt.splitlines() if ln.startswith("Valid passage ids: "))
    return line.removeprefix("Valid passage ids: ").split(", ")
