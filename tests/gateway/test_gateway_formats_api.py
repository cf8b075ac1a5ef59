"""Into a real `kgflow up` from outside: the Python API (`Kgflow.connect`) and the CLI with --url load
documents of every format and triples, ask with page-cited answers and manage collections and
flows; TrustGraph's `document-load` takes a PDF's bytes and refuses an encrypted one with the
reason."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from gw_support import BIN, ROOT, kgflow_up, up_env

from processors.commands.api import Kgflow
from processors.commands.api_sync import KgflowSync
from tests.documents.format_files import encrypted_pdf, text_pdf, write_corpus

QUESTION = "Which element did Marie Curie name after her homeland?"


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("formats-up")
    write_corpus(root / "corpus")
    with kgflow_up(root / "home", up_env()) as url:
        yield url, root


async def test_the_api_loads_asks_and_manages_through_a_gateway(up: tuple[str, Path]) -> None:
    url, root = up
    steps: list[tuple[str, int]] = []
    async with Kgflow.connect(url, user="api-user") as kg:
        done = await kg.load_documents(
            [root / "corpus"], collection="files", progress=lambda s, n: steps.append((s, n))
        )
        assert (done.loaded, len(done.failed)) == (4, 0) and not done.complete
        assert {Path(k).name for k in done.skipped} == {"locked.pdf", "scan.pdf", "broken.docx"}
        assert ("documents", 4) in steps and sum(n for s, n in steps if s == "loaded") == 4
        assert done.communities is not None and done.communities.levels

        res = await kg.lazy_rag(QUESTION, collection="files", no_llm=True)
        assert (res.chunks[0].document_id, res.chunks[0].page) == ("curie-notes.pdf", 2)

        stored = await kg.load_triples(ROOT / "examples" / "sample.tsv", collection="graph")
        assert stored.triples == 92
        answer = await kg.graph_rag("Where was marie_curie's husband born?", collection="graph", no_llm=True)
        assert any(t.o == "paris" for t in answer.triples)
        mix = await kg.kg_query(QUESTION, collection="files", mode="naive", no_llm=True)
        assert mix.mode == "naive" and mix.chunks[0].page == 2

        names = {c.collection: c for c in await kg.collections()}
        assert names["files"].documents == 4 and names["graph"].triples > 0
        assert {d.id for d in await kg.documents("files")} >= {"curie-notes.pdf", "nobel.html"}
        assert (await kg.delete_documents(["nobel.html", "ghost"], "files")).not_found == ["ghost"]
        assert await kg.delete_collection("graph") and not await kg.delete_collection("graph")
        assert "default" in (await kg.flows())["flows"]
        with pytest.raises(ValueError, match="nope"):
            await kg.stop_flow("nope")


def test_the_sync_client_and_the_cli_with_url(up: tuple[str, Path]) -> None:
    url, root = up
    with KgflowSync.connect(url, user="sync-user") as kg:
        done = kg.load_documents([root / "corpus" / "lecture.pptx"], collection="deck")
        assert done.complete and done.loaded == 1
        res = kg.lazy_rag("What glows faintly blue in the dark?", collection="deck", no_llm=True)
        assert (res.chunks[0].page, res.chunks[0].section) == (2, "Radium")

    def kgflow(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / "kgflow"), *args, "--url", url], capture_output=True, text=True,
                              env=up_env(), timeout=600)  # fmt: skip

    loaded = kgflow("load", "documents", str(root / "corpus"), "-C", "cli", "--no-progress")
    assert loaded.returncode == 1 and "locked.pdf: an encrypted PDF" in loaded.stderr, loaded.stderr
    asked = kgflow("query", "lazy-rag", QUESTION, "-C", "cli", "--json", "--no-llm")
    assert asked.returncode == 0, asked.stderr
    top = json.loads(asked.stdout)["chunks"][0]
    assert (top["document_id"], top["page"]) == ("curie-notes.pdf", 2)
    triples = kgflow("load", "triples", str(ROOT / "examples" / "sample.tsv"), "-C", "cli-graph", "--no-progress")
    assert triples.returncode == 0 and "stored 92 triples" in triples.stderr, triples.stderr


def test_trustgraph_document_load_reads_a_pdf_and_refuses_an_encrypted_one(up: tuple[str, Path]) -> None:
    url, _ = up
    endpoint = f"{url}/api/v1/flow/default/service/document-load"
    body = {"id": "notes.pdf", "data": base64.b64encode(text_pdf()).decode(), "collection": "tg-pdf"}
    r = requests.post(endpoint, json=body, timeout=300)
    assert r.status_code == 200 and r.json()["loaded"] == 1, r.text
    body = {"id": "locked.pdf", "data": base64.b64encode(encrypted_pdf()).decode(), "collection": "tg-pdf"}
    r = requests.post(endpoint, json=body, timeout=300)
    assert r.status_code == 400 and "document locked.pdf: an encrypted PDF" in r.json()["error"]["message"]
    with KgflowSync.connect(url) as kg:
        res = kg.lazy_rag(QUESTION, collection="tg-pdf", no_llm=True)
        assert (res.chunks[0].document_id, res.chunks[0].page, res.chunks[0].title) == (
            "notes.pdf",
            2,
            "The Curie Notes",
        )
