"""The deployed benchmark's fleet: each processor its own OS process on the real Pulsar, asked as
a client would, its bus round trips read from the processes' own request counters."""

from __future__ import annotations

import os
from pathlib import Path

from bench.harness.fleet import GRAPH_RAG_FLEET, processor_fleet
from processors.base.client import RequestResponseClient
from processors.base.pulsar_bus import PulsarBus
from processors.ingest.triples.loader import load_triples
from processors.models.embeddings.model import OnnxMiniLM
from processors.stores.factory import open_stores
from processors.stores.settings import StoreSettings
from schemas.graph_rag import GraphRagRequest, GraphRagResponse
from schemas.services import GRAPH_RAG
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term, Triple

E = "http://x/e/"


def _graph() -> list[Triple]:
    named = {"ada": "Ada Lovelace", "babbage": "Charles Babbage", "london": "London"}
    out = [Triple(s=Term.iri(E + k), p=Term.iri(RDFS_LABEL), o=Term.literal(v)) for k, v in named.items()]
    out.append(Triple(s=Term.iri(E + "ada"), p=Term.iri(E + "worked_with"), o=Term.iri(E + "babbage")))
    out.append(Triple(s=Term.iri(E + "babbage"), p=Term.iri(E + "born_in"), o=Term.iri(E + "london")))
    return out


async def test_a_question_to_the_fleet_costs_one_request_per_service_call(servers, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = StoreSettings(home=tmp_path / "home")
    stores = open_stores(store)
    try:
        await load_triples(stores, OnnxMiniLM.shared(), Tenant("u", "c"), _graph())
    finally:
        await stores.close()
    async with processor_fleet(store, servers.pulsar_url) as fleet:
        pids = fleet.pids()
        assert set(pids) == {"config", *GRAPH_RAG_FLEET} and os.getpid() not in pids.values()
        bus = PulsarBus(servers.pulsar_url)
        client = RequestResponseClient.for_service(bus, GRAPH_RAG, "default", 60)
        try:
            before = await fleet.requests_handled()
            req = GraphRagRequest(query="Where was Ada Lovelace's colleague born?", user="u", collection="c",
                                  no_llm=True, max_path_length=2)  # fmt: skip
            res: GraphRagResponse = await client.request(req)
            handled = await fleet.requests_handled() - before
        finally:
            await client.stop()
            await bus.close()
        assert res.error is None and res.stats is not None
        assert ("Charles Babbage", "London") in {(t.s, t.o) for t in res.triples}
        # graph-rag, embeddings, entity search, one per level, label-resolver (which reads the
        # store itself: no request to triples for its misses)
        assert handled == 4 + res.stats.levels
    assert all(proc.returncode is not None for proc, _, _ in fleet.procs.values())  # stopped with the context
