"""graphrank: multi-hop chunk ranking without a model, over the bounded neighbourhood a store
returns for one question (dense + BM25 relevance, and question-aware hops over the chunk-concept
graph).

A multi-hop question names one thing and asks about another: its first passage is found by text
similarity, its bridge passage is the one *about* something the first passage names. So:

1. The store's candidates: its vector index's `candidates` nearest chunks and its full-text
   index's `candidates` best BM25 chunks (the scope inside both queries), with the chunks whose
   subject is a concept the question names. rel = z(cosine) + `w_lex` * z(BM25), both z-scored over
   those candidates (the same pool whatever the collection's size: a collection 100x larger
   changes who competes, not the scale of the scores); a chunk outside the lexical hits has BM25 0;
   the subject chunks of a named concept get `title_boost` (the question names their subject).
2. The best `seeds` candidates get seed mass softmax(rel / tau).
3. Each seed passes its mass to the chunks it links to — strongly to the chunks whose subject is a
   concept it mentions or names, weakly (`w_concept_link` * idf / ln N) to chunks sharing a rarer
   concept — in proportion to link weight * exp(rel / tau) of the target, so the hop stays on the
   question. Concepts the question names, and concepts in more than
   min(max(3, `max_df` * N), `max_concept_chunks`) chunks, carry no hop (they say nothing new), and
   what a hop reaches only through them is not ranked; the store reads no more than that many
   chunks of any concept, so a hop's read is bounded.
4. A further hop (`hops`) starts from the best chunks the previous one reached, with their hop
   mass (times `hop_decay`): a chain of three or four passages reaches its last passage.
5. Chunks rank by seed + `beta` * hop mass; chunks with no mass follow by rel.

One batched store read per hop, one for the candidates: no question reads a whole collection,
and both backends rank alike (this module ranks what either returns). Measured on the public
doc-QA sets with MiniLM, the bounded pool ranks as the whole-collection index did (HotpotQA
recall@5 0.932 against 0.925; see bench/README.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from pydantic import BaseModel, Field

from processors.algorithms.text_match import STOPWORDS, normalize
from schemas.documents import Chunk
from schemas.retrieval import DocumentRef

MAX_NAME_WORDS = 8  # a concept's name longer than this is not looked for in text


class PassageRankParams(BaseModel):
    """The knobs of graphrank (flow parameters of the documents service)."""

    w_lex: float = Field(default=0.3, ge=0)
    title_boost: float = Field(default=3.0, ge=0)
    seeds: int = Field(default=10, ge=1)
    tau: float = Field(default=1.0, gt=0)
    beta: float = Field(default=1.0, ge=0)
    w_title_link: float = Field(default=1.0, ge=0)
    w_concept_link: float = Field(default=0.05, ge=0)
    max_df: float = Field(default=0.02, ge=0)
    hops: int = Field(default=2, ge=0, le=4)  # hops out of the seeds (a chain's next passage per hop)
    hop_decay: float = Field(default=1.0, ge=0)  # a further hop starts from its sources' mass times this
    candidates: int = Field(default=100, ge=1, le=2000)  # nearest and best-BM25 chunks the store returns, each
    max_concept_chunks: int = Field(default=64, ge=3, le=10_000)  # a concept in more chunks carries no hop


@dataclass(frozen=True)
class Passage:
    """A chunk as the store found it for one question: its cosine to the question and its BM25
    score (0 when it is not among the lexical hits)."""

    id: str
    dense: float
    lexical: float = 0.0


@dataclass
class ConceptLinks:
    """A concept as seen from the chunks of a hop: how many searched chunks mention it (`df`,
    counted up to the cap: more means it carries no hop), the chunks whose subject it is, and
    the chunks that mention it (read only when `df` is within the cap)."""

    df: int
    subjects: list[str] = field(default_factory=list)
    chunks: list[str] = field(default_factory=list)


@dataclass
class HopLinks:
    """What one hop read returns: the concepts each source chunk mentions or names, those
    concepts' links, and a `Passage` (its cosine) for every chunk the links reach."""

    concepts_of: dict[str, list[str]] = field(default_factory=dict)
    concepts: dict[str, ConceptLinks] = field(default_factory=dict)
    passages: list[Passage] = field(default_factory=list)


Named = dict[str, tuple[str, list[Passage]]]  # concept key -> (concept, its subject chunks)


@dataclass
class Candidates:
    """The store's candidates for a question, the number of chunks searched (the collection's, or
    its scope's) and, when phrases were given, the concepts they name (`PassageSource.named`)."""

    passages: list[Passage]
    searched: int
    named: Named = field(default_factory=dict)


class PassageSource(Protocol):
    """What graphrank reads from a store, for one question (its vector), tenant and scope."""

    async def candidates(self, terms: Sequence[str], k: int, phrases: Sequence[str] = ()) -> Candidates:
        """The `k` nearest chunks by vector and the `k` best by BM25 over `terms`, merged, with
        the concepts `phrases` name (as `named`), in one store read."""
        ...

    async def named(self, phrases: Sequence[str]) -> Named:
        """Of `phrases` (normalised word runs), those that are a concept's key in the searched
        chunks: key -> (concept, the chunks whose subject it is)."""
        ...

    async def links(self, chunk_ids: Sequence[str], skip: set[str], cap: int, known: set[str]) -> HopLinks:
        """The hop links of `chunk_ids` (concepts in `skip` left out, concepts in more than `cap`
        chunks without their chunks), with a `Passage` for each reached chunk not in `known`."""
        ...


def question_phrases(question: str) -> list[str]:
    """Every run of up to MAX_NAME_WORDS normalised words of the question that is not a
    stopword alone: the names a concept key must equal to be named by the question."""
    words = normalize(question).split()
    runs = (" ".join(words[i : i + n]) for n in range(1, MAX_NAME_WORDS + 1) for i in range(len(words) - n + 1))
    return list(dict.fromkeys(r for r in runs if r not in STOPWORDS))


def name_runs(text: str) -> list[str]:
    """The word runs of `text` a concept's key may equal (up to MAX_NAME_WORDS words, not
    starting or ending with a stopword)."""
    words = normalize(text).split()
    out: dict[str, None] = {}
    for i, first in enumerate(words):
        if first in STOPWORDS:
            continue
        for j in range(i, min(len(words), i + MAX_NAME_WORDS)):
            if words[j] not in STOPWORDS:
                out.setdefault(" ".join(words[i : j + 1]), None)
    return list(out)


def maximal(keys: Iterable[str]) -> list[str]:
    """The keys not contained, as whole words, in a longer one of them."""
    found = set(keys)
    return sorted(k for k in found if not any(k != o and f" {k} " in f" {o} " for o in found))


class PassageRanking:
    """graphrank's state for one question (steps 1-5 of the module docstring)."""

    def __init__(self, candidates: Candidates, boosted: set[str], p: PassageRankParams) -> None:
        self.p, self.n = p, max(candidates.searched, 1)
        pool = candidates.passages
        dense = np.array([x.dense for x in pool], dtype=np.float64)
        lexical = np.array([x.lexical for x in pool], dtype=np.float64)
        self._dense = (dense.mean(), dense.std() + 1e-9) if len(pool) else (0.0, 1.0)
        self._lexical = (lexical.mean(), lexical.std() + 1e-9) if len(pool) else (0.0, 1.0)
        self.boosted = boosted
        self.rel: dict[str, float] = {}
        self.mass: dict[str, float] = {}
        self.add(pool)

    @property
    def cap(self) -> int:
        """The most chunks a concept may be in and still carry a hop."""
        return int(min(max(3.0, self.p.max_df * self.n), self.p.max_concept_chunks))

    def add(self, passages: Iterable[Passage]) -> None:
        """Relevance of chunks not seen yet."""
        (dm, ds), (lm, ls) = self._dense, self._lexical
        for x in passages:
            if x.id not in self.rel:
                boost = self.p.title_boost if x.id in self.boosted else 0.0
                self.rel[x.id] = (x.dense - dm) / ds + self.p.w_lex * (x.lexical - lm) / ls + boost

    def seeds(self) -> tuple[list[str], list[float]]:
        """The best `seeds` chunks and their seed mass (softmax of rel / tau), now in `mass`."""
        best = sorted(self.rel, key=lambda c: (-self.rel[c], c))[: self.p.seeds]
        if not best:
            return [], []
        top = self.rel[best[0]]
        weights = [math.exp((self.rel[c] - top) / self.p.tau) for c in best]
        total = sum(weights)
        masses = [w / total for w in weights]
        for c, m in zip(best, masses, strict=True):
            self.mass[c] = self.mass.get(c, 0.0) + m
        return best, masses

    def spread(
        self, sources: Sequence[str], masses: Sequence[float], hop: HopLinks, named: set[str]
    ) -> dict[str, float]:
        """The mass each chunk receives from one hop out of `sources` (added to `mass`). Only the
        chunks a source links to join the ranking: a chunk reached through a concept that carries
        no hop (named, or in too many chunks) is no nearer the question for it."""
        links_of = {i: self._links(i, hop, named) for i in dict.fromkeys(sources)}
        linked = {j for links in links_of.values() for j in links}
        self.add(x for x in hop.passages if x.id in linked)
        received: dict[str, float] = {}
        for i, m_i in zip(sources, masses, strict=True):
            links = dict(links_of[i])
            links.pop(i, None)
            targets = [j for j in links if j in self.rel]
            if not targets:
                continue
            top = max(self.rel[j] for j in targets)
            weights = [links[j] * math.exp((self.rel[j] - top) / self.p.tau) for j in targets]
            total = sum(weights)
            if total > 0:  # links of zero weight (a concept in every chunk) carry nothing
                for j, w in zip(targets, weights, strict=True):
                    received[j] = received.get(j, 0.0) + m_i * w / total
        for j, m in received.items():
            self.mass[j] = self.mass.get(j, 0.0) + m
        return received

    def _links(self, i: str, hop: HopLinks, named: set[str]) -> dict[str, float]:
        """Chunk j -> the strongest link weight from chunk i (subject links, then rarer shared concepts)."""
        links: dict[str, float] = {}
        ln_n = math.log(max(self.n, 2))
        for c in hop.concepts_of.get(i, ()):
            found = hop.concepts.get(c)
            if found is None or c in named or found.df > self.cap:
                continue
            for j in found.subjects:
                links[j] = max(links.get(j, 0.0), self.p.w_title_link)
            if self.p.w_concept_link:
                w = self.p.w_concept_link * math.log(max(self.n, 2) / max(found.df, 1)) / ln_n
                for j in found.chunks:
                    if links.get(j, 0.0) < w:
                        links[j] = w
        return links

    def ranked(self, limit: int) -> list[tuple[str, float]]:
        """The best `limit` chunks: by mass, then (no mass) by rel; score = mass (+ a tie-break
        below 1e-9 from rel)."""
        if not self.rel:
            return []
        lo, hi = min(self.rel.values()), max(self.rel.values())
        span = (hi - lo) + 1e-9
        score = {c: self.mass.get(c, 0.0) + 1e-9 * (r - lo) / span for c, r in self.rel.items()}
        return sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]


async def rank_passages(
    source: PassageSource, question: str, terms: Sequence[str], limit: int, p: PassageRankParams
) -> list[tuple[str, float]]:
    """(chunk id, score) of the best `limit` chunks for `question` (see the module docstring):
    one store read for the candidates and the named concepts, one per hop."""
    candidates = await source.candidates(terms, p.candidates, question_phrases(question))
    names = candidates.named
    named_keys = maximal(names)
    named = {names[k][0] for k in named_keys}
    subjects = {x.id: x for k in named_keys for x in names[k][1]}
    hits = {x.id for x in candidates.passages}
    candidates.passages += [x for c, x in subjects.items() if c not in hits]  # a named subject always competes
    ranking = PassageRanking(candidates, set(subjects), p)
    sources, masses = ranking.seeds()
    seeds = set(sources)
    masses = [p.beta * m for m in masses]
    for _ in range(p.hops):
        if not sources:
            break
        hop = await source.links(sources, named, ranking.cap, set(ranking.rel))
        received = ranking.spread(sources, masses, hop, named)
        onward = sorted((j for j in received if j not in seeds), key=lambda j: (-received[j], j))[: p.seeds]
        sources, masses = onward, [p.hop_decay * received[j] for j in onward]
    return ranking.ranked(limit)


def documents_of(chunks: Sequence[Chunk]) -> list[DocumentRef]:
    """The distinct documents of ranked chunks, in the order their best chunk comes."""
    out: dict[str, DocumentRef] = {}
    for c in chunks:
        if c.document_id not in out:
            out[c.document_id] = DocumentRef(id=c.document_id, title=c.title, score=c.score or 0.0)
    return list(out.values())
