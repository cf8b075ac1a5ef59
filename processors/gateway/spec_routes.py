"""The specs' own endpoints (schemas/spec_api.py), answered by the flow's lazy-rag and drift services.

- `POST /api/v1/lazy-rag/query`, `POST /api/v1/lazy-rag/expand` (spec 000; `expand` never calls a model).
- `POST /retrieve` (spec 004): DRIFT; with `Accept: text/event-stream`, the progress messages come as
  server-sent events (`event: retrieval_progress`), then the answer (`event: result`) or `event: error`.
Auth, workspace binding and dispatch are the other routes': `Authorization: Bearer TOKEN`, the workspace
from the body (`workspace`, or the spec's `tenant_id`) or `X-Kgflow-Workspace`, the flow from
`X-Kgflow-Flow` (`default`). Errors are `{"error": {"type", "message"}}` with the status of their type.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from aiohttp import web
from pydantic import BaseModel

from processors.gateway import metrics
from processors.gateway import translate as tr
from processors.gateway.auth import Authenticator, AuthError
from processors.gateway.chat_format import FLOW_HEADER, WORKSPACE_HEADER
from processors.gateway.dispatch import DEFAULT_FLOW, Dispatcher
from processors.gateway.errors import GatewayError, as_gateway_errors
from processors.gateway.rest import error_response, json_object
from schemas.drift import DriftRequest, DriftResponse
from schemas.lazy_rag import LazyRagRequest, LazyRagResponse
from schemas.services import DRIFT, LAZY_RAG
from schemas.spec_api import (
    ApiError,
    ApiMeta,
    ErrorDetail,
    LazyRagApiRequest,
    LazyRagApiResponse,
    LazyRagResult,
    RetrievalProgress,
    RetrieveRequest,
    RetrieveResponse,
)

log = logging.getLogger(__name__)
SSE = "text/event-stream"
M = TypeVar("M", bound=BaseModel)
KNOBS = {"max_hops", "max_entities", "chunk_limit", "use_communities", "reranker"}  # LazyRagParams' names


class SpecRoutes:
    """Handlers of the spec endpoints, bound to one dispatcher."""

    def __init__(self, dispatcher: Dispatcher, auth: Authenticator, max_body_bytes: int) -> None:
        self.dispatcher = dispatcher
        self.auth = auth
        self.max_body_bytes = max_body_bytes

    async def _parse(self, request: web.Request, model: type[M]) -> M:
        """The body as `model`; anything else is a GatewayError (bad-request, frame-too-large)."""
        body = await json_object(request, self.max_body_bytes)
        with as_gateway_errors():
            return tr.validate_as(model, body)  # type: ignore[no-any-return]

    def _user(self, request: web.Request, *named: str | None) -> str:
        """The workspace the request acts as (AuthError when the token may not, or names disagree)."""
        principal = self.auth.check_header(request.headers.get("Authorization"))
        names = {n for n in (*named, request.headers.get(WORKSPACE_HEADER)) if n}
        if len(names) > 1:
            raise AuthError(f"conflicting workspaces: {', '.join(sorted(names))}", "bad-request")
        return principal.resolve(next(iter(names), None))

    @staticmethod
    def _flow(request: web.Request) -> str:
        return request.headers.get(FLOW_HEADER) or DEFAULT_FLOW

    async def lazy_rag_query(self, request: web.Request) -> web.Response:
        """`POST /api/v1/lazy-rag/query`."""
        return await self._lazy_rag(request, "query")

    async def lazy_rag_expand(self, request: web.Request) -> web.Response:
        """`POST /api/v1/lazy-rag/expand`: the subgraph, chunks and scores only (no model call)."""
        return await self._lazy_rag(request, "expand")

    async def _lazy_rag(self, request: web.Request, operation: Literal["query", "expand"]) -> web.Response:
        began, outcome = time.perf_counter(), "ok"
        try:
            body = await self._parse(request, LazyRagApiRequest)
            user = self._user(request, body.workspace, body.tenant_id)
            params = body.model_dump(include=KNOBS, exclude_none=True)
            req = LazyRagRequest(user=user, collection=body.collection, query=body.query, operation=operation,
                                 scope=body.scope, no_llm=body.no_llm, **params)  # fmt: skip
            last = LazyRagResponse()
            async for res in self.dispatcher.ask(LAZY_RAG, self._flow(request), req):
                last = res
            took = (time.perf_counter() - began) * 1000
            out = LazyRagApiResponse(data=lazy_rag_result(body.query, last, took), meta=_meta())
            return web.json_response(out.model_dump(mode="json"))
        except (AuthError, GatewayError) as e:
            outcome = e.type
            return error_response(_auth_type(e), e.message)
        finally:
            _count(LAZY_RAG.name, outcome, began)

    async def retrieve(self, request: web.Request) -> web.StreamResponse:
        """`POST /retrieve`: DRIFT's answer as JSON, or its progress and answer as server-sent events."""
        began, outcome = time.perf_counter(), "ok"
        try:
            body = await self._parse(request, RetrieveRequest)
            user = self._user(request, body.workspace)
            req = DriftRequest(user=user, collection=body.project_id, query=body.query, community_limit=body.top_k,
                               scope=body.scope, no_llm=body.no_llm, streaming=True)  # fmt: skip
            retrieval_id = str(uuid.uuid4())
            responses = self.dispatcher.ask(DRIFT, self._flow(request), req)
            if SSE in request.headers.get("Accept", ""):
                first = await anext(responses)  # a refusal is still an HTTP error, before the stream starts
                return await self._stream(request, body.project_id, retrieval_id, first, responses)
            last = DriftResponse()
            async for res in responses:
                last = res
            return web.json_response(retrieve_response(last, retrieval_id).model_dump(mode="json"))
        except (AuthError, GatewayError) as e:
            outcome = e.type
            return error_response(_auth_type(e), e.message)
        finally:
            _count(DRIFT.name, outcome, began)

    async def _stream(
        self,
        request: web.Request,
        project: str,
        retrieval_id: str,
        first: DriftResponse,
        rest: AsyncIterator[DriftResponse],
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": SSE, "Cache-Control": "no-cache"})
        await resp.prepare(request)

        async def send(event: str, model: BaseModel) -> None:
            data = json.dumps(model.model_dump(mode="json"), ensure_ascii=False)
            await resp.write(f"event: {event}\ndata: {data}\n\n".encode())

        async def frames() -> AsyncIterator[DriftResponse]:
            yield first
            async for res in rest:
                yield res

        try:
            try:
                async for res in frames():
                    if res.progress is not None:
                        await send("retrieval_progress", progress_message(res, project, retrieval_id))
                    if res.message_type == "answer":
                        await send("result", retrieve_response(res, retrieval_id))
            except GatewayError as e:  # after the stream began: an error event
                await send("error", ApiError(error=ErrorDetail(type=e.type, message=e.message)))
            await resp.write_eof()
        except ConnectionResetError:  # the client left: nothing more to tell it
            log.info("retrieve %s: the client closed the event stream", retrieval_id)
        return resp


def _shared(model: type[BaseModel], res: BaseModel) -> dict[str, Any]:
    """The fields of `res` that `model` also has, by name (the spec's shapes reuse the services' fields)."""
    return {name: getattr(res, name) for name in model.model_fields if name in type(res).model_fields}


def lazy_rag_result(query: str, res: LazyRagResponse, took_ms: float) -> LazyRagResult:
    """The spec's result of a lazy-rag response (its `summary` is the service's `response`)."""
    return LazyRagResult(
        **_shared(LazyRagResult, res), query=query, summary=res.response, generation_time_ms=round(took_ms, 3)
    )


def retrieve_response(res: DriftResponse, retrieval_id: str) -> RetrieveResponse:
    """The spec's answer of a DRIFT response (`final_answer`: with no model, the retrieval-only answer)."""
    answer = res.final_answer or ("" if res.no_data_found else res.response)
    return RetrieveResponse(**{**_shared(RetrieveResponse, res), "final_answer": answer}, retrieval_id=retrieval_id)


def progress_message(res: DriftResponse, project: str, retrieval_id: str) -> RetrievalProgress:
    """The spec's progress message of a DRIFT progress response."""
    assert res.progress is not None
    p = res.progress
    return RetrievalProgress(project_id=project, retrieval_id=retrieval_id, phase=p.phase,
                             progress_pct=p.progress_pct, thought_summary=p.thought_summary, details_md=p.details_md,
                             message_id=str(uuid.uuid4()), timestamp=p.timestamp)  # fmt: skip


def _meta() -> ApiMeta:
    return ApiMeta(requestId=str(uuid.uuid4()), timestamp=datetime.now(UTC))


def _auth_type(e: AuthError | GatewayError) -> str:
    if isinstance(e, AuthError) and e.type not in ("forbidden", "bad-request"):
        return "unauthorized"
    return e.type


def _count(service: str, outcome: str, began: float) -> None:
    metrics.REQUESTS.labels("rest", metrics.service_label(service), outcome).inc()
    metrics.LATENCY.labels(metrics.service_label(service)).observe(time.perf_counter() - began)


def add_spec_routes(app: web.Application, routes: SpecRoutes) -> None:
    """Register the spec endpoints (before `/api/v1/{kind}`, which would otherwise take them)."""
    app.router.add_post("/api/v1/lazy-rag/query", routes.lazy_rag_query)
    app.router.add_post("/api/v1/lazy-rag/expand", routes.lazy_rag_expand)
    app.router.add_post("/retrieve", routes.retrieve)
