"""`kgflow load triples` goes through the flow: its labels are embedded by the flow's embeddings
service (here a scripted OpenAI-compatible endpoint, not the local model), the collection records
which model and dimension its vectors are of, and a load with another model is refused before
anything is written, with an error naming both."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from processors.commands.cli import main
from processors.models.embeddings.model import OnnxMiniLM
from processors.stores.factory import open_stores
from processors.stores.protocol import LoadState, VectorModel
from processors.stores.settings import StoreSettings
from schemas.tenant import Tenant
from tests.scripted_embeddings import ScriptedEmbeddings, scripted_embeddings

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample.tsv"
INT8 = 2e-3  # the embedded index keeps int8 codes: a component within about 1e-3 of float32's


def kgflow(home: Path, *args: str) -> int:
    """The CLI on the embedded home."""
    return main([*args, "--home", str(home)])


def start_flow(home: Path, flow: str, endpoint: ScriptedEmbeddings) -> None:
    """A flow of the default blueprint whose embeddings are `endpoint`."""
    assert kgflow(home, "flow", "put-blueprint", str(ROOT / "flows" / "default.yaml")) == 0
    params = [x for p in endpoint.flow_params() for x in ("--param", p)]
    assert kgflow(home, "flow", "start", flow, "--blueprint", "default", *params) == 0


def stored(home: Path, collection: str) -> tuple[dict[str, tuple[str, np.ndarray]], LoadState | None, int]:
    """The collection's vectors (iri -> label, vector), its load state and its triple count."""
    with sqlite3.connect(home / "vectors.db") as conn:
        labels = dict(conn.execute("SELECT iri, label FROM vectors WHERE collection = ?", (collection,)).fetchall())

    async def state() -> tuple[dict[str, list[float]], LoadState | None, int]:
        stores = open_stores(StoreSettings(home=home))
        tenant = Tenant("default", collection)
        try:
            triples = await stores.triples.collections("default")
            vecs = await stores.entities.vectors(tenant, sorted(labels))
            return vecs, await stores.triples.load_state(tenant), triples[collection]
        finally:
            await stores.close()

    vecs, load, triples = asyncio.run(state())
    return {iri: (labels[iri], np.asarray(v)) for iri, v in vecs.items()}, load, triples


def vector_model(home: Path, collection: str) -> VectorModel | None:
    async def read() -> VectorModel | None:
        stores = open_stores(StoreSettings(home=home))
        try:
            return await stores.entities.vector_model(Tenant("default", collection))
        finally:
            await stores.close()

    return asyncio.run(read())


def test_a_load_embeds_with_the_flows_model_and_refuses_another(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    with scripted_embeddings("scripted-embed", 384) as endpoint:
        start_flow(home, "scripted", endpoint)
        capsys.readouterr()
        assert kgflow(home, "load", "triples", str(SAMPLE), "--flow", "scripted", "-C", "c", "--no-progress") == 0
        assert "labels embedded" in capsys.readouterr().err
        assert endpoint.texts  # the flow's endpoint embedded the labels

    vectors, state, triples = stored(home, "c")
    assert vector_model(home, "c") == VectorModel("scripted-embed", 384)
    assert state is not None and state.complete and state.vectors == len(vectors) > 10
    # every vector of the collection is the endpoint's vector of its label: none from the local model
    for iri, (label, vec) in vectors.items():
        assert np.allclose(vec, endpoint.vector(label), atol=INT8), iri
    local = asyncio.run(OnnxMiniLM.shared().embed([next(iter(vectors.values()))[0]]))[0]
    assert not np.allclose(next(iter(vectors.values()))[1], local, atol=1e-3)

    # the same collection with the local model (flow `default`): refused, nothing written
    more = tmp_path / "more.tsv"
    more.write_text("ada_lovelace\tcolleague\tcharles_babbage\n")
    assert kgflow(home, "load", "triples", str(more), "-C", "c", "--no-progress") == 2
    err = capsys.readouterr().err
    assert "collection 'c' holds vectors of scripted-embed (384 dimensions)" in err
    assert f"refusing vectors of {OnnxMiniLM.model} (384 dimensions)" in err and "Traceback" not in err
    assert "marked incomplete" not in err  # nothing was written: the collection is as it was
    after, state_after, triples_after = stored(home, "c")
    assert (state_after, triples_after) == (state, triples) and after.keys() == vectors.keys()

    # a model of another dimension is refused too, naming both dimensions
    with scripted_embeddings("scripted-embed", 8) as narrow:
        start_flow(home, "narrow", narrow)
        capsys.readouterr()
        assert kgflow(home, "load", "triples", str(more), "--flow", "narrow", "-C", "c", "--no-progress") == 2
        err = capsys.readouterr().err
        assert (
            "holds vectors of scripted-embed (384 dimensions); refusing vectors of scripted-embed (8 dimensions)" in err
        )
        # another collection takes it (the local vector index holds any dimension)
        assert kgflow(home, "load", "triples", str(more), "--flow", "narrow", "-C", "d", "--no-progress") == 0
    assert vector_model(home, "d") == VectorModel("scripted-embed", 8)
