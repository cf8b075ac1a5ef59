"""One DRIFT search (bus-free): primer, ranked follow-ups in passes, aggregation.

1. Expand: a HyDE paragraph (one model call, when the budget has room) and the vector of the
   question and the paragraph.
2. Primer: communities and sample chunks (retrieve.py); lazy summaries for a few of them (the
   communities service writes and caches them; the calls count against the budget); the primer
   answer and 2-6 follow-ups with target communities (structured output). Without a model, or
   when the primer gives none, each primer community gets the question itself as its follow-up.
3. Follow-ups: up to `passes` rounds; each round ranks what is pending (followups.py) and runs the
   best `max_followups` concurrently (never more than the budget allows while keeping a call
   for the aggregation): scoped chunks and neighbourhood, then a local answer with citations,
   confidence, should_continue and 0-3 new follow-ups (queued when it should continue).
4. Aggregation: final answer, key facts with citations, residual uncertainty (one call); the
   citations of every stage are resolved against every chunk retrieved (citations.py).

A model output that does not parse (e.g. cut short by `max_tokens`) costs its call and is
ignored: the search goes on with what it has. A store or model failure is a ServiceError.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from processors.algorithms.wording import plural
from processors.base.errors import ServiceError
from processors.retrieval.common import Stopwatch
from processors.retrieval.drift import prompts as pr
from processors.retrieval.drift.citations import CitationBook
from processors.retrieval.drift.followups import Budget, Pending, Ranked, hyde_fits, rank_followups, summaries_fit
from processors.retrieval.drift.progress import Progress, document_names
from processors.retrieval.drift.retrieve import Neighbourhood, Primer, followup_context, primer_context
from processors.retrieval.drift.settings import DriftSettings
from processors.retrieval.drift.sources import DriftSources
from schemas.communities import CommunityInfo
from schemas.documents import Chunk
from schemas.drift import DriftRequest, DriftStats, FollowUp, KeyFact
from schemas.retrieval import Citation, RelationshipRef
from schemas.tenant import Tenant

PROMPT_RELATIONS = 15
PROMPT_ENTITIES = 15


class Search:
    """The state of one DRIFT search; `run` fills it."""

    def __init__(self, sources: DriftSources, s: DriftSettings, req: DriftRequest, progress: Progress) -> None:
        self.sources, self.s, self.req, self.progress = sources, s, req, progress
        self.t = Tenant(req.user, req.collection, req.scope)
        self.book = CitationBook()
        self.budget = Budget(s.max_llm_calls)
        self.stats = DriftStats(max_llm_calls=s.max_llm_calls)
        self.use_model = not req.no_llm
        self.model: str | None = None
        self.watch = Stopwatch()
        self.vectors: dict[str, list[float]] = {}
        self.primer: Primer | None = None
        self.communities: list[CommunityInfo] = []
        self.initial_answer = ""
        self.tree: list[FollowUp] = []
        self.rankings: list[list[str]] = []  # chunk ids per retrieval, for the final ranking
        self.neighbours: list[str] = []
        self.entities: dict[str, float] = {}
        self.labels: dict[str, str] = {}
        self.relations: dict[tuple[str, str, str], RelationshipRef] = {}
        self.final_answer = ""
        self.key_facts: list[KeyFact] = []
        self.residual = ""

    async def run(self) -> bool:
        """Search; False when nothing in scope matches (no communities, no chunks)."""
        self.progress.phase("initializing", f"Starting a DRIFT search of collection {self.t.collection!r}")
        vector = await self._expand()
        self.progress.phase("retrieving_communities", "Finding the communities nearest the question")
        self.primer = await primer_context(self.sources, self.t, vector, self.req.query, self.s)
        self.watch.lap("primer_retrieval")
        if not self.primer.communities and not self.primer.fallback:
            return False
        self.communities = await self._summaries(self.primer.communities)
        pending = await self._primer(self.primer.chunks())
        await self._followups(pending)
        await self._aggregate()
        return True

    # --- model calls ------------------------------------------------------------------------
    async def _call(self, system: str, prompt: str, schema: dict[str, Any] | None, max_tokens: int) -> str | None:
        """One model call if there is a model and budget; None otherwise or when the output does
        not conform (that call still counts)."""
        if not self.use_model or not self.budget.take():
            return None
        try:
            done = await self.sources.complete(system, prompt, schema, max_tokens)
        except ServiceError as e:
            if e.type != "schema-mismatch":
                raise
            self.stats.llm_calls += 1
            self.stats.unusable_outputs += 1
            return None
        if not done.configured:  # no model: nothing was called
            self.use_model = False
            self.budget.give_back()
            return None
        self.stats.llm_calls += 1
        self.stats.in_token += done.in_token
        self.stats.out_token += done.out_token
        self.model = done.model or self.model
        return done.text

    async def _ask(self, system: str, prompt: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        """A structured model call: the parsed JSON object, or None."""
        text = await self._call(system, prompt, schema, self.s.max_tokens)
        if text is None:
            return None
        try:
            out = json.loads(text, strict=False)
        except ValueError:
            self.stats.unusable_outputs += 1
            return None
        return out if isinstance(out, dict) else None

    # --- phases -----------------------------------------------------------------------------
    async def _expand(self) -> list[float]:
        """The search vector: the question's and, when written, the HyDE paragraph's, averaged."""
        hyde_planned = self.use_model and hyde_fits(self.s.max_llm_calls)
        self.progress.phase(
            "expanding_query",
            "Writing a hypothetical answer to widen the search" if hyde_planned else "Embedding the question",
        )
        hyde = ""
        if hyde_planned:
            text = await self._call(
                pr.HYDE_SYSTEM, pr.hyde_prompt(self.req.query), None, min(pr.HYDE_TOKENS, self.s.max_tokens)
            )
            hyde = (text or "").strip()
        texts = [self.req.query, *([hyde] if hyde else [])]
        vectors = await self.sources.embed_texts(texts)
        self.vectors[self.req.query] = vectors[0]
        self.watch.lap("expand")
        return _mean(vectors)

    async def _summaries(self, communities: list[CommunityInfo]) -> list[CommunityInfo]:
        """The communities, with lazy summaries written for as many as the budget allows."""
        uncached = [c.id for c in communities if c.summary is None]
        n = summaries_fit(self.budget.left, self.s.max_summaries, len(uncached)) if self.use_model else 0
        if n == 0 or not self.budget.take(n):
            return communities
        written, usage = await self.sources.summarize_communities(self.t, uncached[:n])
        self.budget.give_back(max(0, n - usage.calls))
        self.stats.llm_calls += usage.calls
        self.stats.summaries_written = usage.calls
        self.stats.in_token += usage.in_token
        self.stats.out_token += usage.out_token
        self.watch.lap("summaries")
        summary = {c.id: c.summary for c in written}
        return [c.model_copy(update={"summary": summary.get(c.id) or c.summary}) for c in communities]

    async def _primer(self, samples: list[Chunk]) -> list[Pending]:
        """The primer answer and its follow-ups (or one per community without a model)."""
        self.book.add(samples)
        self.rankings.append([c.id for c in samples])
        handles = [(f"K{i + 1}", c) for i, c in enumerate(self.communities)]
        out = None
        if self.use_model:
            shown = self.book.handles(samples[: self.s.prompt_chunks])
            prompt = pr.primer_prompt(self.req.query, handles, shown, self.s.prompt_chunk_chars)
            out = await self._ask(pr.PRIMER_SYSTEM, prompt, pr.primer_schema(self.s.max_tokens))
        self.watch.lap("primer")
        pending: list[Pending] = []
        if out:
            self.initial_answer = str(out.get("initial_answer") or "").strip()
            names = {h: c.id for h, c in handles} | {c.id.upper(): c.id for c in self.communities}
            for f in out.get("followups") or []:
                question = str(f.get("question") or "").strip() if isinstance(f, dict) else ""
                if question:
                    cited = f.get("target_communities") or []
                    targets = [names[x.strip("[] ").upper()] for x in cited if isinstance(x, str)
                               and x.strip("[] ").upper() in names]  # fmt: skip
                    targets = list(dict.fromkeys(targets)) or [c.id for c in self.communities]
                    pending.append(Pending(question, targets, 1, self._relevance(targets)))
        if not pending:  # no model, or no usable follow-ups: the question searched in each community
            pending = [Pending(self.req.query, [c.id], 1, self._relevance([c.id])) for c in self.communities]
            pending = pending or [Pending(self.req.query, [], 1, 0.5)]
        return pending

    def _relevance(self, targets: list[str]) -> float:
        """How near the question the target communities are (their mean search score)."""
        scores = [c.score or 0.0 for c in self.communities if c.id in targets]
        return min(1.0, max(0.0, sum(scores) / len(scores))) if scores else 0.5

    async def _followups(self, pending: list[Pending]) -> None:
        """Up to `passes` rounds of the best pending follow-ups, each round run concurrently."""
        answered: list[Pending] = []
        room = (self.budget.left - 1) if self.use_model else len(pending)
        self.progress.plan(min(self.s.passes * self.s.max_followups, max(room, 0)))
        if self.use_model:
            what = f"{plural(len(pending), 'follow-up question')} to consider"
        else:  # no follow-up questions without a model: the question itself, searched in each community
            what = f"No language model: searching the question in {plural(len(pending), 'community', 'communities')}"
        self.progress.phase("executing_followup", what)
        for _ in range(self.s.passes):
            width = min(self.s.max_followups, self.budget.left - 1) if self.use_model else self.s.max_followups
            if not pending or width <= 0:
                break
            await self._embed(pending)
            picked = rank_followups(pending, answered, self.s.novelty_weight, self.s.min_novelty, width)
            if not picked:
                break
            chosen = {id(r.item) for r in picked}
            pending = [p for p in pending if id(p) not in chosen]
            for node, new in await self._run_pass(picked):
                if self.use_model:  # without one, a community search is not a follow-up question to offer
                    self.tree.append(node)
                pending += new
            answered += [r.item for r in picked]
        self.stats.followups_run = len(self.tree)
        self.stats.followups_skipped = len(pending)
        self.watch.lap("followups")

    async def _embed(self, pending: list[Pending]) -> None:
        """Vectors of the pending questions (one call for those not embedded yet)."""
        todo = list(dict.fromkeys(p.question for p in pending if p.question not in self.vectors))
        if todo:
            self.vectors.update(zip(todo, await self.sources.embed_texts(todo), strict=True))
        for p in pending:
            p.vector = self.vectors[p.question]

    async def _run_pass(self, picked: list[Ranked]) -> list[tuple[FollowUp, list[Pending]]]:
        """Run follow-ups concurrently; the first failure cancels the others and is raised."""
        try:
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(self._one(r)) for r in picked]
        except BaseExceptionGroup as eg:
            raise _first(eg) from None
        return [t.result() for t in tasks]

    async def _one(self, ranked: Ranked) -> tuple[FollowUp, list[Pending]]:
        """One follow-up: its context, then (with a model) its local answer."""
        p = ranked.item
        nb = await followup_context(self.sources, self.t, p.question, p.vector, p.targets, self.s)
        self._collect(nb)
        node = FollowUp(question=p.question, target_communities=p.targets, depth=p.depth, priority=ranked.priority,
                        chunks=[c.id for c in nb.chunks])  # fmt: skip
        new: list[Pending] = []
        out = None
        if nb.chunks:  # nothing retrieved: no call
            out = await self._ask(
                pr.LOCAL_SYSTEM, self._local_prompt(p.question, nb), pr.local_schema(self.s.max_tokens)
            )
        if out:
            node.answer = str(out.get("answer") or "").strip()
            node.citations = self.book.cite_all(out.get("citations") or [])
            node.confidence = _unit(out.get("confidence"))
            node.should_continue = out.get("should_continue") is True
            if node.should_continue:
                asks = [str(q).strip() for q in (out.get("new_followups") or [])[:3] if str(q).strip()]
                new = [Pending(q, p.targets, p.depth + 1, node.confidence) for q in asks]
        if self.use_model:
            self.progress.followup_done(node)
        else:
            self.progress.community_searched(p.targets, len(nb.chunks))
        return node, new

    def _collect(self, nb: Neighbourhood) -> None:
        """Keep what a follow-up retrieved: chunks (for citations and ranking) and the graph."""
        self.book.add(nb.chunks)
        self.book.add(nb.neighbours)
        self.book.add_ids(nb.neighbour_ids)
        self.rankings.append([c.id for c in nb.chunks])
        self.neighbours += [c.id for c in nb.neighbours]
        for e, w in nb.entities:
            self.entities[e] = self.entities.get(e, 0.0) + w
        self.labels.update(nb.labels)
        for r in nb.relations:
            self.relations.setdefault((r.s, r.p, r.o), r)

    def _local_prompt(self, question: str, nb: Neighbourhood) -> str:
        shown = self.book.handles((nb.chunks + nb.neighbours)[: self.s.prompt_chunks])
        entities = [self.labels.get(e, e) for e, _ in nb.entities[:PROMPT_ENTITIES]]
        relations = [f"{r.s_label or r.s} | {r.p_label or r.p} | {r.o_label or r.o}" for r in nb.relations]
        return pr.local_prompt(question, shown, entities, relations[:PROMPT_RELATIONS], self.s.prompt_chunk_chars)

    async def _aggregate(self) -> None:
        """The final answer, key facts with validated citations and the residual uncertainty."""
        answered = [n for n in self.tree if n.answer]
        cited = [c for n in answered for c in n.citations]
        self.progress.phase(
            "aggregating_results",
            f"Combining the primer and {plural(len(answered), 'follow-up answer')}"
            if self.use_model
            else "No language model: ranking the passages the searches found",
            document_names(cited),
        )
        if not self.use_model or not (self.initial_answer or answered):
            return
        tree = {
            "primer": {"answer": self.initial_answer},
            "followups": [
                {"question": n.question, "answer": n.answer, "confidence": n.confidence,
                 "citations": [self.book.handle_of(c if isinstance(c, str) else c.chunk_id) for c in n.citations],
                 "passages": [self.book.handle_of(c) for c in n.chunks[: self.s.prompt_chunks]]}
                for n in answered
            ],
        }  # fmt: skip
        out = await self._ask(
            pr.AGGREGATE_SYSTEM, pr.aggregate_prompt(self.req.query, tree), pr.aggregate_schema(self.s.max_tokens)
        )
        self.watch.lap("aggregate")
        if out:
            self.final_answer = str(out.get("final_answer") or "").strip()
            for f in out.get("key_facts") or []:
                fact = str(f.get("fact") or "").strip() if isinstance(f, dict) else ""
                if fact:
                    self.key_facts.append(KeyFact(fact=fact, citations=self.book.cite_all(f.get("citations") or [])))
            self.residual = str(out.get("residual_uncertainty") or "").strip()
        if not self.final_answer:  # no usable aggregation: the answers as they are
            best = sorted(answered, key=lambda n: -n.confidence)
            self.final_answer = self.initial_answer or (best[0].answer if best else "")
            self.key_facts = self.key_facts or [KeyFact(fact=n.answer, citations=n.citations) for n in best]

    def citations(self) -> list[Citation]:
        """Every enriched citation of the key facts once (those of the follow-ups if none)."""
        cited = [c for f in self.key_facts for c in f.citations] or [c for n in self.tree for c in n.citations]
        return list({c.chunk_id: c for c in cited if isinstance(c, Citation)}.values())


def _first(eg: BaseExceptionGroup) -> BaseException:  # type: ignore[type-arg]
    """The first real failure in a (nested) exception group."""
    for e in eg.exceptions:
        if isinstance(e, BaseExceptionGroup):
            return _first(e)
        if not isinstance(e, asyncio.CancelledError):
            return e
    return eg.exceptions[0]


def _unit(x: object) -> float:
    if not isinstance(x, int | float | str):  # a model's JSON: anything
        return 0.0
    try:
        v = float(x)
    except (TypeError, ValueError):
        return 0.0
    return min(1.0, max(0.0, v)) if math.isfinite(v) else 0.0


def _mean(vectors: list[list[float]]) -> list[float]:
    """The mean of unit-normalised vectors."""
    units = []
    for v in vectors:
        n = math.sqrt(sum(x * x for x in v)) or 1.0
        units.append([x / n for x in v])
    return [sum(col) / len(units) for col in zip(*units, strict=True)]
