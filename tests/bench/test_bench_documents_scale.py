"""The document scale corpora (bench/documents/corpus.py) on a 1k-chunk variant over a few real
documents of each set: deterministic, the public paragraphs stored, distractors that carry mentions
and vectors and are linked as the writer links them, a stopped build that resumes to the same
corpus; the runner (bench/documents/scale.py) writing every key of its section; and a SQLite home
served as deployed (bench/documents/measure.py's fleet: one process per processor on the real
Pulsar), where the documents processor sees the writer's process's writes at once."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from bench.documents import corpus as doc_corpus
from bench.documents import measure as doc_measure
from bench.documents import scale as documents_scale
from bench.documents import stores as doc_stores
from bench.documents import write_at_size
from bench.documents.corpus import USER, CorpusSpec, distractors
from bench.documents.sources import Sources, prepare_sources
from processors.algorithms.iris import concept_iri
from processors.commands.system import embedded
from processors.ingest.document_store.linking import link
from processors.stores.documents_protocol import ChunkQuery, DocumentCounts
from processors.stores.settings import StoreSettings
from schemas.documents import DeleteDocuments, StoreDocuments
from schemas.lazy_rag import LazyRagRequest
from schemas.tenant import Tenant

PUBLIC_IDS = {"hqm-00004", "hqm-00006", "msk-00006", "msk-00010"}  # the first questions' supporting paragraphs
SUBSET = 1  # the public sets' first question's paragraphs, one MSFT transcript (~80 chunks)


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Sources:
    """The real pipeline (chunker, MiniLM, spaCy concepts) over a few documents of each set."""
    return asyncio.run(prepare_sources(tmp_path_factory.mktemp("docscale"), SUBSET))


def test_the_public_sets_were_indexed_for_real(sources: Sources) -> None:
    assert {d.document.id for docs in sources.public.values() for d in docs} == PUBLIC_IDS
    doc = sources.public["hotpotqa"][0]
    assert doc.concepts and doc.mentions and doc.document.title
    assert len(doc.vectors[0]) == 384 and abs(np.linalg.norm(doc.vectors[0]) - 1) < 1e-3
    assert set(sources.bank_sets) == {"hotpotqa", "musique", "msft"} and len(sources.bank) == len(sources.bank_vectors)
    assert all(m.label in sources.label_vectors for chunk in sources.bank for s in chunk for m in s.mentions)


def test_distractors_are_deterministic_and_made_of_real_sentences(sources: Sources) -> None:
    spec = CorpusSpec(2000)
    a, b = distractors(spec, sources, 0, 200), distractors(spec, sources, 0, 200)
    assert [(d.chunk.text, d.vector) for d in a] == [(d.chunk.text, d.vector) for d in b]
    later = distractors(spec, sources, 200, 200)
    assert {d.document.id for d in later}.isdisjoint({d.document.id for d in a})
    assert [d.chunk.text for d in later] != [d.chunk.text for d in a]
    real = {s.text for chunk in sources.bank for s in chunk}
    for d in a:
        assert all(s.text in real for s in d.sentences) and d.chunk.text == " ".join(s.text for s in d.sentences)
        assert d.document.title == ""
        assert d.chunk.tokens <= spec.max_tokens or len(d.sentences) == 1
        assert len(d.vector) == 384 and abs(np.linalg.norm(d.vector) - 1) < 1e-5
    assert sum(bool(d.mentions()) for d in a) > 0.95 * len(a)
    # near their sources, not on them: each is a noisy mix of two real chunk vectors
    best = (np.asarray([d.vector for d in a]) @ sources.bank_vectors.T).max(axis=1)
    assert 0.5 < float(np.median(best)) < 0.99


def test_distractors_are_indexed_and_linked_as_the_writer_links_them(sources: Sources) -> None:
    batch = distractors(CorpusSpec(2000), sources, 0, 300)
    writer = doc_corpus.DirectWriter(None, "c", sources)  # type: ignore[arg-type]
    keys = sorted({m.key for d in batch for m in d.mentions()})
    # a third known to the collection: half of them under another IRI, half under their own
    writer.named = {k: f"http://x/e/{n}" if n % 2 else concept_iri(k) for n, k in enumerate(keys[::3])}
    named = dict(writer.named)
    prepared = writer.prepare(batch)
    # the pipeline's own functions: the same records, field by field (vectors, hashes, spellings, ...)
    expected = link([d.indexed() for d in batch], named, set(named.values()))
    assert prepared.linked.records == expected.records
    assert prepared.linked.new_concepts == expected.new_concepts and prepared.linked.relations == expected.relations
    assert any(iri in named.values() for r in prepared.linked.records for iri in r.keys)  # some linked to named ones
    written = {(t.s.value, t.p.value, t.o.value) for t in prepared.triples if t.o.type == "iri"}
    assert written == expected.relations  # a relation's triple is written the first time it is seen only
    assert {t.s.value for t in writer.prepare(batch).triples if t.o.type == "iri"} == set()  # seen: not again
    assert set(prepared.claims) == set(expected.new_concepts) and prepared.linked.relations
    assert {e[0] for e in prepared.entities} == set(expected.new_concepts)
    assert any(r.title_entity for r in prepared.linked.records)  # subjects found in the content


async def test_a_stopped_build_resumes_to_the_corpus_an_uninterrupted_build_writes(
    sources: Sources, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = CorpusSpec(1000, batch=200)
    whole = await doc_stores.ensure("sqlite", "1k", spec, sources, False, tmp_path / "a")
    assert not whole["cached"] and whole["chunks"] == 1000 and whole["public_documents"] == 4
    real_write = doc_corpus.DirectWriter.write
    calls = 0

    async def stops_at_the_third_batch(self: doc_corpus.DirectWriter, batch: doc_corpus.Prepared) -> None:
        nonlocal calls
        calls += 1
        if calls >= 3:  # the third batch and its retries
            raise RuntimeError("killed")
        await real_write(self, batch)

    monkeypatch.setattr(doc_corpus.DirectWriter, "write", stops_at_the_third_batch)
    monkeypatch.setattr(doc_corpus, "RETRY_PAUSE_S", 0.0)
    with pytest.raises(RuntimeError, match="killed"):
        await doc_stores.ensure("sqlite", "1k", spec, sources, False, tmp_path / "b")
    monkeypatch.setattr(doc_corpus.DirectWriter, "write", real_write)
    resumed = await doc_stores.ensure("sqlite", "1k", spec, sources, False, tmp_path / "b")
    assert resumed["resumed_after"] == 400 and resumed["chunks"] == 1000
    again = await doc_stores.ensure("sqlite", "1k", spec, sources, False, tmp_path / "b")
    assert again["cached"]
    public_chunks = sum(len(d.chunks) for docs in sources.public.values() for d in docs)
    made = [d for start, n in doc_corpus.batches(spec, public_chunks) for d in distractors(spec, sources, start, n)]
    sample = [d.chunk.id for d in made[::97]]  # from every batch
    corpora = [await _corpus(Path(info["home"]), sample) for info in (whole, resumed)]
    assert corpora[0] == corpora[1]
    docs, links, counts = corpora[0]
    assert PUBLIC_IDS <= {d[0] for d in docs}
    assert len(docs) == 4 + len(made) and counts == DocumentCounts(len(docs), 1000)
    assert {c for c, _, _ in links} == set(sample)  # every sampled distractor carries its mentions


async def _corpus(
    home: Path, chunk_ids: list[str]
) -> tuple[list[tuple[str, int, str]], list[tuple[str, str, int]], DocumentCounts]:
    """What a corpus holds, read through the store API: its documents, the mentions of some
    chunks, its (documents, chunks)."""
    async with embedded(StoreSettings(home=home)) as system:
        docs = await system.stores.documents.documents(Tenant(USER, "docscale"), 10_000)
        links = await system.stores.documents.links(ChunkQuery(Tenant(USER, "docscale")), [], chunk_ids, 10)
        counts = (await system.stores.documents.counts(USER))["docscale"]
    return (
        [(d.id, d.chunks, d.content_hash) for d in docs],
        sorted((m.chunk_id, m.entity, m.count) for m in links),
        counts,
    )


@pytest.mark.parametrize("topology", ["embedded", "fleet"])
async def test_the_runner_writes_every_key_of_its_section(
    topology: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if topology == "fleet":
        request.getfixturevalue("servers")  # the real Pulsar
    out = tmp_path / "results.json"
    out.write_text(json.dumps({"graph": {"kept": True}}))
    args = ["--sizes", "1k", "--backends", "sqlite", "--subset", str(SUBSET), "--cache", str(tmp_path),
            "--warmup-s", "0", "--budget-s", "120", "--out", str(out), "--sqlite-topology", topology]  # fmt: skip
    section = await documents_scale.main(args)
    results = json.loads(out.read_text())
    assert results["graph"] == {"kept": True} and results["documents"] == section
    assert (
        results["meta"]["documents"]["commit"] != "unknown"
        and len(results["meta"]["documents"]["load_average_at_end"]) == 3
    )
    r = section["sqlite"]["1k"]
    for key in ("p50_ms", "p95_ms", "kg_query_p50_ms", "kg_query_p95_ms", "store_requests", "rss_mb",
                "after_write_ms", "recall_at_5", "build_s"):  # fmt: skip
        assert isinstance(r[key], int | float), key
    assert r["questions_asked"] == r["questions_available"] > 0 and r["errors"] == 0
    assert r["store_requests_counter"] in ("stats.store_requests", "stats.store_round_trips")
    assert len(r["after_write_rounds_ms"]) == documents_scale.WRITES and r["topology"] == topology
    if topology == "embedded":
        assert r["rss_of"].startswith("the embedded process") and "fleet_rss_mb" not in r
    else:  # the documents processor's process, one of the fleet's
        assert r["rss_of"] == "the documents processor (its own process)"
        assert abs(r["fleet_rss_mb"]["documents"] - r["rss_mb"]) < 10 and r["rss_mb"] < r["fleet_rss_mb_total"]
    assert 0 < r["rss_parts"]["anon"] < r["rss_mb"] and 0 < r["rss_parts"]["file"] < r["rss_mb"]
    assert 0 <= r["recall_at_5"] <= 1 and r["build"]["chunks"] == 1000
    targets = section["targets"]
    assert targets["sqlite.1k.after_write_over_p50"]["value"] == round(r["after_write_ms"] / r["p50_ms"], 2)
    assert any(k.startswith("sqlite.1k.rss_mb") for k in targets)


def test_sizes_not_built_say_not_measured_with_a_projection_from_the_largest_build() -> None:
    build = {"public_chunks": 4000, "public_write_s": 400.0, "distractors_per_s": 50.0}
    section: dict[str, dict[str, object]] = {
        "sqlite": {"10k": {"p50_ms": 90.0, "build": build}, "1m": {"not_measured": "earlier"}},
        "neo4j": {},
    }
    documents_scale.not_measured(section, "no time")
    assert section["sqlite"]["10k"] == {"p50_ms": 90.0, "build": build}  # measured: kept
    for size, chunks in (("100k", 100_000), ("1m", 1_000_000)):
        entry = section["sqlite"][size]
        assert entry["not_measured"] == "no time" and "p50_ms" not in entry  # type: ignore[operator]
        assert entry["projected_build_s"] == round(400 + (chunks - 4000) / 50)  # type: ignore[index]
    assert section["neo4j"] == {s: {"not_measured": "no time"} for s in ("10k", "100k", "1m")}
    targets = documents_scale.documents_scale_targets(section)
    assert targets["sqlite.p50_1m_over_10k"]["met"] is None and targets["neo4j.p50_1m_over_10k"]["value"] is None


async def test_a_sqlite_home_served_as_deployed_sees_the_writers_process_writes(
    servers,  # type: ignore[no-untyped-def]
    sources: Sources,
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    async with embedded(StoreSettings(home=home)) as system:
        await doc_corpus.write_public(system, "docscale", [d for docs in sources.public.values() for d in docs])
    new = distractors(CorpusSpec(1000), sources, 9_000_000, 1)[0]
    built = {"size": "1k", "home": str(home)}
    async with doc_measure.target("sqlite", built, 120.0, "fleet") as t:

        async def found() -> list[str]:
            req = LazyRagRequest(user=USER, collection=t.collection, query=new.chunk.text, operation="expand",
                                 no_llm=True)  # fmt: skip
            res = await t.lazy.request(req)
            assert res.error is None
            return [d.id for d in res.documents]

        assert t.rss_of == "the documents processor (its own process)"
        assert t.pid == t.fleet["documents"] != os.getpid() and t.fleet["document-store"] != t.pid
        assert new.document.id not in await found()  # and the documents processor's caches are warm
        wrote = await t.writer.request(StoreDocuments(user=USER, collection=t.collection, documents=[new.indexed()]))
        assert wrote.error is None
        assert new.document.id in await found()  # another process's write, seen at once
        await t.writer.request(DeleteDocuments(user=USER, collection=t.collection, document_ids=[new.document.id]))
        assert new.document.id not in await found()
        fleet = t.fleet_rss_mb()
        assert set(fleet) == set(t.fleet) and 0 < t.rss()["anon"] < fleet["documents"] < sum(fleet.values())


def test_neo4j_is_measured_as_deployed_only() -> None:
    common = ["--size", "10k", "--built", "b.json", "--plan", "p.json", "--out", "o.json"]
    assert doc_measure.parse_args(["--backend", "sqlite", *common]).topology == "embedded"
    assert doc_measure.parse_args(["--backend", "neo4j", *common]).topology == "fleet"
    assert doc_measure.parse_args(["--backend", "sqlite", "--topology", "fleet", *common]).topology == "fleet"
    with pytest.raises(SystemExit):
        doc_measure.parse_args(["--backend", "neo4j", "--topology", "embedded", *common])


async def test_the_write_rate_at_a_size_writes_new_documents_into_a_copy_of_the_built_corpus(
    sources: Sources, tmp_path: Path
) -> None:
    built = await doc_stores.ensure("sqlite", "1k", CorpusSpec(1000, batch=200), sources, False, tmp_path / "c")
    home = Path(built["home"])
    assert write_at_size.built_home("1k", tmp_path / "c") == home
    before = await _corpus(home, [])
    run = await write_at_size.measure("1k", home, sources, 50, 2, lambda _: None)
    assert await _corpus(home, []) == before  # the built corpus is left as it was
    assert run["chunks"] == 100 and len(run["seconds_per_batch"]) == 2 and run["store_write_chunks_per_s"] > 0
    copy = tmp_path / "copy"
    shutil.copytree(home, copy)
    await write_at_size.write_batches(copy, "1k", sources, 50, 2)
    docs, _, counts = await _corpus(copy, [])
    assert counts == DocumentCounts(before[2].documents + 100, before[2].chunks + 100)  # every distractor new
    assert {d[0] for d in before[0]} < {d[0] for d in docs}


def test_a_sqlite_size_measured_as_deployed_is_held_to_the_documents_processors_own_rss() -> None:
    deployed = {"rss_mb": 482.4, "rss_of": "the documents processor"}
    size = {"rss_mb": 930.2, "rss_of": "the embedded process", "as_deployed": deployed}
    targets = documents_scale.documents_scale_targets({"sqlite": {"1m": size}, "neo4j": {}})
    assert targets["sqlite.1m.rss_mb (the embedded process)"]["met"] is False
    assert targets["sqlite.1m.as_deployed.rss_mb (the documents processor)"] == {
        "value": 482.4, "target": "<= 600", "met": True,
    }  # fmt: skip
