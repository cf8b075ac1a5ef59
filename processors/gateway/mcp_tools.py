"""kgflow's MCP tools: ask each retrieval service, search chunks, list collections and documents, read a
document or chunks, load documents. One thin layer over the services, whatever carries them: `kgflow mcp`
(stdio; the Python API, embedded or through a gateway) or the gateway's `/mcp` route (mcp_http.py,
through the gateway's dispatcher with its auth and workspace binding). Each tool builds the services'
own requests for the caller's user, so a tool can reach only what the caller may; a bad argument or a
refused request comes back as an MCP tool error with the reason, never as a crash.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any, Protocol

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from processors.base.client import RemoteError, RequestTimeout
from processors.gateway.errors import GatewayError
from processors.gateway.mcp_results import Answer, Collections, Documents, DocumentText, Loaded, Passage, Passages
from schemas.documents import (
    ChunkSearch,
    Document,
    DocumentStatus,
    GetChunks,
    ListCollections,
    ListDocuments,
    LoadDocuments,
    SearchMode,
)
from schemas.drift import DriftRequest
from schemas.embeddings import EmbeddingsRequest
from schemas.graph_rag import GraphRagRequest
from schemas.kg_query import KgQueryRequest, Mode
from schemas.lazy_rag import LazyRagRequest
from schemas.scope import MetadataValue, Scope
from schemas.services import DOCUMENT_LOAD, DOCUMENTS, DRIFT, EMBEDDINGS, GRAPH_RAG, KG_QUERY, LAZY_RAG, Service

Collection = Annotated[str, Field(description="the collection to use (list_collections names them)")]
Question = Annotated[str, Field(description="the question, in natural language", max_length=8192)]
DocumentIds = Annotated[list[str] | None, Field(description="only these documents of the collection")]
Metadata = Annotated[
    dict[str, MetadataValue | list[MetadataValue]] | None,
    Field(description="only documents whose metadata has these values (a list: any of them)"),
]
NoLlm = Annotated[bool, Field(description="retrieval only: no language model writes the answer")]
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
ASK_REQUESTS: dict[str, type[BaseModel]] = {LAZY_RAG.name: LazyRagRequest, KG_QUERY.name: KgQueryRequest,
                                             DRIFT.name: DriftRequest, GRAPH_RAG.name: GraphRagRequest}  # fmt: skip
MAX_DOCUMENT_CHUNKS = 1000  # the most chunks a document read returns (one chunk search)


class Services(Protocol):
    """How the tools reach kgflow: the caller's user, and the responses of a request to a service."""

    def user(self, ctx: Context) -> str:
        """The workspace (kgflow user) this call acts as."""
        ...

    def stream(self, ctx: Context, service: Service, request: BaseModel) -> AsyncIterator[Any]:
        """Every response to `request` (progress first); a refusal raises RemoteError or GatewayError."""
        ...


class DocumentIn(BaseModel):
    """A document to load: its id and title are kept as given."""

    id: str = Field(min_length=1, max_length=512)
    title: str = ""
    text: str = Field(min_length=1)
    metadata: dict[str, MetadataValue | list[MetadataValue]] = {}


def _result(model: BaseModel, text: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=model.model_dump(mode="json")
    )


def _scope(document_ids: list[str] | None, metadata: dict[str, Any] | None) -> Scope | None:
    if document_ids is not None and not [d for d in document_ids if d.strip()]:
        raise ToolError("document_ids: name at least one document, or leave it out for the whole collection")
    if document_ids is None and not metadata:
        return None
    try:
        return Scope(document_ids=document_ids, metadata=metadata or None)
    except ValidationError as e:
        raise ToolError(f"scope: {_first(e)}") from None


async def _progress(ctx: Context, res: Any) -> None:
    """A service's progress step (a DRIFT phase, a load's stage) as an MCP progress notification, when the
    client asked for them (the SDK sends nothing otherwise)."""
    step = getattr(res, "progress", None)
    if step is not None and hasattr(step, "progress_pct"):
        await ctx.report_progress(step.progress_pct, 100, step.thought_summary)
    elif getattr(res, "stage", ""):
        await ctx.report_progress(res.done, None, f"{res.stage}: {res.done}")


def _first(e: ValidationError) -> str:
    err = e.errors()[0]
    return f"{'.'.join(map(str, err['loc'])) or 'value'}: {err['msg']}"


class KgflowTools:
    """The tools, over `services`; `server()` registers them on an MCP server."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def server(self) -> MCPServer:
        """An MCP server offering every tool."""
        mcp: MCPServer = MCPServer(
            "kgflow",
            log_level="WARNING",  # the SDK configures the root logger only when nothing else did
            instructions="Answers from kgflow's knowledge graph: ask a retrieval service, search or read passages, "
            "list and load documents. Every answer cites document, page and chunk id.",
        )
        tools: list[tuple[Callable[..., Awaitable[CallToolResult]], ToolAnnotations | None]] = [
            (self.ask_lazy_rag, READ_ONLY), (self.ask_kg_query, READ_ONLY), (self.ask_drift, READ_ONLY),
            (self.ask_graph_rag, READ_ONLY), (self.search_chunks, READ_ONLY), (self.list_collections, READ_ONLY),
            (self.list_documents, READ_ONLY), (self.read_document, READ_ONLY), (self.read_chunks, READ_ONLY),
            (self.load_documents, ToolAnnotations(destructive_hint=False, open_world_hint=False)),
        ]  # fmt: skip
        for fn, hints in tools:
            mcp.add_tool(fn, annotations=hints)
        return mcp

    # --- calling the services -----------------------------------------------------------------
    async def _last(self, ctx: Context, service: Service, request: BaseModel) -> Any:
        """The last response to `request`; every refusal as a ToolError."""
        last = None
        try:
            async for res in self.services.stream(ctx, service, request):
                if not res.end_of_stream:
                    await _progress(ctx, res)
                last = res
        except (RemoteError, GatewayError) as e:
            raise ToolError(f"{service.name} refused: {e.message} ({e.type})") from None
        except (RequestTimeout, ValueError, RuntimeError, OSError) as e:  # e.g. no such flow, gateway unreachable
            raise ToolError(f"{service.name}: {e}") from None
        if last is None:
            raise ToolError(f"{service.name} sent no answer")
        return last

    async def _request(self, ctx: Context, service: Service, build: Callable[[str], BaseModel]) -> Any:
        """Build the request for the caller's user (a ToolError naming a bad field), then send it."""
        try:
            request = build(self.services.user(ctx))
        except ValidationError as e:
            raise ToolError(_first(e)) from None
        return await self._last(ctx, service, request)

    async def _require_collection(self, ctx: Context, collection: str) -> None:
        """A ToolError unless the caller has `collection` (asked only when a read found nothing)."""
        known = [c.collection for c in (await self._collections(ctx)).collections]
        if collection not in known:
            names = ", ".join(known) or "none yet: load documents first"
            raise ToolError(f"unknown collection {collection!r} (collections: {names})")

    async def _collections(self, ctx: Context) -> Collections:
        res = await self._request(ctx, DOCUMENTS, lambda user: ListCollections(user=user))
        return Collections(collections=res.collections)

    async def _ask(self, ctx: Context, service: Service, question: str, collection: str, document_ids: list[str] | None,
                   metadata: dict[str, Any] | None, no_llm: bool, **extra: Any) -> CallToolResult:  # fmt: skip
        """Ask a retrieval service; an empty answer from a collection the caller does not have is an error."""
        scope, q = _scope(document_ids, metadata), _question(question)
        kind = ASK_REQUESTS[service.name]
        res = await self._request(ctx, service, lambda user: kind(
            query=q, user=user, collection=collection, scope=scope, no_llm=no_llm, **extra))  # fmt: skip
        answer = Answer.of(service.name, collection, res)
        if not answer.passages and not answer.facts:
            await self._require_collection(ctx, collection)
        return _result(answer, answer.text())

    async def _embed(self, ctx: Context, text: str, query: bool) -> list[float]:
        res = await self._request(ctx, EMBEDDINGS, lambda _: EmbeddingsRequest(texts=[text], query=query))
        return list(res.vectors[0])

    # --- the tools ----------------------------------------------------------------------------
    async def ask_lazy_rag(self, question: Question, ctx: Context, collection: Collection = "default",
                           document_ids: DocumentIds = None, metadata: Metadata = None,
                           no_llm: NoLlm = False) -> Annotated[CallToolResult, Answer]:  # fmt: skip
        """Answer a question from the collection's documents (graph-aware passage retrieval, a summary
        written at query time); the answer cites its passages by document, page and chunk id."""
        return await self._ask(ctx, LAZY_RAG, question, collection, document_ids, metadata, no_llm)

    async def ask_kg_query(self, question: Question, ctx: Context, collection: Collection = "default",
                           mode: Annotated[Mode | None, Field(description="local, global, hybrid, mix or naive "
                                                              "(default: the flow's, mix)")] = None,
                           document_ids: DocumentIds = None, metadata: Metadata = None,
                           no_llm: NoLlm = False) -> Annotated[CallToolResult, Answer]:  # fmt: skip
        """Answer with LightRAG-style retrieval: `local` (entities), `global` (relations), `hybrid`, `mix`
        (graph and passages) or `naive` (passages only), within token budgets."""
        return await self._ask(ctx, KG_QUERY, question, collection, document_ids, metadata, no_llm, mode=mode)

    async def ask_drift(self, question: Question, ctx: Context, collection: Collection = "default",
                        document_ids: DocumentIds = None, metadata: Metadata = None,
                        no_llm: NoLlm = False) -> Annotated[CallToolResult, Answer]:  # fmt: skip
        """Answer a broad question with DRIFT search: a primer over the collection's communities, then
        follow-up questions; best for 'what are the main themes' questions."""
        return await self._ask(ctx, DRIFT, question, collection, document_ids, metadata, no_llm)

    async def ask_graph_rag(self, question: Question, ctx: Context, collection: Collection = "default",
                            document_ids: DocumentIds = None, metadata: Metadata = None,
                            no_llm: NoLlm = False) -> Annotated[CallToolResult, Answer]:  # fmt: skip
        """Answer a question over the collection's entity graph (facts as subject — predicate — object)."""
        return await self._ask(ctx, GRAPH_RAG, question, collection, document_ids, metadata, no_llm)

    async def search_chunks(self, query: Question, ctx: Context, collection: Collection = "default",
                            mode: Annotated[SearchMode, Field(description="fused (dense + BM25), vector, lexical "
                                                              "or graph (multi-hop passage ranking)")] = "fused",
                            limit: Annotated[int, Field(ge=1, le=100)] = 10, document_ids: DocumentIds = None,
                            metadata: Metadata = None) -> Annotated[CallToolResult, Passages]:  # fmt: skip
        """The passages of the collection that best match `query`, each with document, page and chunk id."""
        scope, q = _scope(document_ids, metadata), _question(query)
        vector = None if mode == "lexical" else await self._embed(ctx, q, query=True)
        res = await self._request(ctx, DOCUMENTS, lambda user: ChunkSearch(
            user=user, collection=collection, scope=scope, text=q, vector=vector, mode=mode, limit=limit))  # fmt: skip
        if not res.chunks:
            await self._require_collection(ctx, collection)
        found = Passages(collection=collection, passages=[Passage.of(c) for c in res.chunks])
        return _result(found, found.text())

    async def list_collections(self, ctx: Context) -> Annotated[CallToolResult, Collections]:
        """The collections you can use, with their documents, chunks, entities and triples."""
        found = await self._collections(ctx)
        return _result(found, found.text())

    async def list_documents(
        self, ctx: Context, collection: Collection = "default", limit: Annotated[int, Field(ge=1, le=10_000)] = 1000
    ) -> Annotated[CallToolResult, Documents]:
        """The collection's documents (id, title, chunk count), in id order."""
        res = await self._request(ctx, DOCUMENTS, lambda user: ListDocuments(user=user, collection=collection,
                                                                            limit=limit))  # fmt: skip
        if not res.documents:
            await self._require_collection(ctx, collection)
        found = Documents(collection=collection, documents=res.documents)
        return _result(found, found.text())

    async def read_document(self, document_id: Annotated[str, Field(min_length=1, max_length=512)], ctx: Context,
                            collection: Collection = "default") -> Annotated[CallToolResult, DocumentText]:  # fmt: skip
        """A stored document's whole text, and its chunks in order (each with its page and chunk id)."""
        scope = Scope(document_ids=[document_id])
        res = await self._request(ctx, DOCUMENTS, lambda user: ListDocuments(user=user, collection=collection,
                                                                            scope=scope, limit=1))  # fmt: skip
        if not res.documents:
            await self._require_collection(ctx, collection)
            raise ToolError(f"collection {collection!r} has no document {document_id!r} (list_documents names them)")
        info = res.documents[0]
        # Every chunk of one document: a vector search scoped to it, as deep as it has chunks.
        vector = await self._embed(ctx, info.title or info.id, query=True)
        limit = max(1, min(info.chunks, MAX_DOCUMENT_CHUNKS))
        found = await self._request(ctx, DOCUMENTS, lambda user: ChunkSearch(
            user=user, collection=collection, scope=scope, vector=vector, mode="vector", limit=limit))  # fmt: skip
        doc = DocumentText.of(collection, info, found.chunks)
        return _result(doc, doc.text_out())

    async def read_chunks(self, chunk_ids: Annotated[list[str], Field(min_length=1, max_length=100)], ctx: Context,
                          collection: Collection = "default") -> Annotated[CallToolResult, Passages]:  # fmt: skip
        """Passages by chunk id (as answers cite them), each with its document, page and whole text."""
        res = await self._request(ctx, DOCUMENTS, lambda user: GetChunks(user=user, collection=collection,
                                                                        chunk_ids=chunk_ids))  # fmt: skip
        if not res.chunks:
            await self._require_collection(ctx, collection)
            raise ToolError(f"collection {collection!r} has none of the chunks {', '.join(chunk_ids[:5])}")
        found = Passages(collection=collection, passages=[Passage.of(c) for c in res.chunks])
        return _result(found, found.text())

    async def load_documents(
        self, documents: Annotated[list[DocumentIn], Field(min_length=1, max_length=256)], ctx: Context,
        collection: Collection = "default",
    ) -> Annotated[CallToolResult, Loaded]:  # fmt: skip
        """Load text documents into the collection (chunked, embedded and linked into its graph; a document
        loaded again with the same id replaces the old one, unchanged ones are skipped)."""

        # The collection's write stamp, read before the load is sent (as `kgflow load` does): a
        # delete answered meanwhile refuses the load, redelivered or not.
        status = await self._request(ctx, DOCUMENTS, lambda user: DocumentStatus(
            user=user, collection=collection, document_ids=[documents[0].id]))  # fmt: skip

        def build(user: str) -> LoadDocuments:
            docs = [Document(id=d.id, title=d.title, text=d.text, metadata=d.metadata) for d in documents]
            return LoadDocuments(user=user, collection=collection, documents=docs, stamp=status.stamp)

        report = Loaded.of(collection, await self._request(ctx, DOCUMENT_LOAD, build))
        return _result(report, report.text())


def _question(text: str) -> str:
    if not text.strip():
        raise ToolError("the question is blank: ask something")
    return text.strip()
