"""kgflow's Python API: load, ask every retrieval service, stream progress, and manage collections
and flows — in this process on the embedded default, over Pulsar, or through a gateway URL.

    from processors.commands.api import Kgflow

    async with Kgflow.embedded(home=".kgflow") as kg:          # or Kgflow.connect("http://host:8888")
        await kg.load_documents(["examples/documents"], collection="docs")
        res = await kg.lazy_rag("Which element did Marie Curie name after her homeland?", collection="docs")
        print(res.answer, [(c.document_id, c.page) for c in res.chunks])

`KgflowSync` (processors.commands.api_sync) offers the same methods without `await`. The `kgflow`
CLI is built on this class (processors/commands/), so what the CLI does the API does. Responses are
the services' own models (`schemas/`); a failed request raises `RemoteError` (its `type` says why,
e.g. `llm-unavailable`), a bad argument `ValueError`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar, cast

from pydantic import BaseModel

from processors.base.client import RemoteError
from processors.base.settings import RuntimeSettings, from_env
from processors.commands.loading import DEFAULT_BATCHING, Batching, DocumentsLoaded, LoadProgress, load_documents
from processors.commands.transports import BusTransport, GatewayTransport, Transport, TriplesProgress, TriplesStored
from processors.ingest.documents.files import DocumentFormat
from processors.stores.settings import StoreSettings
from schemas.base import Notice, Response
from schemas.communities import BuildCommunities, CommunitiesResponse, CommunityInfo, ListCommunities
from schemas.documents import (
    CollectionInfo,
    DeleteCollection,
    DeleteDocuments,
    Document,
    DocumentInfo,
    DocumentsResponse,
    ListCollections,
    ListDocuments,
    Scope,
)
from schemas.drift import DriftProgress, DriftRequest, DriftResponse
from schemas.flows import Blueprint, Flow, FlowRequest
from schemas.graph_rag import GraphRagRequest, GraphRagResponse
from schemas.kg_query import KgQueryRequest, KgQueryResponse
from schemas.lazy_rag import LazyRagRequest, LazyRagResponse
from schemas.reranker import RerankItem, RerankRequest, RerankResponse
from schemas.services import (
    COMMUNITIES,
    COMMUNITY_BUILD,
    DOCUMENT_STORE,
    DOCUMENTS,
    DRIFT,
    GRAPH_RAG,
    KG_QUERY,
    LAZY_RAG,
    RERANKER,
    SERVICES,
    Service,
)

R = TypeVar("R", bound=Response)
KgQueryMode = Literal["local", "global", "hybrid", "mix", "naive"]
QUERY_TIMEOUT_S = 600.0


# The answers the question methods return: the services' responses plus `.answer`, the name the CLI's JSON
# gives the answer text (`.response`, the wire name, stays).
class GraphRagAnswer(GraphRagResponse):
    """A graph-rag response; `.answer` is its `.response`."""

    answer = property(lambda self: self.response)


class LazyRagAnswer(LazyRagResponse):
    """A lazy-rag response; `.answer` is its `.response`."""

    answer = property(lambda self: self.response)


class KgQueryAnswer(KgQueryResponse):
    """A kg-query response; `.answer` is its `.response`."""

    answer = property(lambda self: self.response)


class DriftAnswer(DriftResponse):
    """A DRIFT response; `.answer` is its `.response`."""

    answer = property(lambda self: self.response)


ANSWERS: dict[type[Response], type[Response]] = {
    GraphRagResponse: GraphRagAnswer, LazyRagResponse: LazyRagAnswer, KgQueryResponse: KgQueryAnswer,
    DriftResponse: DriftAnswer,
}  # fmt: skip


class Kgflow:
    """An async client of kgflow; open it with `async with` (or `await open()`, then `close()`)."""

    def __init__(self, transport: Transport, user: str | None = "default", flow: str = "default",
                 timeout_s: float = QUERY_TIMEOUT_S) -> None:  # fmt: skip
        self.transport, self.flow, self.timeout_s = transport, flow, timeout_s
        self.user = user or "default"
        # No user named through a gateway: act in the token's workspace, learnt when opened.
        self._token_workspace = user is None and isinstance(transport, GatewayTransport)

    # --- where kgflow runs ------------------------------------------------------------------
    @classmethod
    def embedded(cls, home: str | Path | None = None, *, user: str = "default", flow: str = "default",
                 store: StoreSettings | None = None, runtime: RuntimeSettings | None = None) -> Kgflow:  # fmt: skip
        """Every processor in this process on the embedded stores in `home` (default
        $KGFLOW_HOME or ./.kgflow), started on first use."""
        store = store or from_env(StoreSettings, {"home": home} if home is not None else {})
        return cls(BusTransport(store, runtime or from_env(RuntimeSettings, {})), user, flow)

    @classmethod
    def pulsar(cls, url: str, *, user: str = "default", flow: str = "default",
               store: StoreSettings | None = None) -> Kgflow:  # fmt: skip
        """Processors running elsewhere, over Pulsar at `url` (`store` is only used to load
        triples, which are written to the stores directly)."""
        runtime = from_env(RuntimeSettings, {"bus": "pulsar", "pulsar_url": url})
        return cls(BusTransport(store or from_env(StoreSettings, {}), runtime), user, flow)

    @classmethod
    def connect(cls, url: str, token: str | None = None, *, user: str | None = None, flow: str = "default") -> Kgflow:
        """A kgflow gateway (`kgflow up`) at `url`, e.g. http://localhost:8888; with no `user`, the
        workspace the token is bound to (`default` for an admin token)."""
        return cls(GatewayTransport(url, token), user, flow)

    async def open(self) -> Kgflow:
        """Through a gateway with no user named, learn the token's workspace; otherwise nothing to
        do up front: connections and processors start on first use."""
        if self._token_workspace and isinstance(self.transport, GatewayTransport):
            self.user = await self.transport.workspace() or self.user
            self._token_workspace = False
        return self

    async def close(self) -> None:
        """Close connections; stop the processors this client started."""
        await self.transport.close()

    async def __aenter__(self) -> Kgflow:
        return await self.open()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # --- any service ------------------------------------------------------------------------
    async def stream(self, service: Service[BaseModel, R] | str, request: BaseModel) -> AsyncIterator[R]:
        """Every response to `request` (progress first, when the service streams), as the
        service's response model."""
        svc = cast(Service[BaseModel, R], SERVICES[service]) if isinstance(service, str) else service
        async for res in self.transport.stream(svc, self.flow, request, self.timeout_s):
            yield res

    async def request(self, service: Service[BaseModel, R] | str, request: BaseModel) -> R:
        """The answer to `request` (the last response)."""
        last: R | None = None
        async for res in self.stream(service, request):
            last = res
        if last is None:
            raise RemoteError("bad-response", "the service answered nothing")
        return last

    # --- questions --------------------------------------------------------------------------
    async def graph_rag(self, question: str, *, collection: str = "default", no_llm: bool = False,
                        scope: Scope | None = None, **params: Any) -> GraphRagAnswer:  # fmt: skip
        """GraphRAG over the collection's triples; `params` by field name (`max_path_length=3`)."""
        req = GraphRagRequest(query=question, **self._asked(collection, no_llm, scope), **params)
        return await self.ask(GRAPH_RAG, req)

    async def lazy_rag(self, question: str, *, collection: str = "default", no_llm: bool = False,
                       scope: Scope | None = None, operation: Literal["query", "expand"] = "query",
                       **params: Any) -> LazyRagAnswer:  # fmt: skip
        """An answer from the collection's documents (chunks cite document, page and section)."""
        req = LazyRagRequest(query=question, operation=operation, **self._asked(collection, no_llm, scope), **params)
        return await self.ask(LAZY_RAG, req)

    async def kg_query(self, question: str, *, collection: str = "default", mode: KgQueryMode | None = None,
                       no_llm: bool = False, scope: Scope | None = None, **params: Any) -> KgQueryAnswer:  # fmt: skip
        """LightRAG-style retrieval in `mode` (default: the flow's, `mix`)."""
        extra = {"mode": mode} if mode else {}
        req = KgQueryRequest(query=question, **self._asked(collection, no_llm, scope), **extra, **params)
        return await self.ask(KG_QUERY, req)

    async def drift(self, question: str, *, collection: str = "default", no_llm: bool = False,
                    scope: Scope | None = None, progress: Callable[[DriftProgress], None] | None = None,
                    **params: Any) -> DriftAnswer:  # fmt: skip
        """DRIFT search; `progress` sees each step as it happens."""
        req = DriftRequest(query=question, **self._asked(collection, no_llm, scope), **params)
        return await self.ask(DRIFT, req, progress)

    async def rerank(self, question: str, results: Sequence[RerankItem], *, collection: str = "default",
                     scope: Scope | None = None, **params: Any) -> RerankResponse:  # fmt: skip
        """Reorder `results` for `question` (`strategy`: semantic, episode, distance or hybrid)."""
        req = RerankRequest(query=question, results=list(results), user=self.user, collection=collection,
                            scope=scope, **params)  # fmt: skip
        return await self.request(RERANKER, req)

    async def ask(
        self,
        service: Service[BaseModel, R],
        request: BaseModel,
        progress: Callable[[DriftProgress], None] | None = None,
    ) -> R:
        """The answer of a retrieval service, each progress step to `progress`; a question over a
        collection that holds nothing carries an `unknown-collection` warning naming the user's
        collections (the retrieval services find nothing there and cannot tell why). A question
        service's response comes with `.answer` (ANSWERS)."""
        last = None
        async for res in self.stream(service, request):
            step = res.progress if isinstance(res, DriftResponse) and not res.end_of_stream else None
            if progress is not None and step is not None:
                progress(step)
            last = res
        if last is None:
            raise RemoteError("bad-response", f"{service.name} answered nothing")
        await self._warn_if_unknown(last, getattr(request, "collection", ""))
        answer = ANSWERS.get(type(last))
        return last if answer is None else answer.model_construct(last.model_fields_set, **dict(last))

    def _asked(self, collection: str, no_llm: bool, scope: Scope | None) -> dict[str, Any]:
        return {"user": self.user, "collection": collection, "no_llm": no_llm, "scope": scope}

    async def _warn_if_unknown(self, res: Response, collection: str) -> None:
        warnings: list[Notice] | None = getattr(res, "warnings", None)
        if warnings is None or any(w.type == "unknown-collection" for w in warnings):
            return
        if getattr(res, "chunks", None) or getattr(res, "entities", None) or getattr(res, "triples", None):
            return
        known = [c.collection for c in await self.collections()]
        if collection not in known:
            names = f"known collections of user {self.user!r}: {', '.join(known)}"
            where = names if known else f"user {self.user!r} has none"
            message = f"collection {collection!r} is empty or unknown ({where})"
            warnings.append(Notice(type="unknown-collection", message=message))

    # --- loading ----------------------------------------------------------------------------
    async def load_documents(self, sources: Sequence[str | Path | Document], *, collection: str = "default",
                             format: DocumentFormat = "auto", progress: LoadProgress | None = None,
                             batching: Batching = DEFAULT_BATCHING) -> DocumentsLoaded:  # fmt: skip
        """Load files, directories (JSONL, text, markdown, PDF, DOCX, PPTX, HTML) or Documents;
        what could not be loaded is in the result by name (`complete` is False then)."""
        items = [s if isinstance(s, Document) else Path(s) for s in sources]

        def stream(service: Service[BaseModel, R], req: BaseModel, timeout_s: float) -> AsyncIterator[R]:
            return self.transport.stream(service, self.flow, req, timeout_s)

        return await load_documents(stream, self.user, collection, items, format, progress, batching)

    async def load_triples(self, path: str | Path, *, collection: str = "default", format: str | None = None,
                           progress: TriplesProgress | None = None) -> TriplesStored:  # fmt: skip
        """Load a file of triples (nt, ttl, tsv, jsonl; by extension unless `format`)."""
        from processors.ingest.triples.readers import guess_format

        p = Path(path)
        fmt = format or guess_format(p)
        tell = progress or (lambda _phase, _n, _total: None)
        return await self.transport.load_triples(p, fmt, self.user, collection, self.flow, tell)

    # --- collections, documents, communities --------------------------------------------------
    async def collections(self) -> list[CollectionInfo]:
        """The user's collections with their counts."""
        return (await self.request(DOCUMENTS, ListCollections(user=self.user))).collections  # type: ignore[no-any-return]

    async def delete_collection(self, collection: str) -> bool:
        """Delete a collection from every store; False when there was no such collection."""
        res = await self.request(DOCUMENT_STORE, DeleteCollection(user=self.user, collection=collection))
        return bool(res.deleted)

    async def documents(self, collection: str = "default", limit: int = 1000) -> list[DocumentInfo]:
        """The collection's documents, in id order."""
        req = ListDocuments(user=self.user, collection=collection, limit=limit)
        return (await self.request(DOCUMENTS, req)).documents  # type: ignore[no-any-return]

    async def delete_documents(self, ids: Sequence[str], collection: str = "default") -> DocumentsResponse:
        """Delete documents; the response says how many were `deleted` and which ids were `not_found`."""
        req = DeleteDocuments(user=self.user, collection=collection, document_ids=list(ids))
        return await self.request(DOCUMENT_STORE, req)  # type: ignore[no-any-return]

    async def communities(self, collection: str = "default", level: int | None = None,
                          limit: int = 50) -> list[CommunityInfo]:  # fmt: skip
        """The collection's communities, largest first."""
        req = ListCommunities(user=self.user, collection=collection, level=level, limit=limit)
        return (await self.request(COMMUNITIES, req)).communities  # type: ignore[no-any-return]

    async def build_communities(self, collection: str = "default", update: bool = False) -> CommunitiesResponse:
        """Rebuild the collection's communities (no model calls); with `update`, re-cluster only the
        communities writes touched since the last build."""
        req = BuildCommunities(user=self.user, collection=collection, update=update)
        return await self.request(COMMUNITY_BUILD, req)  # type: ignore[no-any-return]

    # --- flows --------------------------------------------------------------------------------
    async def flows(self) -> dict[str, list[str]]:
        """Running flows and stored blueprints: `{"flows": [...], "blueprints": [...]}`."""
        flows = await self.transport.flow_request(FlowRequest(operation="list-flows"))
        blueprints = await self.transport.flow_request(FlowRequest(operation="list-blueprints"))
        return {"flows": flows.flow_ids or [], "blueprints": blueprints.blueprint_names or []}

    async def put_blueprint(self, blueprint: Blueprint | str | Path) -> None:
        """Store a blueprint (a Blueprint, or a YAML/JSON file)."""
        from processors.base.flow_registry import load_blueprint

        bp = blueprint if isinstance(blueprint, Blueprint) else load_blueprint(Path(blueprint))
        await self.transport.flow_request(FlowRequest(operation="put-blueprint", blueprint=bp))

    async def start_flow(self, flow_id: str, blueprint: str, parameters: dict[str, Any] | None = None,
                         description: str = "") -> Flow | None:  # fmt: skip
        """Start a flow from a stored blueprint (parameters by their flow names, e.g. `llm`)."""
        req = FlowRequest(operation="start-flow", flow_id=flow_id, blueprint_name=blueprint,
                          parameters=parameters or {}, description=description)  # fmt: skip
        return (await self.transport.flow_request(req)).flow

    async def stop_flow(self, flow_id: str) -> None:
        """Stop a flow."""
        await self.transport.flow_request(FlowRequest(operation="stop-flow", flow_id=flow_id))
