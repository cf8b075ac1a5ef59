"""Chat front ends on the gateway: OpenAI-compatible `/v1/chat/completions` and `/v1/models`
(Ollama-compatible routes: chat_ollama.py).

The model name picks the service, mode and collection (chat_format.py); the question is the last user
message (earlier turns and system messages are not sent to the services, which answer one question
from the graph). Auth is the gateway's: `Authorization: Bearer TOKEN` (an OpenAI client's API key),
and the workspace is the token's (or `X-Kgflow-Workspace`); the flow is `X-Kgflow-Flow` (`default`).
A streamed answer (`"stream": true`) comes as server-sent events, the service's text pieces as they
arrive (graph-rag streams; the others answer whole), then the "Sources" footnotes; the last chunk
carries `sources` and `citations` (and `usage` with `stream_options.include_usage`), then `[DONE]`.
With no model configured the services answer from what they retrieved, and so does the chat.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from processors.gateway import chat_format as cf
from processors.gateway import metrics
from processors.gateway import translate as tr
from processors.gateway.auth import Authenticator, AuthError, Principal
from processors.gateway.dispatch import DEFAULT_FLOW, Dispatcher
from processors.gateway.errors import GatewayError
from schemas.base import Response

log = logging.getLogger(__name__)
STATUS = {"bad-request": 400, "unauthorized": 401, "forbidden": 403, "unknown-model": 404, "unknown-flow": 404,
          "unknown-service": 404, "busy": 429, "unavailable": 503, "timeout": 504}  # fmt: skip


@dataclass
class ChatDone:
    """The end of an answer: its footnotes and what it cost."""

    sources: list[cf.Source] = field(default_factory=list)
    model: str | None = None
    in_token: int = 0
    out_token: int = 0


@dataclass(frozen=True)
class ChatCall:
    """One chat request, checked: who asks, which service answers, the question."""

    principal: Principal
    user: str
    flow: str
    target: cf.ChatTarget
    query: str


class ChatRoutes:
    """What every chat route shares: auth, the checked call, running it through the dispatcher."""

    def __init__(self, dispatcher: Dispatcher, auth: Authenticator, max_body_bytes: int) -> None:
        self.dispatcher = dispatcher
        self.auth = auth
        self.max_body_bytes = max_body_bytes

    def principal(self, request: web.Request) -> Principal:
        """The caller (AuthError without a valid bearer token, when tokens are configured)."""
        return self.auth.check_header(request.headers.get("Authorization"))

    async def body(self, request: web.Request) -> dict[str, Any]:
        """The request's JSON object (GatewayError bad-request otherwise)."""
        if request.content_length is not None and request.content_length > self.max_body_bytes:
            raise GatewayError("bad-request", f"body of {request.content_length} bytes > {self.max_body_bytes}")
        try:
            body = tr.loads(await request.read())
        except (tr.BadRequest, web.HTTPRequestEntityTooLarge) as e:
            raise GatewayError("bad-request", str(e)) from None
        if not isinstance(body, dict):
            raise GatewayError("bad-request", "body must be a JSON object")
        return body

    def call(self, request: web.Request, principal: Principal, model: object, query: str) -> ChatCall:
        """The checked call of a model name and question (GatewayError when either is not served)."""
        try:
            target = cf.parse_model(model, request.headers.get(cf.COLLECTION_HEADER) or None)
            user = principal.resolve(request.headers.get(cf.WORKSPACE_HEADER) or None)
        except cf.ChatModelError as e:
            raise GatewayError("unknown-model", str(e)) from None
        except AuthError as e:
            raise GatewayError(e.type, e.message) from None
        return ChatCall(principal, user, request.headers.get(cf.FLOW_HEADER) or DEFAULT_FLOW, target, query)

    async def models(self, principal: Principal) -> list[str]:
        """Every model name, with a `@collection` variant for each collection of the caller's workspace."""
        try:
            names = sorted(c.collection for c in await self.dispatcher.list_collections(principal.default_workspace))
        except GatewayError as e:  # no documents service running: the bare names still work
            log.info("chat models: collections not listed (%s)", e.message)
            names = []
        return cf.model_names(names)

    async def answer(self, call: ChatCall, streaming: bool) -> AsyncIterator[str | ChatDone]:
        """The answer's text pieces, then its ChatDone; GatewayError when the service refuses."""
        try:
            req = cf.build_request(call.target, call.query, call.user, streaming)
        except ValueError as e:
            raise GatewayError("bad-request", str(e)) from None
        service = cf.SERVICES[call.target.service]
        text: list[str] = []
        async for res in self.dispatcher.ask(service, call.flow, req):
            if getattr(res, "message_type", "answer") == "progress" or getattr(res, "message_type", "") == "explain":
                continue
            if not res.end_of_stream:  # graph-rag's streamed pieces: shown as they come
                if res.response:
                    text.append(res.response)
                    yield res.response
                continue
            if text:  # the last streamed piece; no chunk ids to renumber in a streamed (graph) answer
                _, sources = cf.with_footnotes("", cf.sources_of(res))
                if res.response:
                    yield res.response
            else:
                whole, sources = cf.with_footnotes(res.response, cf.sources_of(res))
                yield whole
            notes = "".join(f"\n\n_Note: {w.message}_" for w in getattr(res, "warnings", []) or [])
            if notes or sources:
                yield notes + cf.sources_block(sources)
            in_t, out_t = _tokens(res)
            yield ChatDone(sources, getattr(res, "model", None), in_t, out_t)
            return

    def count(self, transport: str, service: str, outcome: str, began: float) -> None:
        """Record one chat request in the gateway's metrics."""
        metrics.REQUESTS.labels(transport, metrics.service_label(service), outcome).inc()
        metrics.LATENCY.labels(metrics.service_label(service)).observe(time.perf_counter() - began)


def _tokens(res: Response) -> tuple[int, int]:
    stats = getattr(res, "stats", None)
    in_t = getattr(res, "in_token", None) or (getattr(stats, "in_token", 0) if stats else 0)
    out_t = getattr(res, "out_token", None) or (getattr(stats, "out_token", 0) if stats else 0)
    return int(in_t or 0), int(out_t or 0)


async def first_and_rest(events: AsyncIterator[str | ChatDone]) -> tuple[str | ChatDone, AsyncIterator[str | ChatDone]]:
    """The first event (so a refusal is still an HTTP error, before any stream starts) and the rest."""
    try:
        first = await anext(events)
    except StopAsyncIteration:
        raise GatewayError("internal-error", "the service ended without an answer") from None
    return first, events


# --- OpenAI ----------------------------------------------------------------------------------
def openai_error(type_: str, message: str) -> web.Response:
    """An error as OpenAI clients read it (`error.message`, `type`, `code`)."""
    kind = "invalid_request_error" if type_ in ("bad-request", "unknown-model") else type_
    code = "model_not_found" if type_ == "unknown-model" else type_
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return web.json_response(body, status=STATUS.get(type_, 500))


class OpenAIRoutes(ChatRoutes):
    """`GET /v1/models`, `POST /v1/chat/completions`."""

    async def list_models(self, request: web.Request) -> web.Response:
        """The model names (`kgflow/SERVICE[:MODE][@COLLECTION]`)."""
        try:
            principal = self.principal(request)
        except AuthError as e:
            return openai_error(e.type if e.type == "forbidden" else "unauthorized", e.message)
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "kgflow"} for n in await self.models(principal)]
        return web.json_response({"object": "list", "data": data})

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        """An answer as a `chat.completion`, or streamed as `chat.completion.chunk` events."""
        began, service, outcome = time.perf_counter(), "other", "ok"
        try:
            principal = self.principal(request)
            body = await self.body(request)
            try:
                query = cf.last_user_message(body.get("messages"))
            except ValueError as e:
                raise GatewayError("bad-request", str(e)) from None
            call = self.call(request, principal, body.get("model"), query)
            service = call.target.service
            stream = body.get("stream") is True
            options = body.get("stream_options")
            usage = stream and isinstance(options, dict) and options.get("include_usage") is True
            first, events = await first_and_rest(self.answer(call, stream))
            if stream:
                return await self._stream(request, call, chain(first, events), usage)
            return await self._whole(call, chain(first, events))
        except AuthError as e:
            outcome = e.type
            return openai_error(e.type if e.type == "forbidden" else "unauthorized", e.message)
        except GatewayError as e:
            outcome = e.type
            return openai_error(e.type, e.message)
        finally:
            self.count("openai", service, outcome, began)

    async def _whole(self, call: ChatCall, events: AsyncIterator[str | ChatDone]) -> web.Response:
        text, done = await collect(events)
        body = {
            **_envelope(call, "chat.completion"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": _usage(done),
            **cf.sources_fields(done.sources),
        }
        return web.json_response(body)

    async def _stream(
        self, request: web.Request, call: ChatCall, events: AsyncIterator[str | ChatDone], usage: bool
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        envelope = _envelope(call, "chat.completion.chunk")

        async def send(obj: dict[str, Any]) -> None:
            await resp.write(f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode())

        role_sent = False
        try:
            async for ev in events:
                if isinstance(ev, ChatDone):
                    choice = {"index": 0, "delta": {}, "finish_reason": "stop"}
                    await send({**envelope, "choices": [choice], **cf.sources_fields(ev.sources)})
                    if usage:
                        await send({**envelope, "choices": [], "usage": _usage(ev)})
                    continue
                delta = {"content": ev} if role_sent else {"role": "assistant", "content": ev}
                role_sent = True
                await send({**envelope, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        except GatewayError as e:  # after the stream began: an error event, as OpenAI sends one
            await send({"error": {"message": e.message, "type": e.type, "code": e.type}})
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


async def chain(first: str | ChatDone, rest: AsyncIterator[str | ChatDone]) -> AsyncIterator[str | ChatDone]:
    """`first`, then the rest of the events."""
    yield first
    async for ev in rest:
        yield ev


async def collect(events: AsyncIterator[str | ChatDone]) -> tuple[str, ChatDone]:
    """A whole answer: its text and its end."""
    text, done = [], ChatDone()
    async for ev in events:
        if isinstance(ev, ChatDone):
            done = ev
        else:
            text.append(ev)
    return "".join(text), done


def _envelope(call: ChatCall, kind: str) -> dict[str, Any]:
    created = int(time.time())
    return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": kind, "created": created, "model": call.target.model}


def _usage(done: ChatDone) -> dict[str, int]:
    return {"prompt_tokens": done.in_token, "completion_tokens": done.out_token,
            "total_tokens": done.in_token + done.out_token}  # fmt: skip


def add_openai_routes(app: web.Application, routes: OpenAIRoutes) -> None:
    """Register `/v1/models` and `/v1/chat/completions`."""
    app.router.add_get("/v1/models", routes.list_models)
    app.router.add_post("/v1/chat/completions", routes.chat_completions)
