"""TrustGraph's library on kgflow (issues 41 and 42): a library document is decoded as `kgflow load`
decodes a file, a book as parts; what processing would refuse is refused at add-document with the
same reason; errors reach trustgraph-cli in the field it prints; a document over the frame reaches
the library through TrustGraph's chunked upload, driven by the real tg-add-library-document."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from gw_support import BIN, LiveGateway

from processors.gateway.tg_library import documents_of
from processors.gateway.tg_uploads import chunk_bytes
from processors.gateway.translate import BadRequest
from schemas.documents import MAX_DOCUMENT_CHARS


async def post(live: LiveGateway, body: dict[str, Any]) -> dict[str, Any]:
    async with aiohttp.ClientSession() as s, s.post(f"{live.url}/api/v1/librarian", json=body) as r:
        assert r.status == 200, await r.text()  # trustgraph-cli reads an error only from a 200's body
        return await r.json()


async def tg(command: str, *args: str) -> tuple[int, str]:
    """Run a real tg-* command off the event loop (the gateway under test serves on it)."""
    proc = await asyncio.create_subprocess_exec(
        str(BIN / command), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(errors="replace")


def test_a_book_is_processed_as_parts_and_what_cannot_be_read_is_refused() -> None:
    paragraph = "The Halvard ferry crosses the Sundmere strait twice a day. " * 20 + "\n\n"
    book = (paragraph * (700_000 // len(paragraph) + 1)).encode()  # issue 42's 700,000 characters
    docs = documents_of({"id": "book", "kind": "text/plain", "title": "Ferries", "tags": ["sea"]}, book)
    assert [d.id for d in docs] == [f"book#{n}" for n in range(1, len(docs) + 1)] and len(docs) >= 3
    assert all(len(d.text) <= MAX_DOCUMENT_CHARS and d.title == "Ferries" for d in docs)
    assert "".join(d.text for d in docs) == book.decode()
    with pytest.raises(BadRequest, match="'scan' \\(application/msword\\) cannot be processed: a legacy binary"):
        documents_of({"id": "scan", "kind": "application/msword"}, b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(64))
    with pytest.raises(BadRequest, match="no text in it"):
        documents_of({"id": "blank", "kind": "text/plain"}, b"  \n")


async def test_tg_commands_print_the_reason(live: LiveGateway, tmp_path: Path) -> None:
    u = ("-u", f"{live.url}/")
    (tmp_path / "old.doc").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(64))
    code, out = await tg("tg-add-library-document", *u, "--id", "old", "-k", "application/msword",
                         str(tmp_path / "old.doc"))  # fmt: skip
    assert code == 0 and "bad-request" in out and "legacy binary Office file" in out, out  # exit 0: TrustGraph's own
    code, out = await tg("tg-start-library-processing", *u, "-d", "missing", "--id", "p1")
    assert "Exception: bad-request" in out and "no document 'missing' in the library" in out, out
    code, out = await tg("tg-delete-collection", *u, "-y", "nope")
    assert "Status code" not in out and "nope" in out, out


async def test_a_document_over_the_frame_arrives_in_chunks(live: LiveGateway, tmp_path: Path) -> None:
    line = "Maren Tofte logged every ship that passed the Skerry Light.\n"
    text = line * (int(2.5 * (1 << 20)) // len(line))  # over trustgraph-cli's 2 MB: sent in chunks
    (tmp_path / "log.txt").write_text(text)
    code, out = await tg("tg-add-library-document", "-u", f"{live.url}/", "--id", "log", "-k", "text/plain",
                         "--name", "Ship log", str(tmp_path / "log.txt"))  # fmt: skip
    assert code == 0 and "Loaded successfully" in out, out
    got = await post(live, {"operation": "get-document-content", "document-id": "log"})
    assert base64.b64decode(got["content"]) == text.encode()
    listed = await post(live, {"operation": "list-documents"})
    assert [(d["id"], d["title"]) for d in listed["document-metadatas"]] == [("log", "Ship log")]


async def test_chunked_upload_refusals(live: LiveGateway) -> None:
    meta, size = {"id": "big", "kind": "text/plain"}, chunk_bytes(64 * 1024)  # the test gateway's frame: 64 KiB
    whole = await post(live, {"operation": "add-document", "document-metadata": meta,
                              "content": base64.b64encode(bytes(size * 2)).decode()})  # fmt: skip
    assert whole["error"]["type"] == "frame-too-large", whole  # in the body trustgraph-cli reads
    too_big = await post(live, {"operation": "begin-upload", "document-metadata": meta, "total-size": 11 << 20})
    assert "total-size: expected 1 to 10,485,760 bytes" in too_big["error"]["message"]
    begun = await post(live, {"operation": "begin-upload", "document-metadata": meta, "total-size": size + 5})
    assert begun["chunk-size"] == size and begun["total-chunks"] == 2
    up = {"operation": "upload-chunk", "upload-id": begun["upload-id"]}
    short = await post(live, {**up, "chunk-index": 0, "content": base64.b64encode(b"abc").decode()})
    assert f"chunk 0 has 3 bytes, expected {size:,}" in short["error"]["message"]
    await post(live, {**up, "chunk-index": 1, "content": base64.b64encode(b"tail.").decode()})
    early = await post(live, {"operation": "complete-upload", "upload-id": begun["upload-id"]})
    assert "chunks [0] not received" in early["error"]["message"]
    await post(live, {**up, "chunk-index": 0, "content": base64.b64encode(b"\xff" * size).decode()})
    refused = await post(live, {"operation": "complete-upload", "upload-id": begun["upload-id"]})
    assert "'big' (text/plain) cannot be processed: not utf-8 text" in refused["error"]["message"]
    gone = await post(live, {"operation": "complete-upload", "upload-id": begun["upload-id"]})
    assert "no upload" in gone["error"]["message"]  # a refused upload is forgotten
    listed = await post(live, {"operation": "list-documents"})
    assert listed["document-metadatas"] == []
