"""Ollama-compatible chat routes (what Open WebUI and the `ollama` client call), answered like the
OpenAI routes (chat.py: model names, auth, headers, footnotes).

- `POST /api/chat` (`messages`) and `POST /api/generate` (`prompt`): streamed as NDJSON unless
  `"stream": false` (Ollama's default is to stream); the last object has `done: true`, token counts,
  durations, and kgflow's `sources` and `citations`.
- `GET /api/tags` (the model names), `POST /api/show` (one model), `GET /api/version`, `GET /api/ps`.
Errors are `{"error": "message"}` with the HTTP status of their type, or, once a stream has begun,
an `{"error": ...}` line (the `ollama` client raises on either).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from processors.gateway import chat_format as cf
from processors.gateway.auth import AuthError
from processors.gateway.chat import STATUS, ChatCall, ChatDone, ChatRoutes, chain, collect, first_and_rest
from processors.gateway.errors import GatewayError

OLLAMA_VERSION = "0.6.3"  # the Ollama API version these routes follow
DETAILS = {"format": "kgflow", "family": "kgflow", "families": ["kgflow"], "parameter_size": "",
           "quantization_level": ""}  # fmt: skip


def ollama_error(type_: str, message: str) -> web.Response:
    """An error as Ollama clients read it."""
    return web.json_response({"error": message}, status=STATUS.get(type_, 500))


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _model_entry(name: str) -> dict[str, Any]:
    digest = hashlib.sha256(name.encode()).hexdigest()
    return {"name": name, "model": name, "modified_at": _now(), "size": 0, "digest": digest, "details": DETAILS}


class OllamaRoutes(ChatRoutes):
    """The Ollama API's chat, generate and model-listing routes."""

    async def tags(self, request: web.Request) -> web.Response:
        """`GET /api/tags`: every model name."""
        try:
            principal = self.principal(request)
        except AuthError as e:
            return ollama_error(e.type, e.message)
        return web.json_response({"models": [_model_entry(n) for n in await self.models(principal)]})

    async def show(self, request: web.Request) -> web.Response:
        """`POST /api/show`: what one model is (a kgflow service over a collection)."""
        try:
            self.principal(request)
            body = await self.body(request)
            target = cf.parse_model(body.get("model") or body.get("name"), request.headers.get(cf.COLLECTION_HEADER))
        except AuthError as e:
            return ollama_error(e.type, e.message)
        except GatewayError as e:
            return ollama_error(e.type, e.message)
        except cf.ChatModelError as e:
            return ollama_error("unknown-model", str(e))
        about = f"kgflow {target.service}" + (f" ({target.mode})" if target.mode else "")
        return web.json_response({
            "modelfile": f"# {about} over collection {target.collection}",
            "parameters": "",
            "template": "{{ .Prompt }}",
            "details": DETAILS,
            "model_info": {"kgflow.service": target.service, "kgflow.mode": target.mode,
                           "kgflow.collection": target.collection},
            "capabilities": ["completion"],
            "modified_at": _now(),
        })  # fmt: skip

    async def version(self, request: web.Request) -> web.Response:
        """`GET /api/version`."""
        return web.json_response({"version": OLLAMA_VERSION})

    async def running(self, request: web.Request) -> web.Response:
        """`GET /api/ps`: no model is loaded in memory the way Ollama loads one."""
        return web.json_response({"models": []})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        """`POST /api/chat`."""
        return await self._serve(request, "chat")

    async def generate(self, request: web.Request) -> web.StreamResponse:
        """`POST /api/generate`."""
        return await self._serve(request, "generate")

    async def _serve(self, request: web.Request, kind: str) -> web.StreamResponse:
        began, service, outcome = time.perf_counter(), "other", "ok"
        try:
            principal = self.principal(request)
            body = await self.body(request)
            try:
                query = cf.last_user_message(body.get("messages")) if kind == "chat" else _prompt(body)
            except ValueError as e:
                raise GatewayError("bad-request", str(e)) from None
            call = self.call(request, principal, body.get("model"), query)
            service = call.target.service
            stream = body.get("stream") is not False
            first, events = await first_and_rest(self.answer(call, stream))
            if stream:
                return await self._stream(request, call, kind, chain(first, events), began)
            text, done = await collect(chain(first, events))
            return web.json_response(_final(call, kind, text, done, began))
        except AuthError as e:
            outcome = e.type
            return ollama_error(e.type, e.message)
        except GatewayError as e:
            outcome = e.type
            return ollama_error(e.type, e.message)
        finally:
            self.count("ollama", service, outcome, began)

    async def _stream(
        self, request: web.Request, call: ChatCall, kind: str, events: AsyncIterator[str | ChatDone], began: float
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await resp.prepare(request)

        async def send(obj: dict[str, Any]) -> None:
            await resp.write((json.dumps(obj, ensure_ascii=False) + "\n").encode())

        try:
            async for ev in events:
                if isinstance(ev, ChatDone):
                    await send(_final(call, kind, "", ev, began))
                else:
                    await send({**_head(call), **_content(kind, ev), "done": False})
        except GatewayError as e:
            await send({"error": e.message})
        await resp.write_eof()
        return resp


def _prompt(body: dict[str, Any]) -> str:
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("prompt: expected the question as a non-empty string")
    return prompt.strip()


def _head(call: ChatCall) -> dict[str, Any]:
    return {"model": call.target.model, "created_at": _now()}


def _content(kind: str, text: str) -> dict[str, Any]:
    return {"message": {"role": "assistant", "content": text}} if kind == "chat" else {"response": text}


def _final(call: ChatCall, kind: str, text: str, done: ChatDone, began: float) -> dict[str, Any]:
    """The last object: the rest of the text (all of it when not streamed), counts, sources."""
    return {
        **_head(call),
        **_content(kind, text),
        "done": True,
        "done_reason": "stop",
        "total_duration": int((time.perf_counter() - began) * 1e9),
        "prompt_eval_count": done.in_token,
        "eval_count": done.out_token,
        **cf.sources_fields(done.sources),
    }


def add_ollama_routes(app: web.Application, routes: OllamaRoutes) -> None:
    """Register the Ollama API routes."""
    app.router.add_post("/api/chat", routes.chat)
    app.router.add_post("/api/generate", routes.generate)
    app.router.add_get("/api/tags", routes.tags)
    app.router.add_post("/api/show", routes.show)
    app.router.add_get("/api/version", routes.version)
    app.router.add_get("/api/ps", routes.running)
