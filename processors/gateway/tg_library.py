"""TrustGraph's library (`librarian` service) on kgflow: documents kept as uploaded, per workspace, until
"processing" loads one into a collection through the documents flow (document-load).

The library lives in the gateway's home (`HOME/library/`): one JSON metadata file and one content file per
document, one JSON file per processing record, under a folder per workspace; names are hashes, so a client's
id never becomes a path. Files are read and written off the event loop. Processing is done when the answer
comes (the document is chunked, indexed and in the collection); stopping a processing forgets its record
(the collection keeps the document: delete it from the collection to remove it). A document is decoded as
`kgflow load` decodes a file (formats/: PDF text layer, DOCX, PPTX, HTML, markdown, UTF-8 text), a book cut into
parts `ID#1`, `ID#2`, ...; what cannot be decoded is refused at add-document with the reason processing gives.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import time
from pathlib import Path
from typing import Any

from processors.gateway.translate import BadRequest, require_object, validate_as
from processors.ingest.documents.formats import UnreadableFile, extract, part_ids, parts
from schemas.documents import MAX_TITLE_CHARS, Document

# A library document's bytes. In one add-document request a document must fit the gateway's frame with its
# base64 (~750 kB at the default 1 MiB); trustgraph-cli sends one over 2 MB in chunks (tg_uploads.py).
MAX_CONTENT_BYTES = 10 << 20
OPS = ("add-document", "list-documents", "get-document", "get-document-metadata", "get-document-content",
       "update-document", "remove-document", "add-processing", "remove-processing", "list-processing")  # fmt: skip


def name_of(key: str) -> str:
    """The file name a client's id is kept under (a hash: an id never becomes a path)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def _str(d: dict[str, Any], field: str, what: str) -> str:
    value = d.get(field)
    if not isinstance(value, str) or not value or len(value) > 512:
        raise BadRequest(f"invalid request: {what}.{field}: expected a non-empty string of at most 512 characters")
    return value


def _tags(d: dict[str, Any]) -> list[str]:
    tags = d.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise BadRequest("invalid request: tags: expected a list of strings")
    return tags


def document_metadata(wire: dict[str, Any]) -> dict[str, Any]:
    """The `document-metadata` of an add or update request, checked."""
    meta = require_object(wire.get("document-metadata"), "document-metadata")
    triples = meta.get("metadata") or []
    if not isinstance(triples, list):
        raise BadRequest("invalid request: document-metadata.metadata: expected a list of triples")
    return {
        "id": _str(meta, "id", "document-metadata"),
        "time": int(meta["time"]) if isinstance(meta.get("time"), int | float) else int(time.time()),
        "kind": str(meta.get("kind") or "text/plain"),
        "title": str(meta.get("title") or ""),
        "comments": str(meta.get("comments") or ""),
        "metadata": triples,
        "tags": _tags(meta),
    }


def processing_metadata(wire: dict[str, Any]) -> dict[str, Any]:
    """The `processing-metadata` of an add-processing request, checked."""
    meta = require_object(wire.get("processing-metadata"), "processing-metadata")
    return {
        "id": _str(meta, "id", "processing-metadata"),
        "document-id": _str(meta, "document-id", "processing-metadata"),
        "time": int(meta["time"]) if isinstance(meta.get("time"), int | float) else int(time.time()),
        "flow": str(meta.get("flow") or "default"),
        "collection": str(meta.get("collection") or "default"),
        "tags": _tags(meta),
    }


def content_of(wire: dict[str, Any]) -> bytes:
    """The decoded `content` of an add-document request."""
    encoded = wire.get("content")
    if not isinstance(encoded, str):
        raise BadRequest("invalid request: content: expected the document as base64")
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as e:
        raise BadRequest(f"invalid request: content: not base64 ({e})") from None
    if len(data) > MAX_CONTENT_BYTES:
        raise BadRequest(f"invalid request: content: {len(data)} bytes > {MAX_CONTENT_BYTES}")
    return data


def documents_of(meta: dict[str, Any], content: bytes) -> list[Document]:
    """The documents a processing loads: the content decoded by `kgflow load`'s readers (by its bytes, its
    `kind` content type, the id's extension), a book cut into parts `ID#1`, `ID#2`, ... as `kgflow load`
    cuts one. CPU work (a PDF): call it off the event loop. An unreadable or empty file is a BadRequest."""
    doc_id, kind = meta["id"], meta.get("kind", "")
    try:
        found = extract(content, doc_id, kind)
    except UnreadableFile as e:
        raise BadRequest(f"document {doc_id!r} ({kind}) cannot be processed: {e}") from None
    if not found.text.strip():
        raise BadRequest(f"document {doc_id!r} ({kind}) cannot be processed: no text in it")
    title = (meta.get("title") or found.title or doc_id)[:MAX_TITLE_CHARS]
    pieces = parts(found)
    ids = part_ids(doc_id, len(pieces))
    extra = {"kind": kind, "tags": meta.get("tags", [])}
    fields = [{"id": i, "title": title, "text": p.text, "sections": p.sections, "metadata": extra}
              for i, p in zip(ids, pieces, strict=True)]  # fmt: skip
    return [validate_as(Document, f, "document.") for f in fields]


async def decode(meta: dict[str, Any], content: bytes) -> list[Document]:
    """`documents_of`, off the event loop."""
    return await asyncio.to_thread(documents_of, meta, content)


class LibraryStore:
    """Documents and processing records of every workspace under one folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.chunk_bytes = 512 << 10  # a chunked upload's chunk (the gateway sets it from its frame: tg_uploads.py)
        self._lock = asyncio.Lock()  # one writer at a time: check-then-write stays atomic

    def folder(self, workspace: str, kind: str) -> Path:
        """The folder of a workspace's `kind` (documents, processing, uploads)."""
        return self.root / name_of(workspace) / kind

    def has(self, workspace: str, doc_id: str) -> bool:
        """Whether the library holds a document `doc_id` (a file check: call it off the event loop)."""
        return (self.folder(workspace, "documents") / f"{name_of(doc_id)}.json").is_file()

    async def add(self, workspace: str, meta: dict[str, Any], content: bytes) -> None:
        """Keep a new document (an id already in the library is refused, as TrustGraph's librarian does)."""
        folder = self.folder(workspace, "documents")
        async with self._lock:
            await asyncio.to_thread(_write_new, folder, name_of(meta["id"]), meta, content)

    async def update(self, workspace: str, meta: dict[str, Any]) -> dict[str, Any]:
        """Replace a document's metadata (title, comments, tags, ...); its content stays."""
        folder = self.folder(workspace, "documents")
        async with self._lock:
            old = await self.get(workspace, meta["id"])
            new = {**old, **{k: v for k, v in meta.items() if k not in ("time", "kind")}}
            await asyncio.to_thread(write_json, folder / f"{name_of(meta['id'])}.json", new)
            return new

    async def get(self, workspace: str, doc_id: str) -> dict[str, Any]:
        """A document's metadata (BadRequest when it is not in the library)."""
        path = self.folder(workspace, "documents") / f"{name_of(doc_id)}.json"
        found = await asyncio.to_thread(read_json, path)
        if found is None:
            raise BadRequest(f"invalid request: document-id: no document {doc_id!r} in the library")
        return found

    async def content(self, workspace: str, doc_id: str) -> bytes:
        """A document's content."""
        await self.get(workspace, doc_id)
        return await asyncio.to_thread((self.folder(workspace, "documents") / f"{name_of(doc_id)}.bin").read_bytes)

    async def remove(self, workspace: str, doc_id: str) -> None:
        """Forget a document (BadRequest when it is not in the library)."""
        await self.get(workspace, doc_id)
        async with self._lock:
            folder = self.folder(workspace, "documents")
            await asyncio.to_thread(_unlink, folder / f"{name_of(doc_id)}.json", folder / f"{name_of(doc_id)}.bin")

    async def list(self, workspace: str, kind: str = "documents") -> list[dict[str, Any]]:
        """Every document (or processing record), oldest first."""
        return await asyncio.to_thread(_read_all, self.folder(workspace, kind))

    async def add_processing(self, workspace: str, meta: dict[str, Any]) -> None:
        """Record a finished processing."""
        async with self._lock:
            await asyncio.to_thread(write_json, self.folder(workspace, "processing") / f"{name_of(meta['id'])}.json",
                                    meta)  # fmt: skip

    async def remove_processing(self, workspace: str, pid: str) -> None:
        """Forget a processing record (BadRequest when there is none)."""
        path = self.folder(workspace, "processing") / f"{name_of(pid)}.json"
        async with self._lock:
            if await asyncio.to_thread(read_json, path) is None:
                raise BadRequest(f"invalid request: processing-id: no processing {pid!r}")
            await asyncio.to_thread(_unlink, path)


def write_json(path: Path, obj: dict[str, Any]) -> None:
    """Write `obj` to `path` whole (a reader never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj), encoding="utf-8")
    tmp.replace(path)


def _write_new(folder: Path, name: str, meta: dict[str, Any], content: bytes) -> None:
    if (folder / f"{name}.json").exists():
        raise BadRequest(f"invalid request: document {meta['id']!r} is already in the library")
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"{name}.bin.tmp"
    tmp.write_bytes(content)
    tmp.replace(folder / f"{name}.bin")
    write_json(folder / f"{name}.json", meta)  # last: a document is listed only once its content is there


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object at `path`, or None when there is no such file."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def _read_all(folder: Path) -> list[dict[str, Any]]:
    if not folder.is_dir():
        return []
    found = [read_json(p) for p in folder.glob("*.json")]
    return sorted((f for f in found if f is not None), key=lambda d: (d.get("time", 0), d.get("id", "")))


def _unlink(*paths: Path) -> None:
    for p in paths:
        p.unlink(missing_ok=True)
