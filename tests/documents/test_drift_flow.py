"""drift end to end on the embedded default (real stores, real embedding model, no language
model): streamed progress and ranked context, tenant and document scope inside the stores,
community-scoped chunk search, and the community hierarchy fallback of the primer's search."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from processors.base.client import RequestResponseClient
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.retrieval.drift.prompts import NO_MODEL_PREFIX
from processors.stores.documents_protocol import CommunityRecord
from processors.stores.settings import StoreSettings
from processors.stores.sqlite.communities import SqliteCommunityStore
from processors.stores.sqlite.documents import SqliteDocumentStore
from schemas.communities import BuildCommunities, ListCommunities
from schemas.documents import ChunkSearch, Document, LoadDocuments, Scope
from schemas.drift import DriftRequest, DriftResponse
from schemas.services import COMMUNITIES, COMMUNITY_BUILD, DOCUMENT_LOAD, DOCUMENTS, DRIFT
from schemas.tenant import Tenant

U, C = "alice", "papers"
TEXTS = {
    "curie": ("Marie Curie", "Marie Curie was a physicist. She worked in Paris with Pierre Curie. "
              "Marie Curie won the Nobel Prize in Physics with Pierre Curie."),
    "paris": ("Paris", "Paris is the capital of France. The Seine flows through Paris. "
              "The Louvre in Paris is a museum."),
    "warsaw": ("Warsaw", "Warsaw is the capital of Poland. Marie Curie was born in Warsaw. "
               "The Vistula flows through Warsaw."),
}  # fmt: skip
DOCS = [Document(id=i, title=title, text=text) for i, (title, text) in TEXTS.items()]
QUESTION = "Where was Marie Curie born and where did she work?"


@pytest.fixture
async def system(tmp_path: Path) -> AsyncIterator[System]:
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings()) as s:
        c = client(s, DOCUMENT_LOAD)
        async for _ in c.stream(LoadDocuments(user=U, collection=C, documents=DOCS)):
            pass
        await client(s, COMMUNITY_BUILD).request(BuildCommunities(user=U, collection=C))
        yield s


def client(system: System, service):  # type: ignore[no-untyped-def]
    return RequestResponseClient.for_service(system.bus, service, "default", 120)


async def drift(system: System, **kw) -> list[DriftResponse]:  # type: ignore[no-untyped-def]
    req = DriftRequest(user=kw.pop("user", U), collection=C, query=kw.pop("query", QUESTION), **kw)
    return [r async for r in client(system, DRIFT).stream(req)]


async def test_without_a_model_drift_streams_progress_and_returns_ranked_context(system: System) -> None:
    stream = await drift(system)
    res = stream[-1]
    phases = [r.progress.phase for r in stream[:-1] if r.progress]
    assert phases[0] == "initializing" and phases[-1] == "completed" and "executing_followup" in phases
    assert res.response.startswith(NO_MODEL_PREFIX) and not res.key_facts and not res.no_data_found
    assert res.communities and res.followups == []  # no model: no follow-up questions offered
    assert {d.id for d in res.documents} <= {"curie", "paris", "warsaw"} and res.chunks
    assert "warsaw" in {c.document_id for c in res.chunks[:3]}
    assert res.stats and res.stats.llm_calls == 0 and res.stats.store_round_trips > 3


async def test_tenant_and_document_scope_hold_inside_every_store_call(system: System) -> None:
    other = (await drift(system, user="mallory"))[-1]
    assert other.no_data_found and not other.chunks and not other.communities
    scoped = (await drift(system, scope=Scope(document_ids=["paris"])))[-1]
    assert scoped.chunks and {c.document_id for c in scoped.chunks} == {"paris"}
    assert {d.id for d in scoped.documents} == {"paris"}
    nothing = (await drift(system, scope=Scope(document_ids=["no-such-document"])))[-1]
    assert nothing.no_data_found and nothing.final_answer == "" and nothing.key_facts == []


async def test_chunk_search_among_communities_returns_only_their_chunks(system: System) -> None:
    found = (await client(system, COMMUNITIES).request(ListCommunities(user=U, collection=C, level=0))).communities
    assert len(found) >= 2
    members = await system.stores.communities.member_chunks(Tenant(U, C), [k.id for k in found])
    vec = [0.1] * 384
    req = ChunkSearch(user=U, collection=C, vector=vec, text="Paris", communities=[k.id for k in found[:2]],
                      per_community=1)  # fmt: skip
    res = await client(system, DOCUMENTS).request(req)
    assert res.by_community and set(res.by_community) <= {k.id for k in found[:2]}
    for k, ids in res.by_community.items():
        assert len(ids) == 1 and set(ids) <= set(members[k])
    one = found[0].id
    every = await client(system, DOCUMENTS).request(
        ChunkSearch(user=U, collection=C, vector=vec, text="Paris", communities=[one], limit=50)
    )
    assert every.chunks and {c.id for c in every.chunks} == set(members[one])


def _record(cid: str, level: int, vector: list[float], parent: str | None = None) -> CommunityRecord:
    return CommunityRecord(id=cid, level=level, parent=parent, children=[], members=[f"e-{cid}"], chunks={},
                           vector=vector, membership_hash=cid)  # fmt: skip


async def test_community_search_starts_at_the_top_level_and_falls_back(tmp_path: Path) -> None:
    docs = SqliteDocumentStore(tmp_path / "docs.db")
    store = SqliteCommunityStore(docs.db, docs.lists)
    q = [1.0, 0.0, 0.0]
    flat = [_record(f"f{i}", 0, list(np.eye(3)[i % 3])) for i in range(4)]
    await store.replace(Tenant("u", "flat"), flat)  # no hierarchy: every community is a candidate
    assert [c.id for c in await store.search(Tenant("u", "flat"), q, None, 4)][:2] == ["f0", "f3"]

    lone_top = [*flat, _record("top", 1, [0.0, 1.0, 0.0])]
    await store.replace(Tenant("u", "lone"), lone_top)  # 1 top-level match < 4 / 2: one level down
    got = await store.search(Tenant("u", "lone"), q, None, 4)
    assert {c.level for c in got} == {0} and got[0].id in {"f0", "f3"}

    tops = [*flat, _record("t1", 1, [0.0, 1.0, 0.0]), _record("t2", 1, [1.0, 0.0, 0.0])]
    await store.replace(Tenant("u", "tops"), tops)  # 2 top-level matches >= 4 / 2: the top level only
    got = await store.search(Tenant("u", "tops"), q, None, 4)
    assert [c.id for c in got] == ["t2", "t1"] and all(c.score is not None for c in got)
    await docs.close()
