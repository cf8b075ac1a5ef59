"""DRIFT on the real stack: every processor talks over the real Pulsar, and Neo4j holds the
documents, chunks, communities, triples and entity vectors; the local model answers. Progress
streams over Pulsar before the answer, and every citation of the key facts is a chunk of the
collection. (Needs the Neo4j document and community stores, processors/stores/neo4j_documents.py.)"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from processors.base.client import RequestResponseClient
from processors.base.runtime import make_bus
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.retrieval.drift.prompts import NO_ANSWER_PREFIX, NO_MODEL_PREFIX
from processors.stores.settings import StoreSettings
from schemas.communities import BuildCommunities
from schemas.documents import DeleteCollection, Document, GetChunks, LoadDocuments
from schemas.drift import DriftRequest
from schemas.retrieval import Citation
from schemas.services import COMMUNITY_BUILD, DOCUMENT_LOAD, DOCUMENT_STORE, DOCUMENTS, DRIFT
from tests.conftest import Servers

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "docqa" / "msgraphrag_msft_earnings"
QUESTION = "What were the key financial achievements for Microsoft reported on the calls?"
SMALL = {"max_llm_calls": 3, "max_tokens": 400, "prompt_chunks": 2, "prompt_chunk_chars": 300, "community_limit": 3,
         "timeout_s": 1800}  # fmt: skip


@pytest.fixture
async def stack(servers: Servers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[System]:
    monkeypatch.setenv("KGFLOW_LLM", "local")  # the flow leaves `llm` unset: text-completion reads these
    monkeypatch.setenv("KGFLOW_LLM_TIMEOUT", "900")
    rt = RuntimeSettings(bus="pulsar", pulsar_url=servers.pulsar_url, request_timeout_s=600)
    store = StoreSettings(home=tmp_path / "home", triples_backend="neo4j", vectors_backend="neo4j",
                          documents_backend="neo4j", neo4j_url=servers.neo4j_url)  # fmt: skip
    async with embedded(store, rt, bus=make_bus(rt)) as system:
        yield system


def client(system: System, service):  # type: ignore[no-untyped-def]
    return RequestResponseClient.for_service(system.bus, service, "default", 600)


async def test_drift_over_pulsar_and_neo4j_streams_progress_and_cites_collection_chunks(stack: System) -> None:
    user, coll = f"drift-{uuid.uuid4().hex[:8]}", "msft"
    lines = (CORPUS / "corpus.jsonl").read_text().splitlines()[:3]
    docs = [Document.model_validate({**json.loads(ln), "text": json.loads(ln)["text"][:5000]}) for ln in lines]
    try:
        async for _ in client(stack, DOCUMENT_LOAD).stream(LoadDocuments(user=user, collection=coll, documents=docs)):
            pass
        built = await client(stack, COMMUNITY_BUILD).request(BuildCommunities(user=user, collection=coll))
        assert built.levels
        req = DriftRequest(user=user, collection=coll, query=QUESTION, **SMALL)  # type: ignore[arg-type]
        stream = [r async for r in client(stack, DRIFT).stream(req)]
        phases = [r.progress.phase for r in stream[:-1] if r.progress]
        assert phases[0] == "initializing" and phases[-1] == "completed"
        res = stream[-1]
        assert res.final_answer and res.key_facts and res.communities and res.chunks
        assert not res.response.startswith((NO_MODEL_PREFIX, NO_ANSWER_PREFIX))
        assert res.stats and 1 <= res.stats.llm_calls <= 3
        ids = [c.chunk_id if isinstance(c, Citation) else c for f in res.key_facts for c in f.citations]
        found = await client(stack, DOCUMENTS).request(GetChunks(user=user, collection=coll, chunk_ids=ids or ["-"]))
        assert {c.id for c in found.chunks} == set(ids)
        assert {c.document_id for c in res.chunks} <= {d.id for d in docs}
    finally:
        await client(stack, DOCUMENT_STORE).request(DeleteCollection(user=user, collection=coll))
