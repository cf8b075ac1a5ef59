"""The load journal every backend keeps (protocol.LoadState): written, read back, per collection, deleted."""

from __future__ import annotations

import pytest

from processors.stores.protocol import LoadState
from schemas.tenant import Tenant
from tests.integration.store_fixtures import StoreBackend

pytestmark = pytest.mark.usefixtures("servers")


async def test_load_state_round_trip(store: StoreBackend) -> None:
    user, collection = store.scope()
    _, other = store.scope(user=user)
    assert await store.triples.load_state(Tenant(user, collection)) is None
    started = LoadState(started=1700000000.5, source="graph.tsv")
    await store.triples.set_load_state(Tenant(user, collection), started)
    assert await store.triples.load_state(Tenant(user, collection)) == started
    assert not started.complete and "graph.tsv" in started.describe(collection)
    failed = LoadState(started=1700000000.5, source="graph.tsv", error="graph.tsv:601: bad line")
    await store.triples.set_load_state(Tenant(user, collection), failed)
    assert await store.triples.load_state(Tenant(user, collection)) == failed
    done = LoadState(started=1700000000.5, finished=1700000009.25, source="graph.tsv", triples=4688, vectors=1200)
    await store.triples.set_load_state(Tenant(user, collection), done)
    assert await store.triples.load_state(Tenant(user, collection)) == done  # the error is gone with the finish
    await store.triples.set_load_state(Tenant(user, other), started)
    assert await store.triples.load_state(Tenant("nobody-" + user, collection)) is None
    await store.triples.delete_collection(Tenant(user, collection))
    assert await store.triples.load_state(Tenant(user, collection)) is None
    assert await store.triples.load_state(Tenant(user, other)) == started
