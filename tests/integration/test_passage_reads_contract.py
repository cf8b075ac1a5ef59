"""graphrank's reads on SQLite and on the real Neo4j, one contract (oracles from the records): the
concepts a question names (with their subject chunks, nearest first), and one hop's links — a
source's concepts (its mentions and the subjects its text names, never its own subject), each
concept's chunks read up to the cap (more: none, and a df of cap + 1), subjects, and the cosine of
every chunk reached — all inside the scope. Cosines within 1e-4: SQLite keeps chunk vectors in float16."""

from __future__ import annotations

import pytest

from processors.accounting.usage import counting
from processors.algorithms.passage_rank import question_phrases
from processors.stores.documents_protocol import ChunkQuery, DocumentRecord
from schemas.documents import Mention, Scope
from schemas.tenant import Tenant
from tests.integration.doc_store_fixtures import DocBackend, e, record, reference_cosines
from tests.integration.store_fixtures import near, unit


def corpus() -> list[DocumentRecord]:
    """curie (about Marie Curie), paris (about Paris, names Marie Curie in its text), warsaw
    (mentions curie by extraction), and three documents that all mention the hub `city`."""
    docs = [
        record("curie", ["Marie Curie studied in Paris.", "She won two prizes."],
               mentions=[(0, "curie", 1), (0, "paris", 1), (1, "curie", 1)]),
        record("paris", ["Paris honours Marie Curie with a museum."], mentions=[(0, "paris", 1), (0, "city", 1)]),
        record("warsaw", ["Warsaw is where she was born."], mentions=[(0, "curie", 1), (0, "city", 1)]),
        *(record(f"hub{i}", [f"Another city {i}."], mentions=[(0, "city", 1)]) for i in range(3)),
    ]  # fmt: skip
    subjects = {"curie": "curie", "paris": "paris"}
    for r in docs:
        r.keys = {e("curie"): "marie curie", e("paris"): "paris", e("city"): "city"}
        r.title_entity = e(subjects[r.document.id]) if r.document.id in subjects else None
        # seeded by the id's letters, not its length: curie and paris had one vector, a tie either store may break
        r.vectors = [near(unit(42), n + 7 * sum(map(ord, r.document.id)), 0.7) for n in range(len(r.chunks))]
        if r.title_entity:  # a document's title is a mention of each of its chunks, as indexing makes it
            r.mentions += [Mention(chunk_id=c.id, entity=r.title_entity, count=1) for c in r.chunks]
    return docs


async def stored(docs: DocBackend, seed: int) -> tuple[list[DocumentRecord], list[float], ChunkQuery]:
    """The corpus stored in a fresh collection, a question vector near it, and the question's reads."""
    user, coll = docs.scope()
    records = corpus()
    await docs.documents.store(Tenant(user, coll), records)
    vector = near(unit(42), seed, 0.7)
    return records, vector, ChunkQuery(Tenant(user, coll), vector)


def scoped(q: ChunkQuery, *document_ids: str) -> ChunkQuery:
    return ChunkQuery(q.tenant.scoped(Scope(document_ids=list(document_ids))), q.vector)


async def test_named_concepts_come_with_their_nearest_subject_chunks(docs: DocBackend) -> None:
    records, vector, q = await stored(docs, 3)
    phrases = question_phrases("Where did Marie Curie study, and which city?")
    got = await docs.documents.named(q, phrases)
    cos = reference_cosines(records, vector)
    assert set(got) == {"marie curie", "city"}
    iri, subjects = got["marie curie"]
    assert iri == e("curie") and [p.id for p in subjects] == sorted(["curie:0", "curie:1"], key=lambda c: -cos[c])
    assert [p.dense for p in subjects] == pytest.approx([cos[p.id] for p in subjects], abs=1e-4)
    assert got["city"] == (e("city"), [])  # a concept no chunk is about
    in_scope = await docs.documents.named(scoped(q, "hub0", "warsaw"), phrases)
    assert set(in_scope) == {"marie curie", "city"}
    assert in_scope["marie curie"][1] == []  # mentioned in scope, its subject not
    assert await docs.documents.named(scoped(q, "hub0"), phrases) == {"city": (e("city"), [])}


async def test_a_hop_reads_concepts_subjects_and_chunks_up_to_the_cap(docs: DocBackend) -> None:
    records, vector, q = await stored(docs, 5)
    cos = reference_cosines(records, vector)
    hop = await docs.documents.passage_links(q, ["paris:0", "curie:0"], set(), 3, {"paris:0"})
    # paris:0 mentions paris (its own subject: left out) and city, and its text names Marie Curie (a subject)
    assert sorted(hop.concepts_of["paris:0"]) == [e("city"), e("curie")]
    assert sorted(hop.concepts_of["curie:0"]) == [e("paris")]  # curie is its own subject
    city, curie, paris = hop.concepts[e("city")], hop.concepts[e("curie")], hop.concepts[e("paris")]
    assert city.df == 4 and city.chunks == [] and city.subjects == []  # 5 chunks > cap 3: not read
    assert curie.df == 3 and sorted(curie.chunks) == ["curie:0", "curie:1", "warsaw:0"]
    assert sorted(curie.subjects) == ["curie:0", "curie:1"]
    assert sorted(paris.chunks) == ["curie:0", "paris:0"] and paris.subjects == ["paris:0"]
    assert {p.id for p in hop.passages} == {"curie:0", "curie:1", "warsaw:0"}  # paris:0 is known
    assert all(p.dense == pytest.approx(cos[p.id], abs=1e-4) for p in hop.passages)

    # cap 2: curie (3 chunks) carries no hop, so neither its chunks nor its subjects are read and
    # curie:1, reached only through it, is not a passage of the hop (graphrank would not rank it)
    tight = await docs.documents.passage_links(q, ["paris:0", "curie:0"], set(), 2, {"paris:0"})
    over = tight.concepts[e("curie")]
    assert over.df == 3 and over.chunks == [] and over.subjects == []
    assert sorted(tight.concepts[e("paris")].chunks) == ["curie:0", "paris:0"]
    assert {p.id for p in tight.passages} == {"curie:0"}

    skipped = await docs.documents.passage_links(q, ["paris:0"], {e("curie")}, 10, set())
    assert set(skipped.concepts) == {e("city")} and len(skipped.concepts[e("city")].chunks) == 5

    in_scope = await docs.documents.passage_links(scoped(q, "paris", "warsaw", "hub0"), ["paris:0"], set(), 3, set())
    assert sorted(in_scope.concepts_of["paris:0"]) == [e("city")]  # curie's subject chunks are out of scope
    assert sorted(in_scope.concepts[e("city")].chunks) == ["hub0:0", "paris:0", "warsaw:0"]
    assert {p.id for p in in_scope.passages} <= {"paris:0", "warsaw:0", "hub0:0"}


async def test_candidates_carry_cosines_and_the_chunks_searched(docs: DocBackend) -> None:
    records, vector, q = await stored(docs, 9)
    cos = reference_cosines(records, vector)
    found = await docs.documents.candidates(q, ["museum"], 2)
    assert found.searched == 7
    lexical = [p for p in found.passages if p.lexical > 0]
    assert [p.id for p in lexical] == ["paris:0"]
    dense = sorted(cos, key=lambda c: -cos[c])[:2]
    assert {p.id for p in found.passages} == {*dense, "paris:0"}
    assert all(p.dense == pytest.approx(cos[p.id], abs=1e-4) for p in found.passages)
    in_scope = await docs.documents.candidates(scoped(q, "warsaw", "hub1"), ["museum"], 2)
    assert in_scope.searched == 2 and {p.id for p in in_scope.passages} == {"warsaw:0", "hub1:0"}
    among = await docs.documents.candidates(q, ["museum"], 5, among=["curie:1", "paris:0"])
    assert {p.id for p in among.passages} == {"curie:1", "paris:0"} and among.searched == 2


async def test_a_follow_up_round_reads_each_questions_candidates_at_once(docs: DocBackend) -> None:
    """`candidates_many` answers each (vector, terms) as `candidates` would, in one store call, in
    the scope; the named concepts come with the candidates when phrases are given."""
    records, vector, q = await stored(docs, 9)
    other = near(unit(42), 3, 0.7)
    asked = [(vector, ["museum"]), (other, ["prizes", "born"]), (None, ["city"])]
    for scope in ((), ("warsaw", "hub1", "paris")):
        sq = scoped(q, *scope) if scope else q
        with counting() as usage:
            many = await docs.documents.candidates_many(sq.tenant, asked, 3)
        assert usage.round_trips == 1
        one = [await docs.documents.candidates(ChunkQuery(sq.tenant, v), terms, 3) for v, terms in asked]
        assert [sorted((p.id, round(p.dense, 5), round(p.lexical, 5)) for p in c.passages) for c in many] == [
            sorted((p.id, round(p.dense, 5), round(p.lexical, 5)) for p in c.passages) for c in one
        ]
        assert [c.searched for c in many] == [c.searched for c in one]
    with_names = await docs.documents.candidates(q, ["museum"], 2, phrases=question_phrases("Where is Marie Curie?"))
    assert with_names.named == await docs.documents.named(q, question_phrases("Where is Marie Curie?"))
    assert "marie curie" in with_names.named
