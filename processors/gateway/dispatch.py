"""Routes translated gateway requests to services over the bus and answers in gateway JSON.

Shared by the websocket and the REST endpoints: a request goes in as (principal, workspace,
service, flow, JSON body); out comes a sequence of (JSON payload, complete) frames, or a
GatewayError. Nothing here knows about HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from processors.base.bus import Bus
from processors.base.client import RemoteError, RequestResponseClient, RequestTimeout
from processors.base.config_client import CONFIG_TIMEOUT_S, ConfigWatcher, config_client
from processors.gateway import tg_config as tgc
from processors.gateway import tg_documents as tgd
from processors.gateway import tg_flow as tgf
from processors.gateway import tg_workspace as tgw
from processors.gateway import translate as tr
from processors.gateway.auth import Principal
from processors.gateway.errors import GatewayError, as_gateway_errors
from processors.gateway.tg_library import LibraryStore
from schemas.documents import CollectionInfo, DeleteCollection, ListCollections
from schemas.flows import ConfigState, FlowRequest, FlowResponse
from schemas.prompts import Prompts
from schemas.services import (
    COMMUNITIES,
    COMMUNITY_BUILD,
    DOCUMENT_LOAD,
    DOCUMENT_STORE,
    DOCUMENTS,
    DRIFT,
    EMBEDDINGS,
    GRAPH_EMBEDDINGS,
    GRAPH_RAG,
    KG_QUERY,
    LAZY_RAG,
    RERANKER,
    TEXT_COMPLETION,
    TRIPLES,
    TRIPLES_STORE,
    Service,
)
from schemas.terms import Triple
from schemas.text_completion import TextCompletionRequest
from schemas.topics import topic
from schemas.triples import MAX_BATCH, StoreTriples, TriplesResponse

log = logging.getLogger(__name__)

Frame = tuple[dict[str, Any], bool]  # (payload, complete)

# Services TrustGraph also has: their wire format is TrustGraph's (see translate.py).
TRUSTGRAPH_SERVICES: dict[str, Service] = {
    s.name: s for s in (GRAPH_RAG, TRIPLES, EMBEDDINGS, GRAPH_EMBEDDINGS, TEXT_COMPLETION)
}
# kgflow's own services: their wire format is the kgflow schema's JSON (kebab- or snake-case names).
KGFLOW_SERVICES: dict[str, Service] = {
    s.name: s for s in (LAZY_RAG, KG_QUERY, DRIFT, RERANKER, DOCUMENTS, DOCUMENT_STORE, COMMUNITIES, COMMUNITY_BUILD)
}
# Operations a client may not send through the gateway: the document-load flow's own writes (a
# stored record is trusted to be what indexing built: its vectors, links and ownership).
INTERNAL_OPERATIONS: dict[str, frozenset[str]] = {DOCUMENT_STORE.name: frozenset({"store", "write-mark"})}
# TrustGraph service names kgflow answers with a service of its own (see tg_documents.py).
TRUSTGRAPH_ALIASES: dict[str, Service] = {
    "document-rag": LAZY_RAG,
    "text-load": DOCUMENT_LOAD,
    "document-load": DOCUMENT_LOAD,
}
FLOW_SERVICES: dict[str, Service] = {**TRUSTGRAPH_SERVICES, **KGFLOW_SERVICES}
WORKSPACE_SERVICES = ("flow", "config", "collection-management", "librarian")
DEFAULT_FLOW = "default"
LOAD_TIMEOUT_S = 3600.0  # a batch of documents in kgflow's own document-load form
FLOW_WRITE_OPS = ("put-blueprint", "delete-blueprint", "start-flow", "stop-flow")


class Dispatcher:
    """Knows the running flows (following the config) and holds one bus client per (service, flow)."""

    def __init__(self, bus: Bus, timeout_s: float, home: Path | None = None, prompts: Prompts | None = None) -> None:
        self.bus = bus
        self.prompts: Prompts = prompts or {}  # the services' own prompts, shown by the config service
        self.timeout_s = timeout_s
        # TrustGraph's library, in the gateway's home (None: a gateway with no home has none)
        self.library = LibraryStore(home / "library") if home is not None else None
        self.config = ConfigState()
        self._watcher = ConfigWatcher(bus, self._on_config)
        self._config_client = config_client(bus, timeout_s=min(timeout_s, CONFIG_TIMEOUT_S))
        self._clients: dict[tuple[str, str], RequestResponseClient[Any]] = {}
        self._lock = asyncio.Lock()
        self._refreshed = 0.0

    async def start(self) -> None:
        """Follow the flow registry (waits until it answers)."""
        await self._watcher.start()

    async def stop(self) -> None:
        """Stop every client."""
        await self._watcher.stop()
        await self._config_client.stop()
        for client in self._clients.values():
            await client.stop()
        self._clients.clear()

    async def _on_config(self, state: ConfigState) -> None:
        self.config = state
        for key in [k for k in self._clients if k[1] not in state.flows]:
            await self._clients.pop(key).stop()

    async def _refresh(self) -> None:
        """Fetch the config now (at most twice a second) — pushes may lag a start-flow."""
        if time.monotonic() - self._refreshed < 0.5:
            return
        self._refreshed = time.monotonic()
        res = await self._config_client.request(FlowRequest(operation="get-config"))
        if res.config is not None and res.config.version >= self.config.version:
            await self._on_config(res.config)

    async def refresh(self) -> None:
        """Fetch the config now (not only on the next push)."""
        self._refreshed = 0.0
        await self._refresh()

    async def config_request(self, req: FlowRequest) -> FlowResponse:
        """A change to the flow registry, then the config it leads to (so the next read sees it)."""
        res: FlowResponse = await self._config_client.request(req)
        await self.refresh()
        return res

    async def _client(self, service: Service, flow: str) -> RequestResponseClient[Any]:
        """The client of `service` in running flow `flow` (errors for unknown flows/services)."""
        try:
            topic(service.name, flow)
        except ValueError:
            raise GatewayError("bad-request", f"invalid flow id {flow!r}") from None
        if flow not in self.config.flows:
            try:
                await self._refresh()
            except (RequestTimeout, RemoteError) as e:
                raise GatewayError("unavailable", f"flow registry did not answer: {e}") from None
        running = self.config.flows.get(flow)
        if running is None:
            known = ", ".join(sorted(self.config.flows)) or "none"
            raise GatewayError("unknown-flow", f"flow {flow!r} is not running (running flows: {known})")
        bp = self.config.blueprints.get(running.blueprint)
        if bp is None or service.name not in bp.processors:  # each service's processor is named after it
            raise GatewayError(
                "unknown-service", f"flow {flow!r} (blueprint {running.blueprint!r}) has no {service.name}"
            )
        key = (service.name, flow)
        async with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = RequestResponseClient.for_service(self.bus, service, flow, self.timeout_s)
                await client.start()
                self._clients[key] = client
        return client

    # --- entry points -------------------------------------------------------------------
    async def handle(
        self,
        principal: Principal,
        workspace: object,
        service: str,
        flow: str | None,
        request: object,
        streaming_allowed: bool = True,
    ) -> AsyncIterator[Frame]:
        """Frames answering one request; raises GatewayError (never anything else)."""
        with as_gateway_errors():
            user = principal.resolve(workspace)
            if flow is None:
                inner = self._workspace_service(principal, user, service, request)
            else:
                inner = self._flow_service(user, service, flow, request, streaming_allowed)
            async for frame in inner:
                yield frame

    async def _flow_service(
        self, user: str, service: str, flow: str, wire: object, streaming_allowed: bool
    ) -> AsyncIterator[Frame]:
        if service in TRUSTGRAPH_ALIASES:
            async for frame in self._trustgraph_alias(user, service, flow, wire, streaming_allowed):
                yield frame
        elif service == "prompt":
            system, prompt, streaming = tgc.prompt_call(wire, self.prompts, self.config.items, user)
            client = await self._client(TEXT_COMPLETION, flow)
            req_p = TextCompletionRequest(system=system, prompt=prompt, streaming=streaming and streaming_allowed)
            async for res in client.stream(req_p):
                yield tgf.prompt_frame(res), res.end_of_stream
        elif service == RERANKER.name and tgf.is_trustgraph_rerank(wire):
            reqs, limit = tgf.rerank_requests(wire, user)
            client = await self._client(RERANKER, flow)
            ids, results = tgf.document_ids(wire), []
            for qid, req_r in reqs:
                results += tgf.rerank_results(qid, await client.request(req_r), ids, limit)
            yield {"results": results}, True
        elif service in tgw.NOT_SUPPORTED_SERVICES:
            raise tgw.refuse(service)
        elif service not in FLOW_SERVICES:
            raise GatewayError(
                "unknown-service", f"flow service {service!r} is not supported by kgflow; known: {', '.join(_known())}"
            )
        elif service in KGFLOW_SERVICES:
            op = wire.get("operation") if isinstance(wire, dict) else None
            if op in INTERNAL_OPERATIONS.get(service, ()):
                raise GatewayError("forbidden", f"{service} operation {op!r} is internal to kgflow's flows")
            req_k = tr.kgflow_request(FLOW_SERVICES[service], wire, user)
            if not streaming_allowed and getattr(req_k, "streaming", False):
                req_k = req_k.model_copy(update={"streaming": False})
            client = await self._client(FLOW_SERVICES[service], flow)
            timeout = max(self.timeout_s, (getattr(req_k, "timeout_s", None) or 0) + 5)
            async for res in client.stream(req_k, timeout):
                yield tr.kgflow_response_to_wire(res), res.end_of_stream
        elif service == GRAPH_RAG.name:
            req = tr.graph_rag_request(wire, user)
            if not streaming_allowed:
                req = req.model_copy(update={"streaming": False})
            client = await self._client(FLOW_SERVICES[service], flow)
            timeout = max(self.timeout_s, (req.timeout_s or 0) + 5)
            async for res in client.stream(req, timeout):
                yield tr.graph_rag_response_to_wire(res), res.end_of_stream
        elif service == TRIPLES.name:
            q = tr.triples_request(wire, user)
            client = await self._client(FLOW_SERVICES[service], flow)
            found: TriplesResponse = await client.request(q.query)
            triples = [] if q.graph else [Triple(s=t.s, p=t.p, o=t.o) for t in found.triples]  # no named graphs
            if not (q.streaming and streaming_allowed):
                yield tr.triples_batch_to_wire(triples), True
                return
            for i in range(0, max(len(triples), 1), q.batch_size):
                last = i + q.batch_size >= len(triples)
                yield tr.triples_batch_to_wire(triples[i : i + q.batch_size], last), last
        elif service == EMBEDDINGS.name:
            client = await self._client(FLOW_SERVICES[service], flow)
            yield tr.embeddings_response_to_wire(await client.request(tr.embeddings_request(wire))), True
        elif service == GRAPH_EMBEDDINGS.name:
            req_ge = tr.graph_embeddings_request(wire, user)
            client = await self._client(FLOW_SERVICES[service], flow)
            yield tr.graph_embeddings_response_to_wire(await client.request(req_ge)), True
        else:  # text-completion
            if isinstance(wire, dict) and wire.get("operation") == "list-models":
                raise tr.NotSupported("text-completion list-models is not supported by kgflow (a flow has one model: "
                                      "its `llm-model` parameter)")  # fmt: skip
            req_tc = tr.text_completion_request(wire)
            if not streaming_allowed:
                req_tc = req_tc.model_copy(update={"streaming": False})
            client = await self._client(FLOW_SERVICES[service], flow)
            async for res in client.stream(req_tc):
                yield tr.text_completion_response_to_wire(res), res.end_of_stream

    async def _trustgraph_alias(
        self, user: str, service: str, flow: str, wire: object, streaming_allowed: bool
    ) -> AsyncIterator[Frame]:
        """TrustGraph's document-rag and text/document loads, answered by lazy-rag and document-load (a load
        with `streaming: true` also sends `{stage, done}` progress frames before its report)."""
        target = TRUSTGRAPH_ALIASES[service]
        client = await self._client(target, flow)
        if target is LAZY_RAG:
            req = tgd.document_rag_request(wire, user)
            res = await client.request(req, max(self.timeout_s, (req.timeout_s or 0) + 5))
            yield tgd.document_rag_response_to_wire(res), True
        elif service == "document-load" and isinstance(wire, dict) and "documents" in wire:  # kgflow's own form
            req_k = tr.kgflow_request(DOCUMENT_LOAD, wire, user)
            async for res in client.stream(req_k, max(self.timeout_s, LOAD_TIMEOUT_S)):
                yield tr.kgflow_response_to_wire(res), res.end_of_stream
        elif streaming_allowed and isinstance(wire, dict) and wire.get("streaming") is True:  # a kgflow extra
            # decoding a document (up to the frame limit, in any charset) runs off the event loop
            async for res in client.stream(await tgd.text_load_request(wire, user)):
                if res.end_of_stream:
                    yield tgd.load_response_to_wire(res), True
                else:
                    yield {"stage": res.stage, "done": res.done}, False
        else:
            yield tgd.load_response_to_wire(await client.request(await tgd.text_load_request(wire, user))), True

    async def _documents_flow(self) -> str:
        """The flow collection-management goes through: `default`, else the first flow with documents."""
        if not self.config.flows:
            await self._refresh()
        for name in sorted(self.config.flows, key=lambda n: (n != DEFAULT_FLOW, n)):
            bp = self.config.blueprints.get(self.config.flows[name].blueprint)
            if bp is not None and DOCUMENTS.name in bp.processors:
                return name
        raise GatewayError("unavailable", "no running flow has a documents service (start the `default` flow)")

    async def ask(self, service: Service, flow: str, request: BaseModel) -> AsyncIterator[Any]:
        """The responses of one kgflow request to `service` in `flow` (already scoped to its user), until
        the last; raises GatewayError (the chat routes' way in: they build kgflow requests themselves)."""
        with as_gateway_errors():
            client = await self._client(service, flow)
            timeout = max(self.timeout_s, (getattr(request, "timeout_s", None) or 0) + 5)
            async for res in client.stream(request, timeout):
                yield res

    async def list_collections(self, user: str) -> list[CollectionInfo]:
        """The collections of `user` (through the documents service of the documents flow)."""
        with as_gateway_errors():
            client = await self._client(DOCUMENTS, await self._documents_flow())
            return list((await client.request(ListCollections(user=user))).collections)

    async def _collections(self, user: str, wire: object) -> AsyncIterator[Frame]:
        op, collection = tgd.collection_operation(wire)  # a JSON object, or a BadRequest
        if op == "list-collections":
            tags = wire.get("tag_filter") if isinstance(wire, dict) else None
            yield tgd.collections_to_wire(await self.list_collections(user), tags), True
            return
        flow = await self._documents_flow()
        store = await self._client(DOCUMENT_STORE, flow)
        if not (await store.request(DeleteCollection(user=user, collection=collection))).deleted:
            raise GatewayError("unknown-collection", f"workspace {user!r} has no collection {collection!r}")
        yield {}, True

    async def _workspace_service(
        self, principal: Principal, user: str, service: str, wire: object
    ) -> AsyncIterator[Frame]:
        if service == "collection-management":
            async for frame in self._collections(user, wire):
                yield frame
        elif service == "flow":
            req = tr.flow_request(wire)
            if req.operation in FLOW_WRITE_OPS and not principal.admin:
                raise GatewayError("forbidden", f"{req.operation} needs an admin token (one bound to no workspace)")
            res: FlowResponse = await self._config_client.request(req)
            if req.operation in FLOW_WRITE_OPS:
                self._refreshed = 0.0
                await self._refresh()
            yield tr.flow_response_to_wire(req.operation, res), True
        elif service == "config":
            async for frame in tgw.config(self, principal, user, wire):
                yield frame
        elif service == "librarian":
            async for frame in tgw.librarian(self, user, wire):
                yield frame
        elif service == "iam":
            yield tgw.iam(principal, user, wire), True
        elif service in tgw.NOT_SUPPORTED_SERVICES:
            raise tgw.refuse(service)
        else:
            raise GatewayError(
                "unknown-service",
                f"service {service!r} is not supported by kgflow (flow services need a `flow`; workspace services: "
                f"{', '.join(WORKSPACE_SERVICES)})",
            )

    async def import_triples(
        self, principal: Principal, workspace: object, flow: str, collection: str, triples: list[Triple]
    ) -> int:
        """Store imported triples in `flow`'s stores; tells caches the collection changed."""
        with as_gateway_errors():
            user = principal.resolve(workspace)
            if not triples:
                return 0
            client = await self._client(TRIPLES_STORE, flow)
            # The triples-store service stores, embeds labels and announces the change to label caches.
            for i in range(0, len(triples), MAX_BATCH):
                batch = triples[i : i + MAX_BATCH]
                await client.request(StoreTriples(user=user, collection=collection, triples=batch))
            return len(triples)


def _known() -> list[str]:
    """Every flow service name the gateway answers."""
    return [*FLOW_SERVICES, *TRUSTGRAPH_ALIASES, "prompt"]
