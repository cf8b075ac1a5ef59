"""drift's algorithm over fake sources: hallucinated citations dropped and counted, enrichment
from the full retrieved set, follow-ups ranked (not shuffled), the model-call budget, no data,
the tenant and scope on every store call, progress order and percentages, cancellation,
no model, unusable model output and typed failures."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from processors.base.errors import ServiceError
from processors.retrieval.drift.drift import Drift
from processors.retrieval.drift.followups import Pending, rank_followups
from processors.retrieval.drift.prompts import NO_MODEL_PREFIX
from processors.retrieval.drift.settings import DriftSettings
from schemas.documents import Scope
from schemas.drift import DriftProgress, DriftRequest, DriftResponse
from schemas.retrieval import Citation
from schemas.tenant import Tenant
from tests.documents.drift_fakes import MEMBERS, Fake, valid_ids, vec

Q = "How did revenue grow?"


def request(**kw: Any) -> DriftRequest:
    return DriftRequest(user="u", collection="c", query=Q, **kw)


async def run(
    fake: Fake, settings: DriftSettings | None = None, **kw: Any
) -> tuple[DriftResponse, list[DriftProgress]]:
    seen: list[DriftProgress] = []
    res = await Drift(fake, settings or DriftSettings()).run(request(**kw), seen.append)
    return res, seen


async def test_hallucinated_citations_are_dropped_counted_and_the_rest_enriched_from_everything_retrieved() -> None:
    class Liar(Fake):
        def local(self, prompt: str) -> Any:
            out = super().local(prompt)
            out["citations"] += [{"chunk_id": "P999", "span": "x"}, {"chunk_id": "c-made-up", "span": "y"},
                                 {"chunk_id": "n2", "span": ""}]  # fmt: skip
            return out

        def aggregate(self, prompt: str) -> Any:
            out = super().aggregate(prompt)
            # c2/c5 were retrieved but never shown (prompt-chunks=1); n2 was found but its text not fetched
            out["key_facts"].append({"fact": "More.", "citations": ["c2", "c5", "n2", "P404"]})
            return out

    fake = Liar()
    res, _ = await run(fake, DriftSettings(prompt_chunks=1, neighbour_chunks=1, passes=1))
    assert res.final_answer == "Revenue grew." and len(res.followups) == 2
    assert res.stats is not None and res.stats.citations_dropped == 2 * 2 + 1  # two per local answer, one aggregated
    cited = [c for f in res.key_facts for c in f.citations]
    ids = [c.chunk_id if isinstance(c, Citation) else c for c in cited]
    assert "c2" in ids and "c5" in ids and "n2" in ids
    assert not {"P999", "c-made-up", "P404"} & set(ids)
    assert all(i in {*MEMBERS["k1"], *MEMBERS["k2"], "n1", "n2"} for i in ids)
    enriched = {c.chunk_id: c for c in cited if isinstance(c, Citation)}
    assert enriched["c2"].document_name == "Doc d1" and enriched["c2"].span.startswith("text of c2")
    assert "n2" in cited  # known id, unknown text: the bare id string
    assert res.stats.citations_returned == len(cited) + 2 * 2  # plus two valid per local answer
    assert all(isinstance(c, Citation) for c in res.citations)
    assert all("n2" in f.citations for f in res.followups)  # a bare id in the Q/A tree too
    assert DriftResponse.model_validate_json(res.model_dump_json()) == res


def test_followups_are_ranked_by_confidence_and_novelty_deterministically() -> None:
    def p(q: str, conf: float, targets: list[str] | None = None) -> Pending:
        return Pending(q, targets or ["k1"], 1, conf, vec(q))

    answered = [p("How did Azure revenue grow?", 0.9)]
    repeat, novel_low, novel_high = p("How did Azure revenue grow?", 0.9), p("Xbox units", 0.2), p("Office seats", 0.8)
    elsewhere = p("How did Azure revenue grow?", 0.5, ["k2"])  # the same question about another community
    pending = [repeat, novel_low, novel_high, elsewhere]
    orders = set()
    for seed in range(5):
        random.Random(seed).shuffle(pending)
        ranked = rank_followups(pending, answered, novelty_weight=0.5, min_novelty=0.05, limit=10)
        orders.add(tuple(r.item.question + r.item.targets[0] for r in ranked))
    assert len(orders) == 1  # the input order never matters
    got = [r.item for r in rank_followups(pending, answered, 0.5, 0.05, 10)]
    assert repeat not in got  # repeats what is answered
    assert got.index(novel_high) < got.index(novel_low)  # novel alike: the more confident first
    assert elsewhere in got
    twins = [p("Gaming margins", 0.5), p("Gaming margins", 0.5, ["k1"])]
    assert len(rank_followups(twins, [], 0.5, 0.05, 10)) == 1  # picking one makes its twin a repeat
    assert len(rank_followups([p(f"q{i} {i}", 0.5) for i in range(6)], [], 0.5, 0.0, 3)) == 3


@pytest.mark.parametrize("limit", [2, 3, 4, 5, 7, 12])
async def test_the_model_is_never_called_more_than_max_llm_calls(limit: int) -> None:
    class Eager(Fake):
        def primer(self, prompt: str) -> Any:
            asks = [{"question": f"Which segment {i} grew?", "target_communities": ["K1", "K2"]} for i in range(6)]
            return {"initial_answer": "Grew.", "followups": asks, "rationale": "r"}

        def local(self, prompt: str) -> Any:
            out = super().local(prompt)
            out.update(should_continue=True, new_followups=[f"Why {n} {prompt[-30:]}?" for n in "abc"])
            return out

    fake = Eager(communities=[c.model_copy(update={"summary": None}) for c in Fake().communities])
    s = DriftSettings(max_llm_calls=limit, passes=3, max_followups=3, max_summaries=5)
    res, _ = await run(fake, s)
    made = fake.model_calls + fake.summary_calls
    assert made <= limit and res.stats is not None and res.stats.llm_calls == made
    assert res.final_answer  # the aggregation always kept its call
    if limit == 12:  # HyDE, 2 summaries, primer, 3 + 3 + 1 follow-ups, aggregation
        assert res.stats.followups_run == 7 and res.stats.summaries_written == 2 and made == 12


async def test_no_data_in_scope_is_an_empty_answer_not_an_error() -> None:
    fake = Fake(communities=[])
    res, seen = await run(fake, scope=Scope(document_ids=["nothing"]))
    assert res.no_data_found and res.error is None
    assert (res.final_answer, res.key_facts, res.residual_uncertainty, res.chunks) == ("", [], "", [])
    assert fake.model_calls <= 1  # at most the HyDE paragraph, written before the search
    assert seen[-1].phase == "completed" and seen[-1].progress_pct == 100


async def test_every_store_call_carries_the_tenant_and_the_scope() -> None:
    fake = Fake()
    scope = Scope(document_ids=["d1"])
    await run(fake, scope=scope, passes=2)
    store_calls = [(name, t) for name, t in fake.calls if name != "embed"]
    assert {n for n, _ in store_calls} >= {"search_communities", "community_chunks", "search_chunks", "links",
                                           "neighbour_relations", "labels", "chunks"}  # fmt: skip
    assert all(t == Tenant("u", "c", scope) for _, t in store_calls)


async def test_progress_goes_through_the_phases_in_order_with_rising_percentages() -> None:
    stream = [r async for r in Drift(Fake(), DriftSettings()).stream(request())]
    assert stream[-1].message_type == "answer" and stream[-1].end_of_stream
    steps = [r.progress for r in stream[:-1] if r.progress]
    assert len(steps) == len(stream) - 1 and not any(r.end_of_stream for r in stream[:-1])
    phases = list(dict.fromkeys(p.phase for p in steps))
    assert phases == ["initializing", "expanding_query", "retrieving_communities", "executing_followup",
                      "aggregating_results", "completed"]  # fmt: skip
    pcts = [p.progress_pct for p in steps]
    assert pcts == sorted(pcts) and pcts[0] == 0 and pcts[-1] == 100
    by_phase = {p.phase: p.progress_pct for p in steps}
    assert (by_phase["expanding_query"], by_phase["retrieving_communities"], by_phase["aggregating_results"]) == (
        20, 40, 90)  # fmt: skip
    followups = [p for p in steps if p.phase == "executing_followup"]
    assert all(40 <= p.progress_pct <= 80 for p in followups) and followups[-1].progress_pct > 40
    assert any('[Doc d1] "' in p.details_md for p in followups)  # citations: [document] "excerpt"
    assert all(p.thought_summary for p in steps)
    quiet = [r async for r in Drift(Fake(), DriftSettings()).stream(request(streaming=False))]
    assert len(quiet) == 1 and quiet[0].final_answer


async def test_closing_the_stream_cancels_the_followups_in_flight() -> None:
    class Stuck(Fake):
        def __init__(self) -> None:
            super().__init__()
            self.blocked, self.cancelled = 0, 0
            self.all_blocked = asyncio.Event()

        async def search_chunks(self, t, vector, text, limit, mode="fused", communities=None):  # type: ignore[no-untyped-def]
            self.blocked += 1
            if self.blocked == 2:
                self.all_blocked.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            return []

    fake = Stuck()
    stream = Drift(fake, DriftSettings()).stream(request())
    async for r in stream:
        if r.progress and r.progress.phase == "executing_followup":
            break
    await asyncio.wait_for(fake.all_blocked.wait(), 10)  # both follow-ups run at once
    calls = fake.model_calls
    await stream.aclose()
    assert fake.cancelled == 2 and fake.model_calls == calls


async def test_without_a_model_retrieval_still_runs_and_returns_ranked_context() -> None:
    fake = Fake(model=False)
    res, _ = await run(fake)
    assert res.response.startswith(NO_MODEL_PREFIX) and not res.final_answer and not res.key_facts
    assert [c.id for c in res.communities] == ["k1", "k2"] and res.stats and res.stats.llm_calls == 0
    assert res.followups == []  # no model, no follow-up questions (the question again is none)
    assert len(res.chunks) >= 6 and res.stats.followups_run == 0  # each community was still searched
    assert res.chunks[0].id == "c1" and res.entities and res.relationships
    skipped, _ = await run(Fake(), no_llm=True)
    assert skipped.response.startswith(NO_MODEL_PREFIX)


async def test_an_unusable_model_output_costs_its_call_and_the_search_goes_on() -> None:
    class Truncated(Fake):
        def local(self, prompt: str) -> Any:
            return ServiceError("schema-mismatch", "text-completion: output cut short")

    fake = Truncated()
    res, _ = await run(fake)
    assert res.stats and res.stats.unusable_outputs == 2
    assert res.stats.llm_calls == fake.model_calls + fake.summary_calls
    assert res.final_answer == "Revenue grew." and all(not f.answer for f in res.followups)


async def test_a_store_or_model_failure_is_a_typed_error_reported_as_progress() -> None:
    class Down(Fake):
        async def links(self, t, entities, chunk_ids, per_entity):  # type: ignore[no-untyped-def]
            raise ServiceError("store-error", "documents: the store is down")

    seen: list[DriftProgress] = []
    with pytest.raises(ServiceError) as err:
        await Drift(Down(), DriftSettings()).run(request(), seen.append)
    assert err.value.type == "store-error" and seen[-1].phase == "error"

    class NoModel(Fake):
        def local(self, prompt: str) -> Any:
            return ServiceError("llm-error", "text-completion: upstream 500")

    with pytest.raises(ServiceError) as err2:
        await run(NoModel())
    assert err2.value.type == "llm-error"


def test_valid_ids_helper_reads_the_prompt() -> None:
    assert valid_ids("x\nValid passage ids: P1, P2") == ["P1", "P2"]


async def test_a_long_step_repeats_the_last_progress_so_the_client_knows_it_is_alive() -> None:
    class Slow(Fake):
        release = asyncio.Event()

        async def complete(self, system, prompt, json_schema, max_tokens=None):  # type: ignore[no-untyped-def]
            await self.release.wait()
            return await super().complete(system, prompt, json_schema, max_tokens)

    fake = Slow()
    stream = Drift(fake, DriftSettings(heartbeat_s=0.01)).stream(request())
    beats = []
    async for r in stream:
        if r.progress and "still working" in r.progress.thought_summary:
            beats.append(r.progress)
            fake.release.set()
        if r.message_type == "answer":
            break
    assert beats and beats[0].phase == "expanding_query" and r.final_answer
