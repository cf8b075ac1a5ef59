"""Documents: what a user loads, the chunks and concepts indexing makes of it, the scope a
retrieval request narrows to, and the `documents` service (store-facing) that holds them."""

from __future__ import annotations

import unicodedata
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationInfo, field_validator

from schemas.base import MAX_QUERY_CHARS, Message, Notice, Response, ScopedRequest
from schemas.graph_embeddings import EntityMatch
from schemas.listings import CollectionInfo, DocumentInfo
from schemas.retrieval import RelationshipRef, SearchMode, SearchText
from schemas.scope import MetadataValue, Scope

# The most text one document may hold: what a load can carry and index in one request. A document's
# store request holds its chunks' vectors (~10.5 kB a chunk of ~630 characters): 300,000 characters
# made a 5.06 MB message against Pulsar's 5 MB; 250,000 (~400 chunks) also index well inside the
# handler timeout (300 s) on a busy 2-core machine (7 chunks/s embedded at load 10).
MAX_DOCUMENT_CHARS = 250_000
MAX_TITLE_CHARS = 2048
MAX_CONCEPT_CHARS = 512  # a concept's key and label: a name, not a sentence


class Section(BaseModel):
    """Where the document's text from `start` (a character offset) on comes from in its file: the
    page (a PDF page, a slide; from 1) and the heading it falls under. Set by the file readers."""

    model_config = ConfigDict(extra="forbid")

    start: int = Field(ge=0)
    page: int | None = Field(default=None, ge=1)
    heading: str = Field(default="", max_length=512)


class Document(BaseModel):
    """A document as a user loads it; `id` and `title` are kept and returned as given."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=512)
    title: str = Field(default="", max_length=MAX_TITLE_CHARS)
    text: str = Field(max_length=MAX_DOCUMENT_CHARS)
    timestamp: datetime | None = None
    metadata: dict[str, MetadataValue | list[MetadataValue]] = Field(default={}, max_length=256)
    # In `start` order; left off the wire when empty, so a processor that predates sections still
    # takes the document (Document forbids unknown fields).
    sections: list[Section] = Field(default=[], max_length=100_000, exclude_if=lambda v: not v)

    @field_validator("sections")
    @classmethod
    def _in_order(cls, v: list[Section]) -> list[Section]:
        if any(b.start < a.start for a, b in zip(v, v[1:], strict=False)):
            raise ValueError("sections must be in `start` order")
        return v

    @field_validator("id", "text")
    @classmethod
    def _readable(cls, v: str, info: ValidationInfo) -> str:
        # An id is shown, listed and matched as typed: a NUL or newline in it cannot be.
        if info.field_name == "id" and any(unicodedata.category(c) == "Cc" for c in v):
            raise ValueError("an id may not contain control characters (NUL, newline, tab, ...)")
        if info.field_name == "text" and not v.strip():
            raise ValueError("a document needs text (this one is empty or blank)")
        return v


class Chunk(BaseModel):
    """A window of a document's text, as stored and as retrieval returns it."""

    id: str
    document_id: str
    ordinal: int = 0
    text: str
    start: int = 0  # character offsets in the document's text
    end: int = 0
    tokens: int = 0
    title: str = ""  # the document's title
    score: float | None = None
    page: int | None = None  # where in the file it starts: PDF page or slide (from 1), when the file has pages
    section: str = ""  # the heading it falls under, when the file has headings


class Mention(BaseModel):
    """A chunk mentions an entity (a concept IRI of the collection's graph) `count` times."""

    chunk_id: str
    entity: str
    count: int = 1


class ConceptRef(BaseModel):
    """A concept of a document: its normalised key and the label it gets if it is new."""

    key: str = Field(min_length=1, max_length=MAX_CONCEPT_CHARS)
    label: str = Field(min_length=1, max_length=MAX_CONCEPT_CHARS)
    aliases: list[str] = Field(default=[], max_length=64)  # other keys of the concept ("neil peart")


class KeyedMention(BaseModel):
    """A chunk mentions the concept with this key `count` times."""

    chunk_id: str
    key: str
    count: int = 1


class CoOccurrence(BaseModel):
    """Two concepts (by key) named in one sentence of these chunks."""

    a: str
    b: str
    chunk_ids: list[str]


class KeyedRelation(BaseModel):
    """A typed relation an extractor found, by concept key, and the chunks that state it."""

    s: str
    p: str  # the predicate's normalised words ("born in")
    o: str
    chunk_ids: list[str]


class IndexedDocument(BaseModel):
    """Everything indexing made of one document; the documents service links its concepts to the
    collection's entities (a concept whose label names an existing entity is that entity)."""

    document: Document
    content_hash: str
    chunks: list[Chunk]
    vectors: list[list[float]]  # one per chunk
    concepts: list[ConceptRef] = []
    mentions: list[KeyedMention] = []
    cooccurrences: list[CoOccurrence] = []
    relations: list[KeyedRelation] = []  # typed relations (the `llm` extractor only)
    # The document's subject (a concept of every chunk): its title's when the title names something
    # the text names, else its first sentence's; "" when it has neither.
    subject_key: str = ""


# --- the `documents` service --------------------------------------------------------------------
class ScopedDocRequest(ScopedRequest):
    """A documents-service request: user + collection, and an optional narrower scope."""

    scope: Scope | None = None


class StoreDocuments(ScopedRequest):
    """Write indexed documents (replacing earlier versions of the same ids); `started`: the mark of
    the `write-mark` that preceded it (else the store marks the collection itself)."""

    operation: Literal["store"] = "store"
    documents: list[IndexedDocument] = Field(min_length=1, max_length=512)
    started: float | None = None
    stamp: float | None = None  # the load's write stamp: a later delete refuses the write (or a document)
    requested: float | None = None  # an earlier kgflow's wall-clock stamp: accepted, not read


class WriteMark(ScopedRequest):
    """Mark the collection incomplete before a load's work (queries warn until the store that
    follows, or a later one, finishes; the response's `started` identifies the mark), or with
    `finish`, clear that mark (a load that found nothing to store)."""

    operation: Literal["write-mark"] = "write-mark"
    finish: float | None = None
    stamp: float | None = None  # the load's write stamp: refused if the collection was deleted since


class DocumentStatus(ScopedDocRequest):
    """Content hashes of these documents (to skip unchanged ones on reload); the write stamp."""

    operation: Literal["status"] = "status"
    document_ids: list[str] = Field(min_length=1, max_length=10_000)


class ChunkSearch(ScopedDocRequest):
    """Chunks by vector and/or text, fused by reciprocal rank (or one of the two alone), or
    `graph`: graph-aware multi-hop ranking (dense + BM25 + one hop over the concept graph). With
    `communities`, only the chunks of those communities; with `per_community` too, the best
    `per_community` of each (`by_community` in the response says which are whose). With `searches`,
    each of them instead, as this one would be, in one store call (`by_search`: each one's chunks)."""

    operation: Literal["search"] = "search"
    vector: list[float] | None = None
    text: str | None = Field(default=None, max_length=MAX_QUERY_CHARS)
    mode: SearchMode = "fused"
    limit: int = Field(default=10, ge=1, le=1000)
    communities: list[str] | None = Field(default=None, max_length=100)
    per_community: int | None = Field(default=None, ge=1, le=100)
    searches: list[SearchText] = Field(default=[], max_length=50)
    seed_entities: int = Field(default=0, ge=0, le=1000)  # with a vector: also the question's seeds (`seeds`)


MAX_EXPANDED = 5000  # entities a level of expansion may start from


class EntityChunks(ScopedDocRequest):
    """Chunks that mention any of `entities` (best covered first), and the mentions of the
    chunks in `chunk_ids` — the chunk-entity links of a neighbourhood in one round trip."""

    operation: Literal["links"] = "links"
    entities: list[str] = Field(default=[], max_length=5000)
    chunk_ids: list[str] = Field(default=[], max_length=5000)
    per_entity: int = Field(default=20, ge=1, le=1000)
    hops: int = Field(default=1, ge=1, le=4)  # levels of expansion, in one store round trip (algorithms/expansion)
    max_entities: int = Field(default=50, ge=1, le=MAX_EXPANDED)  # each next level's entities


class EntityRelations(ScopedDocRequest):
    """Relations among `entities` that have a source chunk in scope, with that support as weight."""

    operation: Literal["relations"] = "relations"
    entities: list[str] = Field(min_length=1, max_length=5000)
    limit: int = Field(default=100, ge=1, le=10_000)


class SearchRelations(ScopedDocRequest):
    """Relations nearest a vector (scored by their ends' entity vectors plus their source chunks'
    mean vector, no model), with a source chunk in scope."""

    operation: Literal["search-relations"] = "search-relations"
    vector: list[float] = Field(min_length=1)
    limit: int = Field(default=40, ge=1, le=10_000)


class RelationChunks(ScopedDocRequest):
    """The source chunks of relations (each `[s, p, o]`) in scope, at most `per_relation` each."""

    operation: Literal["relation-chunks"] = "relation-chunks"
    relations: list[tuple[str, str, str]] = Field(min_length=1, max_length=5000)
    per_relation: int = Field(default=5, ge=1, le=1000)


class EpisodeMentions(ScopedDocRequest):
    """The entities the chunks `chunk_ids` mention and, with a window [`since`, `until`], for those
    and `entities` the distinct documents with a timestamp in it ("episodes") whose chunks
    mention each — one store call for a whole result list (the reranker's entity lookup)."""

    operation: Literal["episodes"] = "episodes"
    entities: list[str] = Field(default=[], max_length=50_000)
    chunk_ids: list[str] = Field(default=[], max_length=5000)
    since: datetime | None = None
    until: datetime | None = None


class ChunkSimilarities(ScopedDocRequest):
    """Cosine of `vector` to the stored vector of each chunk of `chunk_ids` in scope."""

    operation: Literal["chunk-similarities"] = "chunk-similarities"
    vector: list[float] = Field(min_length=1)
    chunk_ids: list[str] = Field(min_length=1, max_length=5000)


class GetChunks(ScopedDocRequest):
    """Chunks by id (text, offsets, document title)."""

    operation: Literal["get"] = "get"
    chunk_ids: list[str] = Field(min_length=1, max_length=5000)


class ListCollections(Message):
    """The user's collections with their counts."""

    operation: Literal["list-collections"] = "list-collections"
    user: str = Field(min_length=1, max_length=256)


class DeleteDocuments(ScopedRequest):
    """Delete documents (chunks, mentions, their share of relation weights, unmentioned concepts)."""

    operation: Literal["delete-documents"] = "delete-documents"
    document_ids: list[Annotated[str, Field(min_length=1, max_length=512)]] = Field(min_length=1, max_length=10_000)


class DeleteCollection(ScopedRequest):
    """Delete a whole collection: documents, graph, vectors, communities."""

    operation: Literal["delete-collection"] = "delete-collection"


class ListDocuments(ScopedDocRequest):
    """Documents of the collection (id, title, chunk count), in id order."""

    operation: Literal["list-documents"] = "list-documents"
    limit: int = Field(default=1000, ge=1, le=100_000)


class DocumentsRequest(RootModel):
    """Any documents-service request (reads), told apart by `operation`."""

    root: Annotated[
        DocumentStatus
        | ChunkSearch
        | EntityChunks
        | EntityRelations
        | SearchRelations
        | RelationChunks
        | EpisodeMentions
        | ChunkSimilarities
        | GetChunks
        | ListCollections
        | ListDocuments,
        Field(discriminator="operation"),
    ]


class DocumentStoreRequest(RootModel):
    """Any document-store request (writes), told apart by `operation`. `write-mark` and `store` are
    internal: the document-load flow sends them; the gateway routes only the deletes."""

    root: Annotated[StoreDocuments | WriteMark | DeleteDocuments | DeleteCollection, Field(discriminator="operation")]


class ChunkLinks(BaseModel):
    """Chunk-entity links of a neighbourhood."""

    mentions: list[Mention] = []  # (chunk, entity, count) for every link found


class DocumentsResponse(Response):
    """Results of a documents-service operation (only the fields the operation fills)."""

    stored: int = 0
    withdrawn: list[str] = []  # store: documents deleted after their load began, not written
    deleted: int = 0
    not_found: list[str] = []  # delete-documents: the ids the collection does not hold
    started: float | None = None  # write-mark: the mark's time (None: an unfinished triples load's is kept)
    stamp: float | None = None  # status, write-mark: the collection's write stamp (a delete raises it)
    hashes: dict[str, str] = {}
    chunks: list[Chunk] = []
    by_community: dict[str, list[str]] = {}  # search with communities: community -> its chunks found
    by_search: list[list[tuple[str, float]]] = []  # search with `searches`: each one's (chunk id, score)
    links: ChunkLinks | None = None
    relations: list[RelationshipRef] = []
    relation_chunks: list[tuple[tuple[str, str, str], str]] = []  # (relation, chunk id)
    chunk_mentions: dict[str, list[str]] = {}  # chunk id -> the entities it mentions
    episodes: dict[str, int] = {}  # entity -> episodes that mention it (entities with none left out)
    similarities: dict[str, float] = {}  # chunk id -> cosine
    collections: list[CollectionInfo] = []
    documents: list[DocumentInfo] = []
    seeds: list[EntityMatch] = []  # search with `seed_entities`: as graph-embeddings finds them
    warnings: list[Notice] = []  # search with `seed_entities`: the collection's (unknown, incomplete)
    # an earlier kgflow's hard-coded count, never sent or read (stores' counts: processors.accounting.usage)
    store_round_trips: int = Field(default=0, exclude=True)


# --- the `document-load` service ---------------------------------------------------------------
class LoadDocuments(ScopedRequest):
    """Index and store documents (chunk, embed, extract concepts, link); streams progress."""

    documents: list[Document] = Field(min_length=1, max_length=256)
    stamp: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # the load's write stamp (None: now)

    @field_validator("documents")
    @classmethod
    def _unique_ids(cls, documents: list[Document]) -> list[Document]:
        """Two documents with one id in a load would store only the last: refused, by name."""
        seen: set[str] = set()
        twice = sorted({d.id for d in documents if d.id in seen or seen.add(d.id)})
        if twice:
            raise ValueError(f"duplicate document ids in one load: {', '.join(map(repr, twice[:5]))}")
        return documents


class FailedDocument(BaseModel):
    """A document that could not be loaded, and why (the others go on)."""

    id: str
    error: str


class LoadResponse(Response):
    """A progress step (`stage`: work units done in it) or, last, what the load did."""

    stage: str = ""
    done: int = 0
    loaded: int = 0
    unchanged: int = 0
    failed: list[FailedDocument] = []
    chunks: int = 0
    mentions: int = 0
    cooccurrences: int = 0
    relations: int = 0  # typed relations stored (extractor `llm`)
    llm_calls: int = 0  # model calls this load made (0 unless extractor `llm`)
    warnings: list[str] = []  # what the load skipped without failing (e.g. chunks whose relations were dropped)
