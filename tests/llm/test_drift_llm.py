"""DRIFT with the real local model on a few Microsoft earnings-call transcripts (the public
GraphRAG set): `kgflow query drift` returns a final answer and key facts whose every citation is
a chunk of the collection, with progress on stderr; the same through the gateway websocket, and
a closed socket cancels the search at the service. Requests are kept small (3 model calls,
short outputs): the model is slow on a shared machine."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.gateway.client import GatewayClient
from processors.gateway.service import GatewayProcessor, GatewaySettings
from processors.retrieval.drift.prompts import NO_ANSWER_PREFIX, NO_MODEL_PREFIX
from processors.stores.settings import StoreSettings
from processors.stores.sqlite.documents import SqliteDocumentStore
from schemas.drift import DriftRequest, DriftResponse
from schemas.retrieval import Citation
from schemas.services import DRIFT
from schemas.tenant import Tenant

ROOT = Path(__file__).resolve().parents[2]
KGFLOW = str(Path(sys.executable).with_name("kgflow"))
CORPUS = ROOT.parent / "shared" / "datasets" / "docqa" / "msgraphrag_msft_earnings" / "corpus.jsonl"
DOCUMENTS, CHARS = 3, 5000  # a few transcripts, the opening of each
COLLECTION = "msft"
QUESTION = "What were the key financial achievements for Microsoft reported on the calls?"
SMALL = {"max-llm-calls": 3, "max-tokens": 400, "prompt-chunks": 2, "prompt-chunk-chars": 300, "community-limit": 3,
         "timeout-s": 1800}  # fmt: skip
SLOW = {"KGFLOW_REQUEST_TIMEOUT_S": "600"}  # a loaded machine may take long between responses
ENV = {"KGFLOW_LLM": "local", "KGFLOW_LLM_TIMEOUT": "900", **SLOW}


@pytest.fixture(scope="module")
def msft_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home where a few transcripts were loaded (and their communities built) by the CLI."""
    home = tmp_path_factory.mktemp("drift-llm")
    docs = home / "msft.jsonl"
    with docs.open("w") as out:
        for line in CORPUS.read_text().splitlines()[:DOCUMENTS]:
            d = json.loads(line)
            out.write(json.dumps({**d, "text": d["text"][:CHARS]}) + "\n")
    done = subprocess.run([KGFLOW, "load", "documents", str(docs), "--collection", COLLECTION, "--home", str(home),
                           "--no-progress"], capture_output=True, text=True, timeout=1800, check=False,
                          env={**os.environ, **SLOW})  # fmt: skip
    assert done.returncode == 0, done.stderr
    return home


async def cited_ids_exist(home: Path, res: DriftResponse) -> list[str]:
    """Every cited chunk id of the key facts, checked against the collection's stored chunks."""
    ids = [c.chunk_id if isinstance(c, Citation) else c for f in res.key_facts for c in f.citations]
    store = SqliteDocumentStore(home / "docs.db")
    try:
        found = {c.id for c in await store.chunks(Tenant("default", COLLECTION), ids)}
    finally:
        await store.close()
    assert set(ids) == found, f"cited chunks that are not in the collection: {set(ids) - found}"
    return ids


def assert_answered(res: DriftResponse) -> None:
    assert res.final_answer and res.response == res.final_answer
    assert not res.response.startswith((NO_MODEL_PREFIX, NO_ANSWER_PREFIX)) and res.key_facts
    assert res.stats and 1 <= res.stats.llm_calls <= SMALL["max-llm-calls"] and res.model


def test_cli_drift_answers_with_key_facts_citing_collection_chunks_and_shows_progress(
    msft_home: Path, gguf_path: str
) -> None:
    params = [x for k, v in SMALL.items() for x in ("--param", f"{k}={v}")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGFLOW_LLM")} | ENV
    argv = [KGFLOW, "query", "drift", QUESTION, "--collection", COLLECTION, "--home", str(msft_home), "--json", *params]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    res = DriftResponse.model_validate({**{k: v for k, v in out.items() if k not in ("question", "answer")},
                                        "response": out["answer"]})  # fmt: skip
    assert_answered(res)
    asyncio.run(cited_ids_exist(msft_home, res))
    assert {"final_answer", "key_facts", "residual_uncertainty", "no_data_found", "documents", "chunks"} <= set(out)
    progress = [ln for ln in done.stderr.splitlines() if ln.startswith("[") and "%]" in ln]
    assert progress[0].startswith("[  0%] initializing") and progress[-1].startswith("[100%] completed")
    assert any("executing_followup" in ln for ln in progress)


@pytest.fixture
async def gateway(
    msft_home: Path, gguf_path: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[System, GatewayProcessor]]:
    for k, v in ENV.items():  # the home's flow (started by the CLI) leaves `llm` unset: text-completion reads these
        monkeypatch.setenv(k, v)
    async with embedded(StoreSettings(home=msft_home), RuntimeSettings(request_timeout_s=600)) as system:
        gw = GatewayProcessor(system.bus, system.runtime, GatewaySettings())
        await gw.start(port=0)
        try:
            yield system, gw
        finally:
            await gw.stop()


async def test_gateway_websocket_streams_progress_then_the_answer(
    msft_home: Path, gateway: tuple[System, GatewayProcessor]
) -> None:
    _, gw = gateway
    req = DriftRequest(user="default", collection=COLLECTION, query=QUESTION,
                       **{k.replace("-", "_"): v for k, v in SMALL.items()})  # fmt: skip
    async with GatewayClient(f"http://127.0.0.1:{gw.port}", timeout_s=600) as client:
        frames = [r async for r in client.stream_call(DRIFT, "default", req)]
    phases = [r.progress.phase for r in frames[:-1] if r.progress]
    assert phases[0] == "initializing" and phases[-1] == "completed" and len(phases) == len(frames) - 1
    assert_answered(frames[-1])
    await cited_ids_exist(msft_home, frames[-1])


async def test_closing_the_websocket_cancels_the_search_at_the_service(
    gateway: tuple[System, GatewayProcessor],
) -> None:
    system, gw = gateway
    drift, llm = system.processor("drift"), system.processor("text-completion")
    request: dict[str, Any] = {"collection": COLLECTION, "query": QUESTION, **SMALL}
    async with aiohttp.ClientSession() as session, session.ws_connect(f"ws://127.0.0.1:{gw.port}/api/v1/socket") as ws:
        await ws.send_json({"type": "auth", "token": ""})
        assert (await ws.receive_json())["type"] == "auth-ok"
        await ws.send_json({"id": "d1", "service": "drift", "flow": "default", "request": request})
        while True:  # until the model is at work on the request (HyDE, primer)
            frame = await ws.receive_json(timeout=300)
            if frame["response"]["progress"]["phase"] in ("expanding_query", "retrieving_communities"):
                break
        assert drift._running
    for _ in range(600):  # the socket is closed: the search and its model call stop
        if not drift._running and not llm._running:
            break
        await asyncio.sleep(0.1)
    assert not drift._running and not llm._running
