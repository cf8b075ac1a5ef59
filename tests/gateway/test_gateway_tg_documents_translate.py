"""TrustGraph's document-rag, text-load and collection-management bodies against kgflow's schemas."""

from __future__ import annotations

import base64

import pytest

from processors.gateway import tg_documents as tgd
from processors.gateway.translate import BadRequest, NotSupported
from schemas.documents import Chunk, CollectionInfo, FailedDocument, LoadResponse
from schemas.lazy_rag import LazyRagResponse
from schemas.retrieval import DocumentRef

LABEL = "http://www.w3.org/2000/01/rdf-schema#label"


def _b64(text: str, charset: str = "utf-8") -> str:
    return base64.b64encode(text.encode(charset)).decode()


def test_document_rag_request_maps_doc_limit_and_defaults() -> None:
    req = tgd.document_rag_request({"query": "who?", "doc-limit": 3, "fetch-limit": 0, "streaming": True}, "alice")
    assert (req.user, req.collection, req.chunk_limit, req.query) == ("alice", "default", 3, "who?")
    assert tgd.document_rag_request({"query": "q"}, "u").chunk_limit == tgd.DOC_LIMIT_DEFAULT
    assert tgd.document_rag_request({"query": "q", "doc-limit": 5000}, "u").chunk_limit == tgd.MAX_DOC_LIMIT
    scoped = tgd.document_rag_request({"query": "q", "scope": {"document_ids": ["d1"]}}, "u")
    assert scoped.scope is not None and scoped.scope.document_ids == ["d1"]
    with pytest.raises(BadRequest, match="doc-limit"):
        tgd.document_rag_request({"query": "q", "doc-limit": -1}, "u")
    with pytest.raises(BadRequest, match="query"):
        tgd.document_rag_request({"collection": "c"}, "u")


def test_document_rag_response_is_one_final_rag_frame() -> None:
    res = LazyRagResponse(response="The keeper.", documents=[DocumentRef(id="d1", title="Light"), DocumentRef(id="d2")])
    wire = tgd.document_rag_response_to_wire(res)
    assert wire["response"] == "The keeper." and wire["end_of_stream"] is True
    assert "message_type" not in wire  # TrustGraph's socket client reads a frame without one as a RAG chunk
    assert wire["sources"] == [{"uri": "d1", "title": "Light"}, {"uri": "d2"}]


def test_document_rag_sources_name_the_pages_and_sections_of_their_passages() -> None:
    chunks = [
        Chunk(id="a", document_id="d1", text="x", page=7),
        Chunk(id="b", document_id="d2", text="y", section="Keeper"),
        Chunk(id="c", document_id="d1", text="z", page=3),
        Chunk(id="e", document_id="d1", text="w", page=7),
    ]
    docs = [DocumentRef(id="d1", title="Light"), DocumentRef(id="d2")]
    wire = tgd.document_rag_response_to_wire(LazyRagResponse(response="r", documents=docs, chunks=chunks))
    assert wire["sources"] == [{"uri": "d1", "title": "Light", "pages": [7, 3]}, {"uri": "d2", "sections": ["Keeper"]}]


async def test_text_load_decodes_text_and_takes_the_title_from_metadata() -> None:
    meta = [{"s": {"t": "i", "i": "doc-1"}, "p": {"t": "i", "i": LABEL}, "o": {"t": "l", "v": "A Title"}}]
    req = await tgd.text_load_request(
        {"id": "doc-1", "text": _b64("Grüße", "latin-1"), "charset": "latin-1", "metadata": meta, "collection": "c"},
        "bob",
    )
    (doc,) = req.documents
    assert (req.user, req.collection, doc.id, doc.title, doc.text) == ("bob", "c", "doc-1", "A Title", "Grüße")
    other = [{"s": {"t": "i", "i": "another"}, "p": {"t": "i", "i": LABEL}, "o": {"t": "l", "v": "Not mine"}}]
    assert (await tgd.text_load_request({"id": "d", "data": _b64("x"), "metadata": other}, "u")).documents[
        0
    ].title == ""


def _titled(doc_id: str, title: str) -> list[dict[str, object]]:
    return [{"s": {"t": "i", "i": doc_id}, "p": {"t": "i", "i": LABEL}, "o": {"t": "l", "v": title}}]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"id": "d", "text": "%%%not base64"}, "not base64"),
        ({"id": "d", "data": base64.b64encode(b"\xff\xfe\x00\x81").decode()}, "not utf-8 text"),
        ({"id": "d", "text": _b64("x"), "charset": "no-such-charset"}, "unknown charset"),
        ({"text": _b64("x")}, "id"),
        ({"id": "d"}, "base64"),
        ({"id": "d\x00x", "text": _b64("x")}, "document.id: .*control characters"),
        ({"id": "d", "text": _b64("")}, "document.text: .*empty or blank"),
        ({"id": "d", "text": _b64(" \n\t")}, "document.text: .*empty or blank"),
        ({"id": "d", "text": _b64("x"), "metadata": "a title"}, "metadata: expected a list of triples"),
        ({"id": "d", "text": _b64("x"), "metadata": [["s", "p", "o"]]}, "metadata: expected a list of triples"),
        ({"id": "d", "text": _b64("x"), "metadata": _titled("d", "T" * 3000)}, "document.title: .*2048"),
    ],
)
async def test_text_load_refuses_what_it_cannot_read(body: dict[str, object], message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        await tgd.text_load_request(body, "u")


def test_failed_load_is_an_error() -> None:
    assert tgd.load_response_to_wire(LoadResponse(loaded=1, chunks=2)) == {"loaded": 1, "unchanged": 0, "chunks": 2}
    with pytest.raises(BadRequest, match="document d: too long"):
        tgd.load_response_to_wire(LoadResponse(failed=[FailedDocument(id="d", error="too long")]))


def test_collection_management_operations() -> None:
    assert tgd.collection_operation({"operation": "list-collections"}) == ("list-collections", None)
    assert tgd.collection_operation({"operation": "delete-collection", "collection": "c"}) == ("delete-collection", "c")
    with pytest.raises(BadRequest, match="needs a collection"):
        tgd.collection_operation({"operation": "delete-collection"})
    with pytest.raises(NotSupported, match="not supported by kgflow"):
        tgd.collection_operation({"operation": "update-collection", "collection": "c"})
    infos = [CollectionInfo(collection="c", documents=2, chunks=3, entities=4, triples=5)]
    (row,) = tgd.collections_to_wire(infos)["collections"]
    assert row == {
        "collection": "c",
        "name": "c",
        "description": "2 documents, 3 chunks, 4 entities, 5 triples",
        "tags": [],
    }
    assert tgd.collections_to_wire(infos, ["tagged"]) == {"collections": []}
