"""Indexing in a worker process (processors/base/offload.py): the same chunks, concepts and
mentions as in-process, the work really done in another process, and a worker that dies fails
its request clearly with nothing stored (real spaCy, real model, real worker processes)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from processors.base.bus import MemoryBus
from processors.base.client import RemoteError, RequestResponseClient
from processors.base.offload import Offload, WorkerDied, lower_thread_priority
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.ingest.documents import pipeline, service
from processors.ingest.documents.chunker import ChunkingParams
from processors.ingest.extractor import service as extractor
from processors.stores.settings import StoreSettings
from schemas import documents as msg
from schemas import services as sv
from schemas.documents import Document, IndexedDocument
from schemas.extraction import ExtractRequest
from tests.documents.test_indexing import FakeSources

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
U, C = "alice", "notes"
TEXT = (
    "Marie Curie was a physicist and chemist. She was born in Warsaw and worked in Paris with Pierre Curie. "
    "The Sorbonne in Paris appointed her professor. Radium and polonium were discovered by the Curies. "
) * 40  # several chunks


class Recording(FakeSources):
    """FakeSources that keep what was stored, and extract with the real spaCy extractor (run by
    `offload`: in a thread, or in a worker)."""

    def __init__(self, offload: Offload = pipeline.IN_THREAD) -> None:
        super().__init__()
        self.offload = offload
        self.documents: list[IndexedDocument] = []

    async def extract(self, texts: list[str]) -> list[list[Any]]:
        return await self.offload.run("extracting", extractor.extract_texts, texts)

    async def store(self, documents: list[IndexedDocument]) -> list[str]:
        self.documents += documents
        return await super().store(documents)


class DyingOffload(Offload):
    """A worker that dies (exits) when it is given `fatal` work."""

    def __init__(self, fatal: str) -> None:
        super().__init__(1)
        self.fatal = fatal

    async def run(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if what.startswith(self.fatal):
            return await super().run(what, os._exit, 3)
        return await super().run(what, fn, *args, **kwargs)


async def test_a_worker_indexes_as_the_process_itself_does() -> None:
    docs = [Document(id="curie", title="Marie Curie", text=TEXT), Document(id="short", title="", text="Paris.")]
    offload = Offload(1)
    here, there = Recording(), Recording(offload)
    try:
        await pipeline.load_batch(here, docs, None, ChunkingParams())
        report = await pipeline.load_batch(there, docs, None, ChunkingParams(), offload=offload)
        workers = offload.pids()
    finally:
        offload.shutdown()
    assert report.loaded == 2 and report.chunks > 2 and not report.failed
    assert [d.model_dump() for d in there.documents] == [d.model_dump() for d in here.documents]
    assert workers and os.getpid() not in workers


async def test_a_killed_worker_fails_its_work_clearly_and_the_next_work_gets_a_new_one() -> None:
    offload = Offload(1)
    try:
        assert await offload.run("a warm-up", os.getpid) != os.getpid()  # ran elsewhere
        busy = asyncio.create_task(offload.run("sleeping", time.sleep, 60))
        await asyncio.sleep(0.5)  # submitted: the worker sleeps
        [dead] = offload.pids()
        os.kill(dead, signal.SIGKILL)
        with pytest.raises(WorkerDied, match="died while sleeping: nothing was stored"):
            await asyncio.wait_for(busy, 30)
        assert await offload.run("again", os.getpid) not in (dead, os.getpid())
    finally:
        offload.shutdown()


def test_a_script_without_a_main_guard_is_not_run_again_by_the_worker(tmp_path: Path) -> None:
    script, runs = tmp_path / "unguarded.py", tmp_path / "runs"
    script.write_text(
        "import asyncio, os, sys\n"
        "from processors.base.offload import Offload\n"
        "open(sys.argv[1], 'a').write(f'{os.getpid()}\\n')\n"
        "offload = Offload(1)\n"
        "print(asyncio.run(offload.run('a probe', os.getpid)) != os.getpid())\n"
        "offload.shutdown()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, str(script), str(runs)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert done.stdout.strip() == "True", done.stderr[-2000:]
    assert len(runs.read_text().split()) == 1  # spawned, the worker did not import the script


@pytest.mark.parametrize("fatal", ["chunking", "indexing"])
async def test_a_worker_dying_mid_document_stores_nothing(fatal: str) -> None:
    sources = Recording()
    offload = DyingOffload(fatal)
    try:
        with pytest.raises(WorkerDied, match=f"died while {fatal} documents"):
            await pipeline.load_batch(sources, [Document(id="d", title="t", text=TEXT)], None, ChunkingParams(),
                                      offload=offload)  # fmt: skip
    finally:
        offload.shutdown()
    assert sources.stored == [] and sources.documents == []


def test_batch_threads_run_at_a_lower_priority() -> None:
    seen: list[int] = []

    def probe() -> None:
        lower_thread_priority()
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    assert seen[0] > os.getpriority(os.PRIO_PROCESS, 0)  # this thread's own priority is untouched


@pytest.fixture
async def system(tmp_path: Path) -> AsyncIterator[System]:
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings(indexing_processes=1)) as s:
        yield s


async def load(system: System, docs: list[Document], coll: str = C) -> msg.LoadResponse:
    client = RequestResponseClient.for_service(system.bus, sv.DOCUMENT_LOAD, "default", 300)
    steps = [r async for r in client.stream(msg.LoadDocuments(user=U, collection=coll, documents=docs))]
    return steps[-1]


async def stored(system: System, coll: str = C) -> dict[str, str]:
    client = RequestResponseClient.for_service(system.bus, sv.DOCUMENTS, "default", 60)
    return (await client.request(msg.DocumentStatus(user=U, collection=coll, document_ids=["curie"]))).hashes


async def test_the_embedded_system_indexes_in_a_worker(system: System, monkeypatch: pytest.MonkeyPatch) -> None:
    def not_here(*_: object) -> None:
        raise AssertionError("indexing ran in the event loop's process")

    # the worker imports these modules afresh: patched here, they fail only if the work runs here
    monkeypatch.setattr(extractor._Pipeline, "run", not_here)
    monkeypatch.setattr(pipeline, "chunk_document", not_here)
    monkeypatch.setattr(pipeline, "index_document", not_here)
    done = await load(system, [Document(id="curie", title="Marie Curie", text=TEXT)])
    assert done.loaded == 1 and not done.failed and done.chunks > 2 and done.mentions > 10
    assert "curie" in await stored(system)


async def test_a_worker_dying_mid_load_is_a_clear_error_and_nothing_is_stored(
    system: System, monkeypatch: pytest.MonkeyPatch
) -> None:
    dying = DyingOffload("indexing")
    monkeypatch.setattr(service, "shared_offload", lambda *_: dying)
    try:
        with pytest.raises(RemoteError) as failed:
            await load(system, [Document(id="curie", title="Marie Curie", text=TEXT)])
    finally:
        dying.shutdown()
    assert failed.value.type == "worker-died" and "died while indexing documents" in failed.value.message
    assert await stored(system) == {}
    monkeypatch.undo()
    assert (await load(system, [Document(id="curie", title="Marie Curie", text=TEXT)])).loaded == 1


async def test_a_questions_text_is_parsed_here_not_queued_behind_indexing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_worker(*_: object) -> Offload:
        raise AssertionError("a question's text went to the indexing worker")

    monkeypatch.setattr(extractor, "shared_offload", no_worker)
    proc = extractor.ExtractorProcessor(MemoryBus(), RuntimeSettings())
    found = (await proc.extract(ExtractRequest(texts=["Where was Marie Curie born?"]), None)).mentions  # type: ignore[arg-type]
    assert "marie curie" in {m.key for m in found[0]}
    with pytest.raises(AssertionError, match="went to the indexing worker"):  # chunks do go there
        await proc.extract(ExtractRequest(texts=[TEXT[:3000]]), None)  # type: ignore[arg-type]


async def test_workers_outlive_the_thread_whose_work_started_them() -> None:
    """PR_SET_PDEATHSIG kills a worker when the thread that spawned it ends; a sync API's loop
    thread, closed, took the workers with it and the next load failed `worker-died`."""
    offload = Offload(1)
    try:
        spawned = threading.Thread(target=lambda: asyncio.run(offload.run("warming", os.getpid)))
        spawned.start()
        spawned.join()
        [first] = offload.pids()
        assert await offload.run("after the thread ended", os.getpid) == first
    finally:
        offload.shutdown()


async def test_a_worker_that_died_idle_is_replaced_before_new_work() -> None:
    offload = Offload(1)
    try:
        idle = await offload.run("warming", os.getpid)
        os.kill(idle, signal.SIGKILL)
        assert _reaped(idle, within_s=10.0)  # the pool has seen it die
        assert await offload.run("after it died", os.getpid) not in (idle, os.getpid())
    finally:
        offload.shutdown()


def _reaped(pid: int, within_s: float) -> bool:
    """Whether this process is gone (reaped: not even a zombie) within `within_s`."""
    deadline = time.monotonic() + within_s
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not Path(f"/proc/{pid}").exists()
