"""TrustGraph's workspace services the gateway answers itself: `config` (tg_config.py), `librarian`
(tg_library.py) and the refusals of what kgflow does not have.

Each is given the Dispatcher (for the flow registry, the config it pushed, and the services of a flow)
and answers in frames. Services and operations TrustGraph has and kgflow does not are refused at once
with a `not-supported` error naming them, never left to time out.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any, Protocol

from pydantic import BaseModel

from processors.gateway import tg_config as tgc
from processors.gateway import tg_library as tgl
from processors.gateway import tg_uploads as tgu
from processors.gateway.auth import Principal
from processors.gateway.tg_documents import load_response_to_wire
from processors.gateway.translate import BadRequest, NotSupported, require_object
from schemas.documents import DocumentStatus, LoadDocuments
from schemas.flows import ConfigState, FlowRequest, FlowResponse
from schemas.prompts import Prompts
from schemas.services import DOCUMENT_LOAD, DOCUMENTS, Service

Frame = tuple[dict[str, Any], bool]  # (payload, complete), as dispatch.py's


class Dispatcher(Protocol):
    """What these services use of dispatch.Dispatcher (which calls them: no import back)."""

    config: ConfigState
    prompts: Prompts
    library: tgl.LibraryStore | None

    async def refresh(self) -> None: ...

    async def config_request(self, req: FlowRequest) -> FlowResponse: ...

    def ask(self, service: Service, flow: str, request: BaseModel) -> AsyncIterator[Any]: ...


# TrustGraph 2.11.1 services kgflow has no counterpart for (workspace and flow services).
NOT_SUPPORTED_SERVICES = {
    "knowledge": "knowledge cores (kgflow keeps triples and vectors in its stores; load with tg-load-turtle or "
    "tg-load-knowledge, export with tg-show-graph / tg-graph-to-turtle)",
    "iam": "users, API keys and workspaces (kgflow's gateway takes tokens from KGFLOW_GATEWAY_TOKEN[_FILE])",
    "agent": "agents",
    "mcp-tool": "MCP tools",
    "nlp-query": "natural-language structured queries",
    "structured-query": "structured queries",
    "structured-diag": "structured-data diagnosis",
    "rows": "row (object) queries",
    "row-embeddings": "row embeddings",
    "document-embeddings": "document-embeddings queries (kgflow searches chunks inside lazy-rag and kg-query)",
    "sparql-query": "SPARQL (query triples with the `triples` service: tg-query-graph)",
    "image-to-text": "image description",
    "cloze": "cloze models",
    "decision-scoring": "decision scoring",
    "field-extract": "field extraction",
    "explainability": "explainability traces",
}


ENDPOINTS = {
    "/import/": "bulk import of anything but triples",
    "/export/": "bulk export (read triples with tg-show-graph / tg-graph-to-turtle)",
    "/auth/": "users and passwords (kgflow's gateway takes tokens from KGFLOW_GATEWAY_TOKEN[_FILE])",
}


def endpoint_feature(path: str) -> str:
    """What a TrustGraph endpoint kgflow does not have is for."""
    return next((what for part, what in ENDPOINTS.items() if part in path), "a TrustGraph endpoint")


def iam(principal: Principal, user: str, wire: object) -> dict[str, Any]:
    """TrustGraph's `iam` service: `whoami` (the caller as kgflow knows it); the rest is refused."""
    op = wire.get("operation") if isinstance(wire, dict) else None
    if op != "whoami":
        raise NotSupported(f"iam operation {op!r}: {NOT_SUPPORTED_SERVICES['iam']} — not supported by kgflow")
    role = "admin" if principal.admin else "workspace"
    record = {"id": principal.workspace or "admin", "username": principal.workspace or "admin",
              "name": f"kgflow {role} token", "workspace": user, "roles": [role], "enabled": True}  # fmt: skip
    return {"user": record}


def refuse(service: str) -> NotSupported:
    """The refusal of a TrustGraph service kgflow does not have."""
    what = NOT_SUPPORTED_SERVICES.get(service, service)
    return NotSupported(f"{service}: {what} — not supported by kgflow")


async def config(d: Dispatcher, principal: Principal, user: str, wire: object) -> AsyncIterator[Frame]:
    """The `config` workspace service."""
    wire = require_object(wire)
    op = wire.get("operation")
    if op in tgc.READ_OPS:
        if not d.config.version:
            await d.refresh()
        spaces = sorted(set(d.config.items) | {user}) if principal.admin else [user]
        yield tgc.read(op, wire, d.prompts, d.config.items, user, d.config.version, spaces), True
    elif op in tgc.WRITE_OPS:
        items = tgc.write_items(op, wire, d.prompts)
        kind = "put-config-items" if op == "put" else "delete-config-items"
        await d.config_request(FlowRequest(operation=kind, workspace=user, items=items))
        yield {}, True
    else:
        raise NotSupported(f"config operation {op!r} is not supported by kgflow (supported: "
                           f"{', '.join(tgc.READ_OPS + tgc.WRITE_OPS)})")  # fmt: skip


def _metadata_to_wire(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: meta[k] for k in ("id", "time", "kind", "title", "comments", "metadata", "tags") if k in meta}


async def librarian(d: Dispatcher, user: str, wire: object) -> AsyncIterator[Frame]:
    """The `librarian` workspace service (the library: tg_library.py)."""
    wire = require_object(wire)
    op, lib = wire.get("operation"), d.library
    if op not in tgl.OPS + tgu.UPLOAD_OPS:
        raise NotSupported(f"librarian operation {op!r} is not supported by kgflow (supported: "
                           f"{', '.join(tgl.OPS + tgu.UPLOAD_OPS)})")  # fmt: skip
    if lib is None:
        raise NotSupported("the library needs a gateway home (kgflow up / kgflow run gateway); not supported here")
    if op in tgu.UPLOAD_OPS:
        yield await tgu.upload(lib, user, op, wire), True
    elif op == "add-document":
        meta, content = tgl.document_metadata(wire), tgl.content_of(wire)
        await tgl.decode(meta, content)  # refused now what processing would refuse, with its reason
        await lib.add(user, meta, content)
        yield {}, True
    elif op == "list-documents":
        yield {"document-metadatas": [_metadata_to_wire(m) for m in await lib.list(user)]}, True
    elif op in ("get-document", "get-document-metadata"):
        yield {"document-metadata": _metadata_to_wire(await lib.get(user, _document_id(wire)))}, True
    elif op == "get-document-content":
        yield {"content": base64.b64encode(await lib.content(user, _document_id(wire))).decode()}, True
    elif op == "update-document":
        yield {"document-metadata": _metadata_to_wire(await lib.update(user, tgl.document_metadata(wire)))}, True
    elif op == "remove-document":
        await lib.remove(user, _document_id(wire))
        yield {}, True
    elif op == "add-processing":
        meta = tgl.processing_metadata(wire)
        report = await process(d, user, meta)
        await lib.add_processing(user, meta)
        yield report, True
    elif op == "remove-processing":
        pid = wire.get("processing-id")
        if not isinstance(pid, str) or not pid:
            raise BadRequest("invalid request: processing-id: required")
        await lib.remove_processing(user, pid)
        yield {}, True
    else:  # list-processing
        yield {"processing-metadatas": await lib.list(user, "processing")}, True


def _document_id(wire: dict[str, Any]) -> str:
    doc_id = wire.get("document-id")
    if not isinstance(doc_id, str) or not doc_id:
        raise BadRequest("invalid request: document-id: required")
    return doc_id


async def process(d: Dispatcher, user: str, meta: dict[str, Any]) -> dict[str, Any]:
    """Load a library document into its collection through the flow's document-load, a book part by part
    (one request a part keeps each under the bus's message limit); done when this returns."""
    assert d.library is not None
    doc = await d.library.get(user, meta["document-id"])
    total = {"loaded": 0, "unchanged": 0, "chunks": 0}
    # The collection's write stamp, read once before the first part (as `kgflow load` does): a delete
    # answered while the parts load refuses the rest, redelivered or not.
    status = DocumentStatus(user=user, collection=meta["collection"], document_ids=[meta["document-id"]])
    stamp = None
    async for res in d.ask(DOCUMENTS, meta["flow"], status):
        stamp = res.stamp
    for document in await tgl.decode(doc, await d.library.content(user, meta["document-id"])):
        req = LoadDocuments(user=user, collection=meta["collection"], documents=[document], stamp=stamp)
        async for res in d.ask(DOCUMENT_LOAD, meta["flow"], req):
            if res.end_of_stream:
                report = load_response_to_wire(res)
                total = {k: total[k] + report[k] for k in total}
    return total


async def document_stream(d: Dispatcher, user: str, doc_id: str) -> bytes:
    """A library document's content (`GET /api/v1/document-stream`)."""
    if d.library is None:
        raise NotSupported("the library needs a gateway home; not supported here")
    return await d.library.content(user, doc_id)
