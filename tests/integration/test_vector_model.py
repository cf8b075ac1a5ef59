"""Every entity index records which embedding model (and dimension) a collection's vectors are of
at its first write, refuses a write of another model or dimension naming both (storing nothing of
it), keeps collections apart, and forgets the model with the collection or its last vector."""

from __future__ import annotations

import pytest

from processors.stores.protocol import VectorModel, VectorModelMismatch
from schemas.tenant import Tenant
from tests.integration.store_fixtures import StoreBackend, unit

pytestmark = pytest.mark.usefixtures("servers")


async def test_a_collection_holds_one_models_vectors(store: StoreBackend) -> None:
    user, coll = store.scope()
    _, other = store.scope(user)
    assert await store.index.vector_model(Tenant(user, coll)) is None
    await store.index.upsert(Tenant(user, coll), [("a", "Alpha", unit(1))], model="model-a")
    await store.index.upsert(Tenant(user, coll), [("p", "relates", unit(2))], "predicate", model="model-a")
    assert await store.index.vector_model(Tenant(user, coll)) == VectorModel("model-a", 384)

    with pytest.raises(VectorModelMismatch) as refused:
        await store.index.upsert(Tenant(user, coll), [("b", "Bee", unit(3))], model="model-b")
    assert str(refused.value).startswith(
        f"collection {coll!r} holds vectors of model-a (384 dimensions); refusing vectors of model-b (384 dimensions)"
    )
    assert await store.index.vectors(Tenant(user, coll), ["b"]) == {}  # nothing of the refused write was stored
    assert await store.index.vector_model(Tenant(user, coll)) == VectorModel("model-a", 384)

    await store.index.upsert(
        Tenant(user, other), [("b", "Bee", unit(3))], model="model-b"
    )  # another collection: its own
    assert await store.index.vector_model(Tenant(user, other)) == VectorModel("model-b", 384)

    await store.index.delete_collection(Tenant(user, coll))
    assert await store.index.vector_model(Tenant(user, coll)) is None
    await store.index.upsert(
        Tenant(user, coll), [("b", "Bee", unit(3))], model="model-b"
    )  # a new start takes any model
    assert await store.index.vector_model(Tenant(user, coll)) == VectorModel("model-b", 384)


async def test_the_model_goes_with_the_last_vector(store: StoreBackend) -> None:
    user, coll = store.scope()
    await store.index.upsert(Tenant(user, coll), [("a", "Alpha", unit(1)), ("b", "Bee", unit(2))], model="model-a")
    await store.index.upsert(Tenant(user, coll), [("p", "relates", unit(3))], "predicate", model="model-a")
    await store.index.delete(Tenant(user, coll), ["a", "p"])  # a vector is left: the model stays
    with pytest.raises(VectorModelMismatch):
        await store.index.upsert(Tenant(user, coll), [("c", "Sea", unit(4))], model="model-b")
    await store.index.delete(Tenant(user, coll), ["b"])
    assert await store.index.vector_model(Tenant(user, coll)) is None
    await store.index.upsert(Tenant(user, coll), [("c", "Sea", unit(4))], model="model-b")
    assert await store.index.vector_model(Tenant(user, coll)) == VectorModel("model-b", 384)


async def test_another_dimension_is_refused(store: StoreBackend) -> None:
    user, coll = store.scope()
    await store.index.upsert(Tenant(user, coll), [("a", "Alpha", unit(1))], model="model-a")
    with pytest.raises(ValueError, match=r"model-a \(384 dimensions\).*model-a \(8 dimensions\)|holds vectors of 384"):
        await store.index.upsert(Tenant(user, coll), [("b", "Bee", unit(2, 8))], model="model-a")
    assert await store.index.vectors(Tenant(user, coll), ["b"]) == {}
    if store.name != "sqlite":  # a server's vector index has one dimension, whatever the collection
        _, fresh = store.scope(user)
        with pytest.raises(ValueError, match="holds vectors of 384 dimensions; model-s makes 8"):
            await store.index.upsert(Tenant(user, fresh), [("b", "Bee", unit(2, 8))], model="model-s")
        assert await store.index.vector_model(Tenant(user, fresh)) is None
