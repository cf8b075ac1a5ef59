"""TrustGraph's bulk sockets beyond triples import (importer.py):

- `GET /api/v1/flow/{flow}/import/entity-contexts` (the second half of `tg-load-knowledge`): frames
  `{"metadata", "entities": [{"entity", "context"}]}` are read and acknowledged; nothing is stored,
  because kgflow's entity index embeds each entity's `rdfs:label`, which the triples sent just before
  carry (other literals stay triples). A frame that is not a JSON object is refused.
- `GET /api/v1/flow/{flow}/export/document-embeddings` (`tg-save-doc-embeds`): every chunk of every
  collection of the workspace, one frame per document `{"metadata": {"id", "metadata": [], "collection"},
  "chunks": [{"chunk_id", "vectors"}]}`, the vectors computed by the flow's embeddings model (the
  model that indexed them); then the socket stays open until the client leaves, as TrustGraph's does
  (the tool saves until interrupted).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import WSMsgType, web

from processors.gateway import translate as tr
from processors.gateway.auth import Principal
from processors.gateway.dispatch import Dispatcher
from processors.gateway.errors import GatewayError
from schemas.documents import ChunkSearch, ListDocuments
from schemas.embeddings import EmbeddingsRequest
from schemas.scope import Scope
from schemas.services import DOCUMENTS, EMBEDDINGS

log = logging.getLogger(__name__)
EMBED_BATCH = 64  # chunk texts per embeddings request


async def import_entity_contexts(ws: web.WebSocketResponse) -> int:
    """Read entity-context frames until the client closes; returns how many entities were read."""
    count = 0
    async for msg in ws:
        if msg.type != WSMsgType.TEXT:
            break
        try:
            frame = tr.require_object(tr.loads(msg.data), "frame")
            count += len(frame.get("entities") or [])
        except tr.BadRequest as e:
            await ws.send_json({"error": {"type": "bad-request", "message": str(e)}})
    return count


async def _document_frames(d: Dispatcher, flow: str, user: str) -> AsyncIterator[tuple[str, str, list[dict[str, Any]]]]:
    """(collection, document id, chunks with vectors) for every document of the workspace."""
    for info in await d.list_collections(user):
        listed = [res async for res in d.ask(DOCUMENTS, flow, ListDocuments(user=user, collection=info.collection))]
        for doc in listed[-1].documents if listed else []:
            if not doc.chunks:
                continue
            probe = [r async for r in d.ask(EMBEDDINGS, flow, EmbeddingsRequest(texts=[doc.title or doc.id]))]
            search = ChunkSearch(user=user, collection=info.collection, vector=probe[-1].vectors[0], mode="vector",
                                 limit=min(doc.chunks, 1000), scope=Scope(document_ids=[doc.id]))  # fmt: skip
            found = [r async for r in d.ask(DOCUMENTS, flow, search)]
            chunks = sorted(found[-1].chunks, key=lambda c: c.ordinal) if found else []
            vectors: list[list[float]] = []
            for i in range(0, len(chunks), EMBED_BATCH):
                texts = [c.text for c in chunks[i : i + EMBED_BATCH]]
                vectors += [r async for r in d.ask(EMBEDDINGS, flow, EmbeddingsRequest(texts=texts))][-1].vectors
            yield (
                info.collection,
                doc.id,
                [{"chunk_id": c.id, "vectors": v} for c, v in zip(chunks, vectors, strict=True)],
            )


async def export_document_embeddings(ws: web.WebSocketResponse, d: Dispatcher, principal: Principal,
                                     workspace: str | None, flow: str) -> int:  # fmt: skip
    """Send every document's chunk embeddings, then wait for the client to leave; returns documents sent."""
    sent = 0
    try:
        user = principal.resolve(workspace)
        async for collection, doc_id, chunks in _document_frames(d, flow, user):
            meta = {"id": doc_id, "metadata": [], "collection": collection}
            await ws.send_json({"metadata": meta, "chunks": chunks})
            sent += 1
    except GatewayError as e:
        await ws.send_json({"error": e.to_wire()})
    except ConnectionError:
        return sent
    async for _ in ws:  # the client decides when it has saved enough
        pass
    return sent
