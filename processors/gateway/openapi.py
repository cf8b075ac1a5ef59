"""The gateway's OpenAPI 3.1 document, generated from the pydantic models of schemas/, and its page.

`OPERATIONS` names every HTTP route the gateway serves (tests/gateway/test_gateway_openapi.py checks it
against the aiohttp router, so a new route without an entry fails a test). `GET /openapi.json` serves the
document, `GET /docs` a page built from it on the server (no script, no CDN: it works with no network).
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from aiohttp import web
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from processors.gateway.chat_format import COLLECTION_HEADER, FLOW_HEADER, WORKSPACE_HEADER
from schemas import gateway_api as g
from schemas import spec_api as s
from schemas.base import SCHEMA_VERSION

JSON = "application/json"
REF = "#/components/schemas/{model}"
FLOW_HEADER_DOC = (FLOW_HEADER, "the flow that answers (default `default`)")
WORKSPACE_HEADER_DOC = (WORKSPACE_HEADER, "the workspace to act in (a bound token: only its own)")
COLLECTION_HEADER_DOC = (COLLECTION_HEADER, "the collection, when the model name has no `@collection`")


@dataclass(frozen=True)
class Operation:
    """One route: what it takes and what it answers (`answer` None: `content` is not JSON)."""

    method: str
    path: str
    tag: str
    summary: str
    body: type[BaseModel] | None = None
    answer: type[BaseModel] | None = None
    content: str = JSON
    error: type[BaseModel] = s.ApiError
    query: tuple[tuple[str, str], ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    also: tuple[tuple[str, str], ...] = ()  # other answers: (content type, description)
    events: type[BaseModel] | None = None  # the data of its server-sent events, when it streams them
    websocket: bool = False


SPEC = "Spec endpoints"
TG = "TrustGraph-compatible API"
OPENAI, OLLAMA, STATUS, PAGES = "OpenAI-compatible chat", "Ollama-compatible chat", "Status", "Pages"
MCP = "MCP (Model Context Protocol)"
WS = "A websocket (send `Upgrade: websocket`); a plain request is refused with 400."
SPEC_HEADERS = (FLOW_HEADER_DOC, WORKSPACE_HEADER_DOC)
CHAT_HEADERS = (FLOW_HEADER_DOC, WORKSPACE_HEADER_DOC, COLLECTION_HEADER_DOC)
WS_QUERY = (("token", "the bearer token (bulk clients send it here)"), ("workspace", "the workspace"))

OPERATIONS: tuple[Operation, ...] = (
    Operation("post", "/api/v1/lazy-rag/query", SPEC, "LazyRAG: a query-time summary of the relevant subgraph "
              "(spec 000)", s.LazyRagApiRequest, s.LazyRagApiResponse, headers=SPEC_HEADERS),
    Operation("post", "/api/v1/lazy-rag/expand", SPEC, "LazyRAG: the subgraph, chunks and scores only, no model "
              "call (spec 000)", s.LazyRagApiRequest, s.LazyRagApiResponse, headers=SPEC_HEADERS),
    Operation("post", "/retrieve", SPEC, "DRIFT search (spec 004); `project_id` is the collection. With `Accept: "
              "text/event-stream`: `retrieval_progress` events (RetrievalProgress), then `result` (RetrieveResponse)",
              s.RetrieveRequest, s.RetrieveResponse, headers=SPEC_HEADERS, events=s.RetrievalProgress,
              also=(("text/event-stream", "progress events, then the result"),)),
    Operation("post", "/api/v1/flow/{flow}/service/{kind}", TG, "A flow service (graph-rag, triples, embeddings, "
              "lazy-rag, drift, kg-query, ...), answered once", g.ServiceBody, g.ServiceAnswer),
    Operation("post", "/api/v1/{kind}", TG, "A workspace service (flow, config, collection-management, librarian), "
              "dispatched on `operation`", g.ServiceBody, g.ServiceAnswer),
    Operation("get", "/api/v1/socket", TG, "The TrustGraph websocket: request frames in, response frames out. " + WS,
              websocket=True),
    Operation("get", "/api/v1/flow/{flow}/import/triples", TG, "Bulk triples import. " + WS, query=WS_QUERY,
              websocket=True),
    Operation("get", "/api/v1/flow/{flow}/import/entity-contexts", TG, "Entity contexts of tg-load-knowledge (read, "
              "not stored). " + WS, query=WS_QUERY, websocket=True),
    Operation("get", "/api/v1/flow/{flow}/export/document-embeddings", TG, "Every chunk's embedding. " + WS,
              query=WS_QUERY, websocket=True),
    Operation("get", "/api/v1/flow/{flow}/import/{kind}", TG, "Other TrustGraph imports: not supported (an error "
              "with status 200, as TrustGraph answers)", answer=s.ApiError),
    Operation("get", "/api/v1/flow/{flow}/export/{kind}", TG, "Other TrustGraph exports: not supported",
              answer=s.ApiError),
    Operation("post", "/api/v1/auth/{op}", TG, "TrustGraph IAM's auth routes: not supported", answer=s.ApiError),
    Operation("get", "/api/v1/document-stream", TG, "A library document's content", content="application/octet-stream",
              query=(("document-id", "the document"), ("workspace", "the workspace"))),
    Operation("get", "/api/v1/health", STATUS, "Liveness; with a valid token, also the running flows",
              answer=g.Health),
    Operation("get", "/api/metrics", STATUS, "Prometheus metrics of this process", content="text/plain"),
    Operation("get", "/api/metrics/{path}", STATUS, "Prometheus' query API (or this process's metrics)",
              answer=g.ServiceAnswer),
    Operation("get", "/v1/models", OPENAI, "Model names (`kgflow/SERVICE[:MODE][@COLLECTION]`)", answer=g.ServiceAnswer,
              error=g.OpenAIError, headers=CHAT_HEADERS),
    Operation("post", "/v1/chat/completions", OPENAI, "A chat completion (`stream`: server-sent events)",
              g.ChatCompletionRequest, g.ServiceAnswer, error=g.OpenAIError, headers=CHAT_HEADERS,
              also=(("text/event-stream", "chat.completion.chunk events, then [DONE]"),)),
    Operation("post", "/api/chat", OLLAMA, "A chat answer (NDJSON stream unless `stream` is false)",
              g.OllamaChatRequest, g.ServiceAnswer, error=g.OllamaError, headers=CHAT_HEADERS),
    Operation("post", "/api/generate", OLLAMA, "A completion of a prompt (NDJSON stream unless `stream` is false)",
              g.OllamaGenerateRequest, g.ServiceAnswer, error=g.OllamaError, headers=CHAT_HEADERS),
    Operation("post", "/api/show", OLLAMA, "One model's description", g.OllamaShowRequest, g.ServiceAnswer,
              error=g.OllamaError, headers=CHAT_HEADERS),
    Operation("get", "/api/tags", OLLAMA, "Model names", answer=g.ServiceAnswer, error=g.OllamaError),
    Operation("get", "/api/version", OLLAMA, "The Ollama API version followed", answer=g.ServiceAnswer),
    Operation("get", "/api/ps", OLLAMA, "Running models (none: kgflow loads none)", answer=g.ServiceAnswer),
    Operation("post", "/mcp", MCP, "The MCP server over streamable HTTP (stateless, JSON answers): JSON-RPC "
              "messages in, JSON-RPC answers out; tools ask the retrieval services, search, list, read and load",
              g.ServiceBody, g.ServiceAnswer),
    Operation("get", "/mcp", MCP, "Not served: a stateless MCP server holds no stream (405)", answer=s.ApiError),
    Operation("delete", "/mcp", MCP, "Not served: a stateless MCP server has no session to end (405)",
              answer=s.ApiError),
    Operation("get", "/", PAGES, "The explorer page", content="text/html"),
    Operation("get", "/index.html", PAGES, "The explorer page", content="text/html"),
    Operation("get", "/static/{name}", PAGES, "An asset of the explorer page", content="application/octet-stream"),
    Operation("get", "/openapi.json", PAGES, "This document", answer=g.ServiceAnswer),
    Operation("get", "/docs", PAGES, "This document as a page", content="text/html"),
)  # fmt: skip


def _parameters(op: Operation) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": p, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
        for p in re.findall(r"{(\w+)}", op.path)
    ]
    out += [{"name": n, "in": "query", "description": d, "schema": {"type": "string"}} for n, d in op.query]
    out += [{"name": n, "in": "header", "description": d, "schema": {"type": "string"}} for n, d in op.headers]
    return out


def _responses(op: Operation, refs: dict[type[BaseModel], Any]) -> dict[str, Any]:
    if op.websocket:
        ok: dict[str, Any] = {"101": {"description": "switching to the websocket"}}
    elif op.answer is not None:
        ok = {"200": {"description": "the answer", "content": {JSON: {"schema": refs[op.answer]}}}}
    else:
        ok = {"200": {"description": "the content", "content": {op.content: {"schema": {"type": "string"}}}}}
    for content, description in op.also:
        events = {"x-event-schema": refs[op.events]} if op.events else {}  # each event's data
        ok["200"]["content"][content] = {"schema": {"type": "string", "description": description}, **events}
    error = {"description": "an error (status by its type: 400, 401, 403, 404, 413, 429, 503, 504)",
             "content": {JSON: {"schema": refs[op.error]}}}  # fmt: skip
    return {**ok, "default": error}


@cache
def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route (built once, from the models)."""
    models = {m for op in OPERATIONS for m in (op.body, op.answer, op.error, op.events) if m is not None}
    keyed = sorted(models, key=lambda m: m.__name__)
    mapping, defs = models_json_schema([(m, "validation") for m in keyed], ref_template=REF)
    refs = {m: mapping[(m, "validation")] for m in keyed}
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        entry: dict[str, Any] = {"tags": [op.tag], "summary": op.summary, "operationId": _operation_id(op)}
        if params := _parameters(op):
            entry["parameters"] = params
        if op.body is not None:
            entry["requestBody"] = {"required": True, "content": {JSON: {"schema": refs[op.body]}}}
        entry["responses"] = _responses(op, refs)
        paths.setdefault(op.path, {})[op.method] = entry
    return {
        "openapi": "3.1.0",
        "info": {"title": "kgflow gateway", "version": f"schema-{SCHEMA_VERSION}",
                 "description": "GraphRAG services over REST: the specs' endpoints, a TrustGraph-compatible API "
                                "and OpenAI/Ollama-compatible chat. Errors: `{\"error\": {\"type\", \"message\"}}`."},
        "paths": paths,
        "components": {"schemas": defs.get("$defs", {}),
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{}, {"bearer": []}],  # open on loopback when no token is configured
    }  # fmt: skip


def _operation_id(op: Operation) -> str:
    words = re.sub(r"[{}]", "", op.path).strip("/").replace(".", "-").replace("/", "-") or "index"
    return f"{op.method}-{words}"


def page(doc: dict[str, Any]) -> str:
    """The document as one HTML page: each route, its parameters and models, then every model's schema."""
    esc = html.escape
    rows = []
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            params = ", ".join(f"{p['name']} ({p['in']})" for p in op.get("parameters", []))
            body = _ref_link(op.get("requestBody", {}).get("content", {}).get(JSON, {}).get("schema"))
            ok = next(iter(op["responses"].items()))
            answer = ", ".join(_ref_link(c.get("schema")) or esc(t) for t, c in ok[1].get("content", {}).items())
            rows.append(f"<tr><td><b>{method.upper()}</b></td><td><code>{esc(path)}</code></td>"
                        f"<td>{esc(op['tags'][0])}</td><td>{esc(op['summary'])}</td><td>{esc(params)}</td>"
                        f"<td>{body}</td><td>{ok[0]} {answer}</td></tr>")  # fmt: skip
    models = "".join(
        f'<h3 id="{esc(name)}">{esc(name)}</h3><pre>{esc(json.dumps(schema, indent=2))}</pre>'
        for name, schema in sorted(doc["components"]["schemas"].items())
    )
    head = "<tr><th>method</th><th>path</th><th>group</th><th>what</th><th>parameters</th><th>body</th><th>answer</th>"
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(doc['info']['title'])} API</title>"
            "<style>body{font:14px sans-serif;margin:2em}td,th{border-bottom:1px solid #ddd;padding:4px;"
            "text-align:left;vertical-align:top}pre{background:#f6f6f6;padding:8px}</style></head><body>"
            f"<h1>{esc(doc['info']['title'])} API</h1><p>{esc(doc['info']['description'])}</p>"
            "<p>Machine-readable: <a href='/openapi.json'>/openapi.json</a> (OpenAPI 3.1)</p>"
            f"<table>{head}{''.join(rows)}</table><h2>Models</h2>{models}</body></html>")  # fmt: skip


def _ref_link(schema: dict[str, Any] | None) -> str:
    ref = (schema or {}).get("$ref", "")
    name = ref.rsplit("/", 1)[-1]
    return f'<a href="#{html.escape(name)}">{html.escape(name)}</a>' if name else ""


async def openapi_json(request: web.Request) -> web.Response:
    """`GET /openapi.json`."""
    return web.json_response(document())


async def docs(request: web.Request) -> web.Response:
    """`GET /docs`: the document as a page."""
    return web.Response(text=_page(), content_type="text/html")


@cache
def _page() -> str:
    return page(document())


def add_routes(app: web.Application) -> None:
    """Register `/openapi.json` and `/docs`."""
    app.router.add_get("/openapi.json", openapi_json)
    app.router.add_get("/docs", docs)
