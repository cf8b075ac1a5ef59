"""The benchmark's warm-up: the first questions always, then questions until the time is up (a
server backend's JIT), reporting what it asked and the cold figure."""

from __future__ import annotations

from pathlib import Path

from bench.graph.graphs import USER
from bench.graph.measure import KgflowClient, warm_up
from processors.base.settings import RuntimeSettings
from processors.commands.system import embedded
from processors.ingest.triples.loader import load_triples
from processors.models.embeddings.model import OnnxMiniLM
from processors.stores.factory import open_stores
from processors.stores.settings import StoreSettings
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term, Triple

E = "http://x/e/"
QUESTIONS = ["Who did Ada Lovelace work with?", "Where was Charles Babbage born?", "What is London?", "Who is Ada?"]


async def test_warm_up_asks_the_first_questions_then_keeps_asking_until_the_time_is_up(tmp_path: Path) -> None:
    store = StoreSettings(home=tmp_path / "home")
    stores = open_stores(store)
    named = {"ada": "Ada Lovelace", "babbage": "Charles Babbage", "london": "London"}
    graph = [Triple(s=Term.iri(E + k), p=Term.iri(RDFS_LABEL), o=Term.literal(v)) for k, v in named.items()]
    graph += [Triple(s=Term.iri(E + "ada"), p=Term.iri(E + "worked_with"), o=Term.iri(E + "babbage"))]
    try:
        await load_triples(stores, OnnxMiniLM.shared(), Tenant(USER, "c"), graph)
    finally:
        await stores.close()
    async with embedded(store, RuntimeSettings()) as system:
        kg = KgflowClient(system, "c", {"max_path_length": 2})
        try:
            embedded_default = await warm_up(kg, QUESTIONS, 0.0)
            assert embedded_default["warm_up_questions"] == 3  # no time asked for: the first three only
            assert embedded_default["cold_p50_ms"] > 0
            timed = await warm_up(kg, QUESTIONS, 1.0)
        finally:
            await kg.stop()
    assert timed["warm_up_s"] >= 1.0
    assert timed["warm_up_questions"] >= 3 + 20  # at least one batch after the first three
    assert (timed["warm_up_questions"] - 3) % 20 == 0  # whole batches, every question answered
