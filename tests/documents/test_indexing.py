"""Indexing without a model, as pure functions and over fake sources: content hashes, concepts
(titles included), sentence co-occurrences, linking to existing entities, failure isolation."""

from __future__ import annotations

import pytest

from processors.algorithms.iris import RELATED_TO, concept_iri
from processors.ingest.document_store.linking import link, unlinked_triples
from processors.ingest.documents.chunker import ChunkingParams
from processors.ingest.documents.pipeline import (
    CollectionDeleted,
    chunk_document,
    content_hash,
    embedded_text,
    index_document,
    load_batch,
)
from processors.models.embeddings.model import plain_tokenizer
from schemas.documents import Chunk, Document, IndexedDocument
from schemas.extraction import ConceptMention
from schemas.terms import RDFS_LABEL


def mention(key: str, sentence: int = 0, label: str | None = None, **more: object) -> ConceptMention:
    return ConceptMention(key=key, label=label or key.title(), sentence=sentence, **more)


def test_content_hash_changes_with_what_is_stored() -> None:
    doc = Document(id="d", title="T", text="x")
    assert content_hash(doc) == content_hash(doc.model_copy())
    for change in ({"text": "y"}, {"title": "U"}, {"metadata": {"k": 1}}):
        assert content_hash(doc.model_copy(update=change)) != content_hash(doc)


def test_index_document_concepts_titles_and_sentence_pairs() -> None:
    doc = Document(id="d1", title="Neil Peart", text="Neil Peart was the drummer of Rush.")
    chunks = [Chunk(id="c1", document_id="d1", text="a"), Chunk(id="c2", document_id="d1", text="b")]
    found = [
        [mention("rush", 0), mention("drummer", 0), mention("toronto", 1), mention("rush", 1)],
        [mention("drummer", 0)],
    ]
    out = index_document(doc, chunks, [[1.0], [0.0]], found)
    assert {c.key: c.label for c in out.concepts}["neil peart"] == "Neil Peart"
    counts = {(m.chunk_id, m.key): m.count for m in out.mentions}
    assert counts[("c1", "rush")] == 2 and counts[("c1", "neil peart")] == 1 and counts[("c2", "neil peart")] == 1
    pairs = {(c.a, c.b): c.chunk_ids for c in out.cooccurrences}
    assert pairs[("drummer", "rush")] == ["c1"]  # same sentence
    assert ("rush", "toronto") in pairs  # sentence 1
    assert ("drummer", "toronto") not in pairs  # never in one sentence
    assert pairs[("neil peart", "rush")] == ["c1"]  # the title joins each chunk's first sentence
    assert pairs[("drummer", "neil peart")] == ["c1", "c2"]


def test_a_title_that_names_nothing_in_the_text_is_no_subject_and_the_first_sentence_names_one() -> None:
    chunks = [Chunk(id="c1", document_id="d", text="a"), Chunk(id="c2", document_id="d", text="b")]
    found = [[mention("microsoft", 0, "Microsoft", kind="entity:ORG", subject=True), mention("revenue", 0)],
             [mention("cloud", 0)]]  # fmt: skip
    doc = Document(id="d", title="TranscriptFY14Q4.txt", text="Microsoft reported revenue. The cloud grew.")
    out = index_document(doc, chunks, [[1.0], [0.0]], found)
    keys = {c.key for c in out.concepts}
    assert "transcriptfy14q4 txt" not in keys and out.subject_key == "microsoft"
    assert {(m.chunk_id, m.key) for m in out.mentions} >= {("c1", "microsoft"), ("c2", "microsoft")}  # every chunk
    untitled = index_document(doc.model_copy(update={"title": ""}), chunks, [[1.0], [0.0]], found)
    assert untitled.subject_key == "microsoft"
    plain = [[mention("revenue", 0)], [mention("cloud", 0)]]
    assert index_document(doc.model_copy(update={"title": ""}), chunks, [[1.0], [0.0]], plain).subject_key == ""


def test_a_title_that_reads_as_a_name_is_the_subject_though_the_text_does_not_repeat_it() -> None:
    chunks = [Chunk(id="c1", document_id="d", text="a")]
    found = [[mention("play", 0, "play", subject=True), mention("interviews", 0)]]
    doc = Document(id="d", title="The Laramie Project", text="The play draws on interviews.")
    assert index_document(doc, chunks, [[1.0]], found).subject_key == "laramie project"
    for title in ("laramie_project_notes", "Q3 2014 Earnings", "notes on a play we saw in the city"):
        assert index_document(doc.model_copy(update={"title": title}), chunks, [[1.0]], found).subject_key == "play"


def test_other_names_of_one_entity_in_a_document_are_one_concept_with_aliases() -> None:
    chunks = [Chunk(id="c1", document_id="d", text="a"), Chunk(id="c2", document_id="d", text="b")]
    found = [
        [mention("neil ellwood peart", 0, "Neil Ellwood Peart", kind="entity:PERSON", subject=True,
                 aliases=["neil peart"]), mention("rush", 0)],
        [mention("peart", 0, "Peart", kind="entity:ORG"), mention("neil peart", 1, "Neil Peart")],
    ]  # fmt: skip
    doc = Document(id="d", title="", text="Neil Ellwood Peart played in Rush. Peart, or Neil Peart, wrote.")
    out = index_document(doc, chunks, [[1.0], [0.0]], found)
    concepts = {c.key: c for c in out.concepts}
    assert set(concepts) == {"neil peart", "rush"}  # a person is keyed by first and last name
    assert set(concepts["neil peart"].aliases) == {"neil ellwood peart", "peart"}
    assert concepts["neil peart"].label in ("Neil Ellwood Peart", "Neil Peart")
    counts = {(m.chunk_id, m.key): m.count for m in out.mentions}
    assert counts[("c2", "neil peart")] == 3  # Peart, Neil Peart and the subject itself


def test_a_concept_is_labelled_by_its_own_key_not_by_a_more_frequent_other_name() -> None:
    # labelled "Falls", devon_falls would be the entity a later document's "Falls" links to
    chunks = [Chunk(id="c1", document_id="d", text="a")]
    found = [[mention("devon falls", 0, "Devon Falls", aliases=["falls"]), mention("falls", 1, "Falls"),
              mention("falls", 2, "Falls")]]  # fmt: skip
    doc = Document(id="d", title="", text="Devon Falls, known as Falls. Falls is high. Falls falls.")
    concepts = {c.key: c for c in index_document(doc, chunks, [[1.0]], found).concepts}
    assert set(concepts) == {"devon falls"} and concepts["devon falls"].aliases == ["falls"]
    assert concepts["devon falls"].label == "Devon Falls"


def test_a_persons_full_name_is_keyed_by_first_and_last_name_whatever_the_order() -> None:
    chunks = [Chunk(id="c1", document_id="d", text="a")]
    full = [[mention("marie skłodowska curie", 0, "Marie Skłodowska-Curie", kind="entity:PERSON", subject=True,
                     aliases=["marie curie"])]]  # fmt: skip
    short = [[mention("marie curie", 0, "Marie Curie", kind="entity:PERSON")]]
    a = index_document(Document(id="a", text="Marie Skłodowska-Curie was a physicist."), chunks, [[1.0]], full)
    b = index_document(Document(id="b", text="Marie Curie won."), chunks, [[1.0]], short)
    assert [c.key for c in a.concepts] == [c.key for c in b.concepts] == ["marie curie"]
    assert "marie skłodowska curie" in a.concepts[0].aliases and a.concepts[0].label == "Marie Skłodowska-Curie"
    for order in ([a, b], [b, a]):  # one IRI, linked in either order, with no lookup of what is stored
        linked = link(order, {})
        assert {m.entity for r in linked.records for m in r.mentions} == {concept_iri("marie curie")}


def test_chunk_ids_are_stable_and_text_addressed() -> None:
    tok = plain_tokenizer()
    doc = Document(id="d", title="t", text="One sentence here. Another one there.")
    a = chunk_document(doc, tok, ChunkingParams())
    assert [c.id for c in a] == [c.id for c in chunk_document(doc, tok, ChunkingParams())]
    changed = chunk_document(doc.model_copy(update={"text": "One sentence here. Changed."}), tok, ChunkingParams())
    assert changed[0].id != a[0].id
    assert a[0].text == doc.text and a[0].start == 0


def test_linking_reuses_existing_entities_and_mints_the_rest() -> None:
    doc = IndexedDocument.model_validate(
        {
            "document": {"id": "d", "text": "x"},
            "content_hash": "h",
            "chunks": [{"id": "c1", "document_id": "d", "text": "x"}],
            "vectors": [[1.0]],
            "concepts": [{"key": "marie curie", "label": "Marie Curie"}, {"key": "radium", "label": "radium"}],
            "mentions": [{"chunk_id": "c1", "key": "marie curie"}, {"chunk_id": "c1", "key": "radium", "count": 2}],
            "cooccurrences": [{"a": "marie curie", "b": "radium", "chunk_ids": ["c1"]}],
        }
    )
    linked = link([doc], {"marie curie": "http://x/e/Marie_Curie"})
    (rec,) = linked.records
    assert {m.entity for m in rec.mentions} == {"http://x/e/Marie_Curie", concept_iri("radium")}
    assert rec.owned == {concept_iri("radium")} and linked.new_concepts == {concept_iri("radium"): "radium"}
    assert rec.spellings == {concept_iri("radium"): {"radium": 2}}  # its spelling, by its mentions
    s, o = sorted(["http://x/e/Marie_Curie", concept_iri("radium")])
    assert linked.relations == {(s, RELATED_TO, o)} and rec.relations[0].chunk_ids == ["c1"]
    triples = linked.triples()
    assert any(t.p.value == RDFS_LABEL and t.o.value == "radium" for t in triples)
    assert not any(t.s.value == "http://x/e/Marie_Curie" and t.p.value == RDFS_LABEL for t in triples)
    assert len(unlinked_triples([(s, RELATED_TO, o)], {concept_iri("radium"): "radium"})) == 2


class FakeSources:
    """Records what indexing asks of the system; refuses to store documents named 'bad'."""

    def __init__(self, stored: dict[str, str] | None = None) -> None:
        self.stored_hashes = stored or {}
        self.stored: list[str] = []
        self.embedded = 0

    async def hashes(self, ids: list[str]) -> dict[str, str]:
        return {i: h for i, h in self.stored_hashes.items() if i in ids}

    async def begin(self) -> None:
        pass

    async def finish(self) -> None:
        pass

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.embedded += len(texts)
        return [[1.0, 0.0] for _ in texts]

    async def extract(self, texts: list[str]) -> list[list[ConceptMention]]:
        return [[mention(w.lower().strip(".")) for w in t.split()[:2]] for t in texts]

    async def store(self, documents: list[IndexedDocument]) -> list[str]:
        if any(d.document.id.startswith("bad") for d in documents):
            raise ValueError("refused")
        self.stored += [d.document.id for d in documents if not d.document.id.startswith("gone")]
        return [d.document.id for d in documents if d.document.id.startswith("gone")]  # deleted meanwhile


async def test_a_document_deleted_while_its_load_ran_is_reported_by_name_not_counted_loaded() -> None:
    docs = [Document(id="d0", title="t", text="Alpha beta."), Document(id="gone1", title="g", text="Gamma delta.")]
    sources = FakeSources()
    report = await load_batch(sources, docs, plain_tokenizer(), ChunkingParams(), lambda s, n: None)
    assert report.loaded == 1 and sources.stored == ["d0"]
    assert report.failed == {"gone1": "deleted after this load began: not stored"}


async def test_load_batch_skips_unchanged_and_isolates_a_failing_document() -> None:
    docs = [Document(id=f"d{i}", title=f"t{i}", text=f"Alpha beta {i}.") for i in range(3)]
    docs.append(Document(id="bad1", title="b", text="Gamma delta."))
    sources = FakeSources({"d0": content_hash(docs[0]), "d1": "old-hash"})
    steps: list[tuple[str, int]] = []
    report = await load_batch(sources, docs, plain_tokenizer(), ChunkingParams(), lambda s, n: steps.append((s, n)))
    assert report.unchanged == 1 and report.loaded == 2 and list(report.failed) == ["bad1"]
    assert sources.stored == ["d1", "d2"] and sources.embedded == 3  # d0 was never embedded
    assert [s for s, _ in steps] == ["unchanged", "embedded", "extracted", "stored"]
    assert report.chunks == 2 and report.mentions > 0


@pytest.mark.parametrize("n", [1, 2])
async def test_a_lone_failing_document_is_reported_not_raised(n: int) -> None:
    docs = [Document(id=f"bad{i}", title="b", text="Gamma delta.") for i in range(n)]
    report = await load_batch(FakeSources(), docs, plain_tokenizer(), ChunkingParams())
    assert sorted(report.failed) == [d.id for d in docs] and report.loaded == 0


async def test_a_deleted_collection_stops_the_batch_without_retrying_each_document() -> None:
    """The store refuses a write to a collection deleted since the load began: the refusal ends the
    batch (the load stops) instead of being retried document by document as a failure."""

    class Refusing(FakeSources):
        calls = 0

        async def store(self, documents: list[IndexedDocument]) -> list[str]:
            self.calls += 1
            raise CollectionDeleted("collection alice/c was deleted after this load began: not stored")

    docs = [Document(id=f"d{n}", title="t", text="Alpha beta.") for n in range(3)]
    sources = Refusing()
    with pytest.raises(CollectionDeleted):
        await load_batch(sources, docs, plain_tokenizer(), ChunkingParams(), lambda s, n: None)
    assert sources.calls == 1


async def test_chunks_are_embedded_shortest_first_and_each_keeps_its_own_vector() -> None:
    """Requests hold chunks of about one length (fewer, fuller model calls), and each vector still
    goes back to its own chunk."""

    class Measuring(FakeSources):
        requests: list[list[str]] = []
        indexed: list[IndexedDocument] = []

        async def embed(self, texts: list[str]) -> list[list[float]]:
            self.requests.append(texts)
            return [[float(len(t)), 0.0] for t in texts]

        async def store(self, documents: list[IndexedDocument]) -> list[str]:
            self.indexed += documents
            return []

    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    docs = [Document(id=f"d{n}", title=f"t{n}", text=" ".join(words[: 10 - n]) + ".") for n in range(8)]
    sources = Measuring()
    await load_batch(sources, docs, plain_tokenizer(), ChunkingParams())
    sent = [t for r in sources.requests for t in r]
    assert [len(t) for t in sent] == sorted(len(t) for t in sent) != [len(t) for t in sent[::-1]]
    for d in sources.indexed:
        assert [v[0] for v in d.vectors] == [float(len(embedded_text(c))) for c in d.chunks]
