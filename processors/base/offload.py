"""CPU-bound work off the event loop's interpreter: indexing (tokenizing and chunking documents,
spaCy, building what is stored) runs in worker processes, so the questions other clients ask
of the same process never wait for the GIL behind it.

A thread does not suffice: spaCy, the tokenizer's `encode` and the indexing code hold the GIL,
and the event loop waited for it (other clients' graph-rag p95 rose 4.6x while two
50,000-character documents were indexed; bench/README.md). One pool per process, shared by
the processors that index (`extractor`, `document-load`), spawned on first use with
`RuntimeSettings.indexing_processes` workers (0: a thread of this process, as before). Each
worker keeps the BLAS limit of its parent, runs at a lower CPU priority (indexing is batch work:
a question comes first) and dies with its parent. A worker that dies takes only the work it
ran: that request fails with `WorkerDied`, and the next one gets a fresh pool. Workers are
spawned from one thread of the pool's own, so a caller's thread that ends (a sync API's loop)
does not take them with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import types
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import wait
from typing import ParamSpec, TypeVar

from processors.base.errors import ServiceError

P = ParamSpec("P")
T = TypeVar("T")
_batch_nice = 10  # added to the niceness of batch work: indexing workers, the bulk embedding lane


def set_batch_niceness(nice: int) -> None:
    """How much lower the priority of batch work started from now on is (RuntimeSettings.indexing_nice)."""
    global _batch_nice
    _batch_nice = nice


class WorkerDied(ServiceError):
    """An indexing worker process died while it ran this request's work (killed, out of memory,
    a crash in native code); nothing of the request was stored."""

    def __init__(self, what: str) -> None:
        super().__init__("worker-died", f"the indexing worker process died while {what}: nothing was stored; "
                         "load the documents again")  # fmt: skip


def lower_thread_priority() -> None:
    """Run the calling thread at a lower CPU priority (Linux: niceness is per thread; elsewhere
    nothing), for batch work that shares a process with questions (the embedding model's bulk lane)."""
    if sys.platform == "linux":
        tid = threading.get_native_id()
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + _batch_nice)


def _worker_start(blas_threads: int, nice: int) -> None:
    """In each worker: die with the parent (Linux), the parent's BLAS limit, a lower priority."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    from processors.base.runtime import limit_blas_threads

    limit_blas_threads(blas_threads)
    os.nice(nice)


@contextlib.contextmanager
def _no_main() -> Iterator[None]:
    """Workers started meanwhile do not import this process's `__main__`: spawned, they would run
    again a user's script that has no `if __name__ == "__main__":` guard (what they run lives in
    `processors`, never in `__main__`)."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _has_dead_worker(pool: ProcessPoolExecutor) -> bool:
    """Whether the pool is broken or one of its workers has exited (it takes no more work).

    A worker's sentinel, not `is_alive`: the pool's own thread may reap the worker meanwhile, and
    `is_alive` then answers True (its `waitpid` gets ECHILD); a sentinel is readable once the
    process has ended, reaped or not."""
    workers = list((pool._processes or {}).values())  # noqa: SLF001 - the executor exposes no liveness check
    try:
        sentinels = [w.sentinel for w in workers]
    except ValueError:  # a closed process: it has ended
        return True
    return bool(wait(sentinels, timeout=0)) or bool(pool._broken)  # noqa: SLF001


class Offload:
    """Runs functions in the worker processes (or a thread when `processes` is 0)."""

    def __init__(self, processes: int, blas_threads: int = 1) -> None:
        self.processes, self.blas_threads = processes, blas_threads
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        # Workers are spawned in the thread that submits, and PR_SET_PDEATHSIG kills a worker when
        # that *thread* ends: a sync API's loop thread, closed, took the pool's workers with it and the
        # next work failed `worker-died`. Submitting from one thread of this Offload's own keeps them.
        self._submitter = ThreadPoolExecutor(1, thread_name_prefix="kgflow-offload")

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is not None and _has_dead_worker(self._pool):  # killed, out of memory
                self._pool.shutdown(wait=False)
                self._pool = None
            if self._pool is None:
                # spawn, not fork: the parent runs threads (ONNX, SQLite, the bus) a fork would copy mid-state
                context = multiprocessing.get_context("spawn")
                self._pool = ProcessPoolExecutor(self.processes, mp_context=context, initializer=_worker_start,
                                                 initargs=(self.blas_threads, _batch_nice))  # fmt: skip
            return self._pool

    async def run(self, what: str, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args)` in a worker (`fn` and its arguments are pickled: a module-level function);
        `what` names the work in the error a dead worker gives."""
        if self.processes == 0:
            return await asyncio.to_thread(fn, *args, **kwargs)
        submitted = await asyncio.wrap_future(self._submitter.submit(self._submit, fn, *args, **kwargs))
        if submitted is None:
            raise WorkerDied(what)
        pool, done = submitted
        try:
            return await asyncio.wrap_future(done)
        except BrokenProcessPool:
            self._discard(pool)
            raise WorkerDied(what) from None

    def _submit(
        self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> tuple[ProcessPoolExecutor, Future[T]] | None:
        """In the submitter thread: `fn` given to the pool, and that pool. A pool that refuses it
        (broken or shut down: a worker died meanwhile) has run none of it: a fresh one is tried once."""
        for _ in range(2):
            pool = self._executor()
            try:
                with _no_main():  # a submit may start a worker
                    return pool, pool.submit(fn, *args, **kwargs)
            except (BrokenProcessPool, RuntimeError):
                self._discard(pool)
        return None

    def pids(self) -> list[int]:
        """The running workers' process ids (none before the first use)."""
        pool = self._pool
        return sorted(pool._processes) if pool is not None and pool._processes else []  # noqa: SLF001

    def _discard(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.shutdown(wait=False)

    def shutdown(self, wait: bool = True) -> None:
        """Stop the workers once the work given them is done (a later `run` spawns new ones)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=wait)


_shared: Offload | None = None
_shared_lock = threading.Lock()


def shared_offload(processes: int, blas_threads: int = 1) -> Offload:
    """The process's pool for these settings (one per process: its processors share the workers)."""
    global _shared
    with _shared_lock:
        if _shared is None or (_shared.processes, _shared.blas_threads) != (processes, blas_threads):
            if _shared is not None:  # its work still ends; not waited for: this may run on the event loop
                _shared.shutdown(wait=False)
            _shared = Offload(processes, blas_threads)
        return _shared
