"""The rows one Neo4j document write sends (pure: no server): each entity, relation, name and link
once, with what the row-per-mention write used to leave (the first mention's ownership, the first
concept key given), so the links can be CREATEd rather than MERGEd."""

from __future__ import annotations

from processors.stores.documents_protocol import DocumentRecord, Relation
from processors.stores.neo4j.doc_writes import chunk_number, write_rows
from processors.stores.neo4j.schema import entity_key, node_key
from schemas.documents import Chunk, Document, Mention
from schemas.tenant import Tenant

T = Tenant("u", "c")
A, B, C = "http://e/a", "http://e/b", "http://e/c"


def _record(doc: str, owned: set[str], keys: dict[str, str], mentions: list[tuple[int, str]]) -> DocumentRecord:
    chunks = [Chunk(id=f"{doc}:{n}", document_id=doc, ordinal=n, text=f"text {n}", start=0, end=6, tokens=2)
              for n in range(2)]  # fmt: skip
    return DocumentRecord(
        document=Document(id=doc, title="", text="text 0 text 1"),
        content_hash=doc,
        chunks=chunks,
        vectors=[[1.0, 0.0], [0.0, 1.0]],
        mentions=[Mention(chunk_id=f"{doc}:{n}", entity=e, count=1) for n, e in mentions],
        relations=[Relation(A, "http://r", B, [f"{doc}:0", f"{doc}:1", f"{doc}:0", "elsewhere:0"])],
        owned=owned,
        keys=keys,
        aliases={A: ["alias a"]},
    )


def test_each_entity_relation_and_link_once() -> None:
    first = _record("d1", {A}, {B: "b"}, [(0, A), (0, A), (1, A), (0, B)])
    second = _record("d2", set(), {A: "a"}, [(0, A), (1, C)])
    rows = write_rows(T, [first, second])
    entities = {e["iri"]: e for e in rows["entities"]}
    assert sorted(entities) == [A, B, C]
    assert entities[A]["owned"] is True  # the first mention's (d1 owns it; d2 does not)
    assert entities[A]["concept_key"] == "a"  # d1 gives no key for A: d2's is the first given
    assert entities[B]["concept_key"] == "b"
    assert [r["ekey"] for r in rows["entities"]] == sorted(r["ekey"] for r in rows["entities"])  # one lock order
    assert len(rows["relations"]) == 1  # one relation, written by both documents
    by_key = {c["key"]: c for c in rows["chunks"]}
    d1c0 = by_key[node_key(T, "d1:0")]
    at = {e["ekey"]: i for i, e in enumerate(rows["entities"])}  # a link names its node by position
    assert d1c0["mentions"] == [(at[entity_key(T, A)], 2), (at[entity_key(T, B)], 1)]  # summed, once each
    numbers = [chunk_number(node_key(T, c)) for c in ("d1:0", "d1:1", "d2:0", "d2:1")]
    assert rows["relations"][0]["src"] == numbers  # a chunk listed twice is a source once; elsewhere:0 none
    # the ends of its relations a source chunk does not mention: how its take-back finds them
    ends = {k: c["ends"] for k, c in by_key.items()}
    assert ends[node_key(T, "d1:0")] == [] and ends[node_key(T, "d1:1")] == [entity_key(T, B)]
    assert ends[node_key(T, "d2:1")] == [entity_key(T, A), entity_key(T, B)]
    assert all(node_key(T, "elsewhere:0") != k for k in by_key)  # another record's chunk gets no row
    names = [(n["name"], n["ekey"]) for n in rows["names"]]
    assert len(names) == len(set(names))  # A's alias named once for two documents
    assert ("alias a", entity_key(T, A)) in names
    assert all(rows["entities"][n["entity"]]["ekey"] == n["ekey"] for n in rows["names"])


def test_iri_edges_name_each_entity_once_by_position() -> None:
    from processors.stores.neo4j.store import _iri_edges

    rows = [
        {"sk": "k2", "s": "b", "p": "p", "o": "a", "ok": "k1"},
        {"sk": "k1", "s": "a", "p": "q", "o": "b", "ok": "k2"},
    ]
    params = _iri_edges(rows)
    assert params["nodes"] == [{"key": "k1", "iri": "a"}, {"key": "k2", "iri": "b"}]  # key order: one lock order
    assert params["rows"] == [{"s": 1, "o": 0, "p": "p"}, {"s": 0, "o": 1, "p": "q"}]


def test_a_chunk_number_is_63_bits_of_its_key_and_names_its_tenant() -> None:
    key = node_key(T, "d1:0")
    assert chunk_number(key) == chunk_number(node_key(Tenant("u", "c"), "d1:0"))  # stable
    assert 0 <= chunk_number(key) < 2**63  # a Neo4j integer (signed 64 bits)
    assert chunk_number(key) != chunk_number(node_key(Tenant("u", "other"), "d1:0"))
