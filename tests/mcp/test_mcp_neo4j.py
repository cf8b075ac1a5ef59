"""`kgflow mcp` with every store on the real Neo4j: documents loaded through the MCP tool, read back whole
from their chunks (the overlapping windows rebuild the text exactly), searched within a scope and asked
about, each result cited by document and chunk; the collection is deleted afterwards."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.conftest import Servers
from tests.gateway.gw_support import BIN, up_env
from tests.mcp.mcp_support import call, stdio_session, text

pytestmark = pytest.mark.timeout(900)
COLLECTION = "papers"
LONG = " ".join(
    f"In {1890 + n} the laboratory recorded experiment {n}: pitchblende sample {n} was dissolved, filtered and "
    f"crystallised, and its activity measured with the electrometer Pierre built."
    for n in range(40)
)  # several chunks of 200 tokens, overlapping by 32
SHORT = "Polonium was named after Poland, Marie Curie's homeland, in July 1898."


async def test_load_read_search_and_ask_on_neo4j(servers: Servers, tmp_path: Path) -> None:
    user = f"mcp-{uuid.uuid4().hex[:8]}"
    stores = ["--home", str(tmp_path / "home"), "--documents-backend", "neo4j", "--triples-backend", "neo4j",
              "--vectors-backend", "neo4j", "--neo4j-url", servers.neo4j_url]  # fmt: skip
    try:
        async with stdio_session(tmp_path / "stdio.log", "--user", user, *stores) as s:
            docs = [{"id": "lab-log", "title": "Laboratory log", "text": LONG},
                    {"id": "polonium", "title": "Polonium", "text": SHORT, "metadata": {"year": 1898}}]  # fmt: skip
            loaded = await call(s, "load_documents", collection=COLLECTION, documents=docs)
            assert not loaded.is_error, text(loaded)
            assert loaded.structured_content["loaded"] == 2 and loaded.structured_content["chunks"] > 3

            read = await call(s, "read_document", document_id="lab-log", collection=COLLECTION)
            assert not read.is_error, text(read)
            doc = read.structured_content
            assert doc["text"] == LONG and doc["complete"] and len(doc["passages"]) > 2
            assert [p["ordinal"] for p in doc["passages"]] == list(range(len(doc["passages"])))

            scoped = await call(s, "search_chunks", query="named after her homeland", collection=COLLECTION,
                                metadata={"year": 1898})  # fmt: skip
            assert [p["document_id"] for p in scoped.structured_content["passages"]] == ["polonium"]

            answer = await call(s, "ask_lazy_rag", question="What was polonium named after?", collection=COLLECTION,
                                no_llm=True)  # fmt: skip
            assert not answer.is_error, text(answer)
            top = answer.structured_content["passages"][0]
            assert top["document_id"] == "polonium" and top["chunk_id"] and "Poland" in top["text"]

            other = await call(s, "list_documents", collection="not-here")
            assert other.is_error and f"collections: {COLLECTION}" in text(other)
    finally:
        command = [str(BIN / "kgflow"), "collections", "delete", COLLECTION, "--user", user, *stores]
        done = await asyncio.to_thread(subprocess.run, command, env=up_env(), capture_output=True, text=True,
                                       timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr
