"""One tenant's bulk embeddings cannot take the service from the others: a request is bounded in
tokens, questions do not queue behind bulk work, and work nobody waits for stops."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from processors.base.client import RemoteError, RequestResponseClient
from processors.commands.system import System, embedded
from processors.models.embeddings.model import OnnxMiniLM, chunks
from processors.stores.settings import StoreSettings
from schemas.embeddings import EmbeddingsRequest, EmbeddingsResponse
from schemas.services import EMBEDDINGS

LONG = "the quick brown fox jumps over the lazy dog near the river bank " * 16  # > 256 tokens


@pytest.fixture
async def system(tmp_path: Path) -> AsyncIterator[System]:
    async with embedded(StoreSettings(home=tmp_path / "home")) as s:
        yield s


def client(system: System, timeout_s: float = 60) -> RequestResponseClient[EmbeddingsResponse]:
    return RequestResponseClient.for_service(system.bus, EMBEDDINGS, "default", timeout_s)


def test_chunks_bound_padded_tokens_and_keep_every_text() -> None:
    lengths = [256, 3, 40, 256, 7, 256, 12, 256, 100]
    groups = chunks(lengths, budget=512)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    assert all(len(g) * max(lengths[i] for i in g) <= 512 for g in groups)


def test_chunks_group_texts_of_similar_length_so_padding_stays_small() -> None:
    rng = random.Random(3)
    labels = [rng.randint(3, 11) for _ in range(300)]  # concept labels: one group held them all (1.5x padded)
    groups = chunks(labels)
    padded = sum(len(g) * max(labels[i] for i in g) for g in groups)
    assert padded < 1.1 * sum(labels), (padded, sum(labels))
    assert len(groups) < 20  # still batches, not one call per text


async def test_a_request_beyond_the_token_budget_is_refused(system: System) -> None:
    c = client(system)
    try:
        with pytest.raises(RemoteError) as err:
            await c.request(EmbeddingsRequest(texts=[LONG] * 1024))  # 262,144 tokens: the request
        assert err.value.type == "bad-request" and "embeddings-max-tokens" in err.value.message
        assert "the first 64 of 1024 texts" in err.value.message  # refused after a slice, not all tokenized
        ok = await c.request(EmbeddingsRequest(texts=[LONG] * 8))
        assert len(ok.vectors) == 8
    finally:
        await c.stop()


async def test_questions_pass_bulk_work_and_abandoned_work_stops(
    system: System, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = OnnxMiniLM.shared()
    bulk_calls: list[int] = []
    started = asyncio.Event()
    loop = asyncio.get_running_loop()
    infer = model._infer  # noqa: SLF001 - counting the bulk lane's inference calls

    def counting(session: Any, ids: list[list[int]]) -> Any:
        if session is model._bulk_session:  # noqa: SLF001
            bulk_calls.append(len(ids))
            loop.call_soon_threadsafe(started.set)
        return infer(session, ids)

    monkeypatch.setattr(model, "_infer", counting)
    patient, impatient = client(system), client(system, timeout_s=4)
    try:
        # 24 maximal requests (32 texts of 256 tokens each): more than the processor takes in
        bulk = [asyncio.create_task(impatient.request(EmbeddingsRequest(texts=[LONG] * 32))) for _ in range(24)]
        await started.wait()
        answer = await patient.request(EmbeddingsRequest(texts=["where was marie curie born?"]))
        assert len(answer.vectors) == 1
        refused = [t for t in bulk if t.done()]  # `busy`: beyond the places for bulk work
        assert 0 < len(refused) < len(bulk)  # ...and the question passed every accepted one
        outcomes = await asyncio.gather(*bulk, return_exceptions=True)
        kinds = {type(e).__name__ + ":" + getattr(e, "type", "") for e in outcomes}
        # One bulk call per core: the first accepted requests may finish within the wait.
        assert kinds <= {"RemoteError:busy", "RemoteError:timeout", "RequestTimeout:", "EmbeddingsResponse:"}, kinds
        done = sum(1 for e in outcomes if not isinstance(e, BaseException))
        assert done < len(bulk) - len(refused)  # ...but the rest were abandoned
        await asyncio.sleep(1.0)  # a chunk already running may finish
        settled = len(bulk_calls)
        await asyncio.sleep(2.0)
        assert len(bulk_calls) == settled  # nobody waits: no more bulk work
        per_request = len(chunks([256] * 32))  # chunks of one request (every text truncated to 256 tokens)
        assert settled < 24 * per_request  # most of the abandoned work never ran
    finally:
        await patient.stop()
        await impatient.stop()


async def test_one_bulk_request_runs_its_chunks_on_every_core_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    model = OnnxMiniLM.shared()
    running, most = 0, 0
    lock = threading.Lock()
    infer = model._infer  # noqa: SLF001 - counting the bulk lane's calls running at once

    def counting(session: Any, ids: list[list[int]]) -> Any:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        try:
            time.sleep(0.05)  # long enough for the other worker to pick up the next chunk
            return infer(session, ids)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(model, "_infer", counting)
    texts = [f"passage {n}: " + LONG[: 40 + 7 * n] for n in range(40)]
    together = await model.embed(texts)
    monkeypatch.setattr(model, "_infer", infer)
    alone = [(await model.embed([t] * 9))[0] for t in texts[:3]]  # 9 texts: the bulk lane, one chunk
    assert len(chunks([len(r) for r in model._ids(texts)])) > 2  # noqa: SLF001 - more chunks than cores
    assert most == (os.cpu_count() or 1)  # before, one request's chunks ran one after another
    assert len(together) == len(texts)
    for a, b in zip(alone, together[:3], strict=True):  # each vector stays in its text's place
        assert sum(x * y for x, y in zip(a, b, strict=True)) > 0.999
