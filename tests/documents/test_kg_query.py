"""kg-query: token budgets respected exactly (the real tokenizer), each mode's sources, invalid
modes and budgets refused, and the scope inside every store call (embedded default)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from processors.base.client import RemoteError, RequestResponseClient
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.models.text_completion.tokens import token_counter
from processors.retrieval.kg_query.context import SYSTEM, fill, round_robin, truncate
from processors.stores.settings import StoreSettings
from schemas.documents import Chunk, Document, LoadDocuments, Scope
from schemas.kg_query import KgQueryRequest
from schemas.services import DOCUMENT_LOAD, KG_QUERY

U, C = "alice", "kb"
DOCS = [
    Document(
        id="curie",
        title="Marie Curie",
        text="Marie Curie was a physicist. Marie Curie worked in Paris with Pierre Curie.",
    ),
    Document(id="paris", title="Paris", text="Paris is the capital of France. The Seine flows through Paris."),
    Document(id="warsaw", title="Warsaw", text="Warsaw is the capital of Poland. Marie Curie was born in Warsaw."),
]


def count(text: str) -> int:
    return token_counter("none", None)(text)


def test_truncate_keeps_the_leading_items_that_fit_exactly() -> None:
    items = [f"item number {i} with some words" for i in range(20)]
    budget = count("\n".join(items[:5])) + 1
    kept = truncate(items, lambda x: x, count, budget)
    assert kept == items[:5] and count("\n".join(kept)) <= budget
    assert truncate(items, lambda x: x, count, 0) == []


def test_truncate_stays_exact_where_joining_lines_merges_tokens() -> None:
    bpe = token_counter("openai", None)  # tiktoken: a newline merges with the spaces before it
    items = [f"- entity {i} | related to thing {i * 7}\t  " for i in range(300)]
    for budget in (7, 120, 3000):
        kept = truncate(items, lambda x: x, bpe, budget)
        assert bpe("\n".join(kept)) <= budget < bpe("\n".join(items[: len(kept) + 1]))


def test_fill_never_goes_over_the_total_and_prefers_what_fits() -> None:
    chunks = [Chunk(id=f"c{i}", document_id="d", text="word " * (40 if i % 2 else 5), title="t") for i in range(12)]
    for total in (100, 150, 400, 2000):
        kept, prompt, budget, base = fill("q?", ["- a"], ["- a | r | b"], chunks, count, total)
        assert count(SYSTEM) + count(prompt) <= total
        assert base == count(SYSTEM) + count(
            prompt.split("---Document Chunks---")[0] + "---Document Chunks---\n</data>"
        )
    kept, *_ = fill("q?", [], [], chunks, count, 2000)
    assert len(kept) == 12  # everything fits a large budget


def test_round_robin_interleaves_and_dedupes() -> None:
    assert round_robin([[1, 2, 3], [2, 4], [5]], key=lambda x: x) == [1, 2, 5, 3, 4]


def test_invalid_mode_and_budget_are_refused() -> None:
    with pytest.raises(ValidationError):
        KgQueryRequest(user=U, collection=C, query="q", mode="everything")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        KgQueryRequest(user=U, collection=C, query="q", max_total_tokens=0)


@pytest.fixture
async def system(tmp_path: Path) -> AsyncIterator[System]:
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings()) as s:
        load = RequestResponseClient.for_service(s.bus, DOCUMENT_LOAD, "default", 120)
        await load.request(LoadDocuments(user=U, collection=C, documents=DOCS))
        yield s


async def ask(system: System, **kw: object):  # type: ignore[no-untyped-def]
    kg = RequestResponseClient.for_service(system.bus, KG_QUERY, "default", 120)
    return await kg.request(
        KgQueryRequest(user=U, collection=C, query="Where was Marie Curie born?", no_llm=True, **kw)
    )  # type: ignore[arg-type]


async def test_modes_draw_on_their_sources(system: System) -> None:
    naive = await ask(system, mode="naive")
    assert naive.chunks and not naive.entities and not naive.relationships
    local = await ask(system, mode="local")
    assert local.entities and any(e.seed for e in local.entities)
    glob = await ask(system, mode="global")
    assert glob.relationships and all(r.score is not None for r in glob.relationships)
    mix = await ask(system, mode="mix")
    assert mix.entities and mix.relationships and mix.chunks and mix.mode == "mix"
    assert {d.id for d in mix.references} == {c.document_id for c in mix.chunks}
    assert mix.tokens and mix.tokens.tokenizer == "all-MiniLM-L6-v2 WordPiece"


async def test_with_no_model_the_answer_is_the_sentences_that_answer_cited(system: System) -> None:
    mix = await ask(system, mode="mix")
    lines = mix.response.splitlines()
    assert lines[0].startswith("No language model is configured")
    answer = next(line for line in lines if "Marie Curie was born in Warsaw." in line)  # the whole sentence
    assert answer.endswith("]") and answer.rsplit("[", 1)[1][:-1] in {c.id for c in mix.chunks}  # cited by chunk
    assert "---Entities---" not in mix.response and "<data>" not in mix.response  # never the prompt


async def test_budgets_are_respected_exactly_end_to_end(system: System) -> None:
    res = await ask(system, mode="mix", max_entity_tokens=12, max_relation_tokens=20, max_total_tokens=300)
    assert res.tokens is not None
    assert count("\n".join(f"- {e.label or e.id}" for e in res.entities)) <= 12
    assert res.tokens.relations <= 20 and res.tokens.total <= 300
    assert res.tokens.total == count(SYSTEM) + count(res.context)


async def test_a_total_budget_below_the_prompt_is_a_bad_request(system: System) -> None:
    with pytest.raises(RemoteError) as err:
        await ask(system, max_total_tokens=20)
    assert err.value.type == "bad-request" and "max-total-tokens" in err.value.message
    tight = await ask(system, max_total_tokens=110)
    assert tight.tokens is not None and tight.tokens.total <= 110


async def test_invalid_mode_over_the_bus_is_a_bad_request(system: System) -> None:
    kg = RequestResponseClient.for_service(system.bus, KG_QUERY, "default", 60)
    raw = KgQueryRequest(user=U, collection=C, query="q").model_dump() | {"mode": "everything"}
    with pytest.raises(RemoteError) as err:
        await kg.request(_Raw(raw))
    assert err.value.type == "bad-request" and "mode" in err.value.message


class _Raw:
    """A request body the client sends as is (to get past client-side validation)."""

    def __init__(self, body: dict[str, object]) -> None:
        self.body = body

    def model_dump_json(self, **_: object) -> str:
        import json

        return json.dumps(self.body)


async def test_scope_holds_in_every_mode(system: System) -> None:
    for mode in ("local", "global", "hybrid", "mix", "naive"):
        res = await ask(system, mode=mode, scope=Scope(document_ids=["paris"]))
        assert {c.document_id for c in res.chunks} <= {"paris"}, mode
        assert not any(e.id.endswith("/warsaw") or e.id.endswith("marie_curie") for e in res.entities), mode
        assert not any("warsaw" in r.s + r.o for r in res.relationships), mode
