"""TrustGraph's chunked upload into the library: `begin-upload`, `upload-chunk`, `complete-upload`,
`abort-upload` (trustgraph-cli 2.11.1 uploads a document over 2 MB this way).

The gateway chooses the chunk size (`chunk_bytes`: a chunk's base64 and its request fit the gateway's frame;
the client takes the size it is answered), so a document up to the library's 10 MB is reachable.
Chunks are kept as files beside the library's documents until `complete-upload` joins them, checks the
document as `add-document` does (what processing would refuse is refused, with its reason) and adds it;
`abort-upload`, or a refused completion, forgets the upload.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import math
import shutil
import uuid
from pathlib import Path
from typing import Any

from processors.gateway import tg_library as tgl
from processors.gateway.translate import BadRequest

UPLOAD_OPS = ("begin-upload", "upload-chunk", "complete-upload", "abort-upload")
REQUEST_BYTES = 2048  # what an upload-chunk request holds beside its content
MAX_CHUNK_BYTES = 4 << 20


def chunk_bytes(max_frame_bytes: int) -> int:
    """The largest chunk whose base64, in its request, fits a frame of `max_frame_bytes` (at least 1 byte)."""
    return max(1, min(MAX_CHUNK_BYTES, (max_frame_bytes - REQUEST_BYTES) * 3 // 4 // 1024 * 1024))


def _session(lib: tgl.LibraryStore, workspace: str, wire: dict[str, Any]) -> Path:
    upload_id = wire.get("upload-id")
    if not isinstance(upload_id, str) or not upload_id:
        raise BadRequest("invalid request: upload-id: required")
    folder = lib.folder(workspace, "uploads") / tgl.name_of(upload_id)
    if not (folder / "upload.json").is_file():
        raise BadRequest(f"invalid request: upload-id: no upload {upload_id!r} in progress")
    return folder


def _begin(lib: tgl.LibraryStore, workspace: str, wire: dict[str, Any]) -> dict[str, Any]:
    meta = tgl.document_metadata(wire)
    total = wire.get("total-size")
    if not isinstance(total, int) or not 0 < total <= tgl.MAX_CONTENT_BYTES:
        raise BadRequest(f"invalid request: total-size: expected 1 to {tgl.MAX_CONTENT_BYTES:,} bytes")
    if lib.has(workspace, meta["id"]):  # refused now, not after the whole document is sent
        raise BadRequest(f"invalid request: document {meta['id']!r} is already in the library")
    upload_id = uuid.uuid4().hex
    size = lib.chunk_bytes
    chunks = math.ceil(total / size)
    session = {"upload-id": upload_id, "meta": meta, "total-size": total, "chunk-size": size, "total-chunks": chunks}
    tgl.write_json(lib.folder(workspace, "uploads") / tgl.name_of(upload_id) / "upload.json", session)
    return {"upload-id": upload_id, "chunk-size": size, "total-chunks": chunks}


def _chunk(lib: tgl.LibraryStore, workspace: str, wire: dict[str, Any]) -> dict[str, Any]:
    folder = _session(lib, workspace, wire)
    session = tgl.read_json(folder / "upload.json") or {}
    index, chunks, size = wire.get("chunk-index"), session["total-chunks"], session["chunk-size"]
    if not isinstance(index, int) or not 0 <= index < chunks:
        raise BadRequest(f"invalid request: chunk-index: expected 0 to {chunks - 1}")
    try:
        data = base64.b64decode(str(wire.get("content") or ""), validate=True)
    except (binascii.Error, ValueError) as e:
        raise BadRequest(f"invalid request: content: not base64 ({e})") from None
    expected = min(size, session["total-size"] - index * size)
    if len(data) != expected:
        raise BadRequest(f"invalid request: content: chunk {index} has {len(data):,} bytes, expected {expected:,}")
    (folder / f"{index}.part").write_bytes(data)
    received = sum(1 for _ in folder.glob("*.part"))
    return {"upload-id": session["upload-id"], "chunk-index": index, "chunks-received": received,
            "total-chunks": chunks}  # fmt: skip


def _joined(folder: Path) -> tuple[dict[str, Any], bytes]:
    session = tgl.read_json(folder / "upload.json") or {}
    missing = [i for i in range(session["total-chunks"]) if not (folder / f"{i}.part").is_file()]
    if missing:
        raise BadRequest(f"invalid request: upload-id: chunks {missing[:10]} not received")
    return session["meta"], b"".join((folder / f"{i}.part").read_bytes() for i in range(session["total-chunks"]))


async def upload(lib: tgl.LibraryStore, workspace: str, op: str, wire: dict[str, Any]) -> dict[str, Any]:
    """One operation of a chunked upload (UPLOAD_OPS); files are read and written off the event loop."""
    if op == "begin-upload":
        return await asyncio.to_thread(_begin, lib, workspace, wire)
    if op == "upload-chunk":
        return await asyncio.to_thread(_chunk, lib, workspace, wire)
    folder = await asyncio.to_thread(_session, lib, workspace, wire)
    if op == "abort-upload":
        await asyncio.to_thread(shutil.rmtree, folder, True)
        return {}
    meta, content = await asyncio.to_thread(_joined, folder)  # a chunk missing: refused, the upload kept
    try:
        await tgl.decode(meta, content)  # refused as add-document refuses it
        await lib.add(workspace, meta, content)
    finally:  # completed or refused, the upload is forgotten
        await asyncio.to_thread(shutil.rmtree, folder, True)
    return {"document-id": meta["id"]}
