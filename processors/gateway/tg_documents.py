"""TrustGraph's document services on kgflow's: `document-rag`, `text-load`, `document-load` and the
`collection-management` workspace service (trustgraph-cli 2.11.1 wire format).

- `document-rag` is answered by lazy-rag: `doc-limit` chunks of context (TrustGraph's default 10),
  the summary as `response`, the documents it rests on as `sources` (with the pages or sections of
  the passages retrieved from each). One frame even when the client
  asked for a stream (lazy-rag writes its summary in one structured call).
- `text-load` / `document-load` (TrustGraph's `flow.load_text` / `flow.load_document`) load one
  base64 document through the documents flow: text, or (document-load) a PDF's text layer, a DOCX,
  PPTX or HTML file, with its pages and headings; the title comes from an `rdfs:label`/`dc:title`
  metadata triple about the document, else from the file. The gateway decodes it off the event
  loop, in a charset documents are written in (not punycode or idna). (kgflow's own form of
  `document-load`, `{"documents": [...]}` as in schemas/documents.py, is routed by the dispatcher.)
- `collection-management`: `list-collections` (with kgflow's counts as the description) and
  `delete-collection` (every store); collections have no editable metadata in kgflow.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import codecs
from typing import Any

from processors.algorithms.wording import plural
from processors.gateway.translate import BadRequest, NotSupported, collection_of, require_object, validate_as
from processors.ingest.documents.formats import MAX_FILE_BYTES, Extracted, UnreadableFile, extract
from schemas.documents import Chunk, CollectionInfo, Document, LoadDocuments, LoadResponse
from schemas.lazy_rag import LazyRagRequest, LazyRagResponse
from schemas.retrieval import DocumentRef

DOC_LIMIT_DEFAULT = 10  # TrustGraph's own default for doc-limit
MAX_DOC_LIMIT = 100  # lazy-rag's chunk_limit bound
TITLE_PREDICATES = (
    "http://www.w3.org/2000/01/rdf-schema#label",
    "http://purl.org/dc/terms/title",
    "http://purl.org/dc/elements/1.1/title",
    "https://schema.org/name",
    "http://schema.org/name",
)
COLLECTION_OPS = ("list-collections", "delete-collection")
MAX_ENCODED_CHARS = MAX_FILE_BYTES * 4 // 3 + 4  # base64 of the largest document file
# Codecs for domain names, not documents; punycode's decoder is quadratic (1 MB: 7 s of CPU).
NOT_DOCUMENT_CHARSETS = {"punycode", "idna"}


def codecs_name(charset: str) -> str:
    """The codec's canonical name (`PunyCode` -> `punycode`), or the name as given if unknown."""
    try:
        return codecs.lookup(charset).name
    except LookupError:
        return charset


def document_rag_request(wire: Any, user: str) -> LazyRagRequest:
    """A TrustGraph document-rag request as a lazy-rag question for `user`."""
    wire = require_object(wire)
    limit = wire.get("doc-limit", wire.get("doc_limit")) or DOC_LIMIT_DEFAULT
    if not isinstance(limit, int) or limit < 1:
        raise BadRequest("invalid request: doc-limit: expected a positive integer")
    data: dict[str, Any] = {
        "user": user,
        "query": wire.get("query"),
        "collection": collection_of(wire),
        "chunk_limit": min(limit, MAX_DOC_LIMIT),
    }
    if wire.get("scope") is not None:
        data["scope"] = wire["scope"]
    return validate_as(LazyRagRequest, data)


def document_rag_response_to_wire(res: LazyRagResponse) -> dict[str, Any]:
    """A lazy-rag answer as a TrustGraph document-rag frame (kgflow's evidence rides along)."""
    d: dict[str, Any] = {
        "response": res.response,
        "end_of_stream": True,
        "end_of_session": True,
        "sources": [_source(doc, res.chunks) for doc in res.documents],
        "confidence": res.confidence,
        "missing_info": res.missing_info,
    }
    for name in ("model", "in_token", "out_token"):
        if getattr(res, name) is not None:
            d[name] = getattr(res, name)
    if res.stats is not None:
        d["stats"] = res.stats.model_dump()
    return d


def _source(doc: DocumentRef, chunks: list[Chunk]) -> dict[str, Any]:
    """A source document as TrustGraph names it (`uri`, `title`), with the pages (PDF pages, slides)
    or sections of its retrieved chunks, the best chunk's first."""
    mine = [c for c in chunks if c.document_id == doc.id]
    pages = list(dict.fromkeys(c.page for c in mine if c.page))
    sections = list(dict.fromkeys(c.section for c in mine if c.section and not c.page))
    out: dict[str, Any] = {"uri": doc.id, "title": doc.title, "pages": pages, "sections": sections}
    return {k: v for k, v in out.items() if v}


def _title(wire_metadata: Any, doc_id: str) -> str:
    """The title a TrustGraph metadata triple gives the document (empty when none does); metadata
    that is not a list of triples is refused, not ignored."""
    if wire_metadata is None:
        return ""
    if not isinstance(wire_metadata, list) or not all(isinstance(t, dict) for t in wire_metadata):
        raise BadRequest("invalid request: metadata: expected a list of triples ({s, p, o} objects)")
    for t in wire_metadata:
        s, p, o = (t.get(k) if isinstance(t.get(k), dict) else {} for k in ("s", "p", "o"))
        if p.get("i") in TITLE_PREDICATES and s.get("i") in (doc_id, None) and isinstance(o.get("v"), str):
            return o["v"]
    return ""


async def text_load_request(wire: Any, user: str) -> LoadDocuments:
    """A TrustGraph `text-load` (`text`: text in `charset`) or `document-load` (`data`: a file — PDF,
    DOCX, PPTX, HTML or text, told apart by its bytes, a `kind` content type or the id's
    extension) body as one document to load. Decoding and file parsing run off the event loop and
    are bounded by size; an unreadable file is refused with the reason."""
    wire = require_object(wire)
    field = "text" if "text" in wire else "data"
    encoded, doc_id = wire.get(field), wire.get("id")
    if not isinstance(encoded, str):
        raise BadRequest(f"invalid request: {field}: expected the document as base64")
    if len(encoded) > MAX_ENCODED_CHARS:
        raise BadRequest(f"invalid request: {field}: over {MAX_FILE_BYTES:,} bytes (the limit for one document)")
    if not isinstance(doc_id, str) or not doc_id:
        doc_id = str(doc_id) if isinstance(doc_id, int) else ""
    if not doc_id:
        raise BadRequest("invalid request: id: a document id is required")
    charset = wire.get("charset") or "utf-8"
    kind = wire.get("kind") or wire.get("content-type") or ""
    if not isinstance(charset, str) or not isinstance(kind, str):
        raise BadRequest("invalid request: charset and kind are strings")
    if codecs_name(charset) in NOT_DOCUMENT_CHARSETS:
        raise BadRequest(f"invalid request: charset: {charset!r} is not a charset documents are written in")
    found = await asyncio.to_thread(_decoded, encoded, field, doc_id, kind, charset)
    title = _title(wire.get("metadata"), doc_id) or found.title
    doc = validate_as(Document, {"id": doc_id, "title": title, "text": found.text, "sections": found.sections},
                      "document.")  # fmt: skip
    return validate_as(LoadDocuments, {"user": user, "collection": collection_of(wire), "documents": [doc]})


def _decoded(encoded: str, field: str, doc_id: str, kind: str, charset: str) -> Extracted:
    """The document's text: base64 decoded, then the text decoded or the file read (CPU work)."""
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as e:
        raise BadRequest(f"invalid request: {field}: not base64 ({e})") from None
    try:
        if field == "text":
            return Extracted(data.decode(charset), [])
        return extract(data, doc_id, kind, charset)
    except UnicodeDecodeError as e:
        raise BadRequest(f"invalid request: {field}: not {charset} text ({e.reason} at byte {e.start})") from None
    except LookupError:
        raise BadRequest(f"invalid request: charset: unknown charset {charset!r}") from None
    except UnreadableFile as e:
        raise BadRequest(f"document {doc_id}: {e}") from None


def load_response_to_wire(res: LoadResponse) -> dict[str, Any]:
    """What the load did; a failed document is an error (TrustGraph clients raise on it)."""
    if res.failed:
        raise BadRequest("; ".join(f"document {f.id}: {f.error}" for f in res.failed))
    return {"loaded": res.loaded, "unchanged": res.unchanged, "chunks": res.chunks}


def collection_operation(wire: Any) -> tuple[str, str | None]:
    """(operation, collection) of a collection-management request; unsupported operations refused."""
    wire = require_object(wire)
    op = wire.get("operation")
    if op not in COLLECTION_OPS:
        raise NotSupported(
            f"operation: collection-management operation {op!r} is not supported by kgflow "
            f"(supported: {', '.join(COLLECTION_OPS)}; collections have no editable metadata)"
        )
    collection = wire.get("collection")
    if op == "delete-collection" and (not isinstance(collection, str) or not collection):
        raise BadRequest("invalid request: collection: delete-collection needs a collection")
    return op, collection


def collections_to_wire(infos: list[CollectionInfo], tag_filter: Any = None) -> dict[str, Any]:
    """`list-collections` as TrustGraph reads it; kgflow's counts are the description (no tags)."""
    if tag_filter:  # kgflow collections carry no tags: a filter matches none
        return {"collections": []}
    return {
        "collections": [
            {
                "collection": c.collection,
                "name": c.collection,
                "description": (
                    f"{plural(c.documents, 'document')}, {plural(c.chunks, 'chunk')}, {plural(c.entities, 'entity')}, "
                    f"{plural(c.triples, 'triple')}"
                ),
                "tags": [],
            }
            for c in infos
        ]
    }
