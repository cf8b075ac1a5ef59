"""kgflow's Python API without `await`: `KgflowSync` runs a `Kgflow` on its own event loop in a
thread, one blocking method for each of Kgflow's."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from processors.commands.api import Kgflow
from schemas.base import Response
from schemas.services import Service

R = TypeVar("R", bound=Response)


def _blocking(method: Callable[..., Coroutine[Any, Any, R]]) -> Callable[..., R]:
    """`method` of Kgflow as a blocking call on KgflowSync's loop."""

    @functools.wraps(method)
    def call(self: KgflowSync, *args: Any, **kwargs: Any) -> R:
        return self._run(getattr(self.client, method.__name__)(*args, **kwargs))

    return call


class KgflowSync:
    """Kgflow without `await`: its own event loop runs in a thread; use `with` (or `close()`).

    with KgflowSync.embedded(home=".kgflow") as kg:
        print(kg.graph_rag("Where was Marie Curie born?", collection="demo").response)
    """

    def __init__(self, client: Kgflow) -> None:
        self.client = client
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kgflow-sync", daemon=True)
        self._thread.start()

    @classmethod
    def embedded(cls, home: str | Path | None = None, **kwargs: Any) -> KgflowSync:
        """See `Kgflow.embedded`."""
        return cls(Kgflow.embedded(home, **kwargs))

    @classmethod
    def pulsar(cls, url: str, **kwargs: Any) -> KgflowSync:
        """See `Kgflow.pulsar`."""
        return cls(Kgflow.pulsar(url, **kwargs))

    @classmethod
    def connect(cls, url: str, token: str | None = None, **kwargs: Any) -> KgflowSync:
        """See `Kgflow.connect`."""
        return cls(Kgflow.connect(url, token, **kwargs))

    def _run(self, coro: Coroutine[Any, Any, R]) -> R:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        """Close the client and stop its loop."""
        if self._thread.is_alive():
            self._run(self.client.close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> KgflowSync:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stream(self, service: Service[BaseModel, R] | str, request: BaseModel) -> Iterator[R]:
        """See `Kgflow.stream`."""
        responses = self.client.stream(service, request)
        try:
            while True:
                try:
                    yield self._run(responses.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self._run(responses.aclose())

    request = _blocking(Kgflow.request)
    ask = _blocking(Kgflow.ask)
    graph_rag = _blocking(Kgflow.graph_rag)
    lazy_rag = _blocking(Kgflow.lazy_rag)
    kg_query = _blocking(Kgflow.kg_query)
    drift = _blocking(Kgflow.drift)
    rerank = _blocking(Kgflow.rerank)
    load_documents = _blocking(Kgflow.load_documents)
    load_triples = _blocking(Kgflow.load_triples)
    collections = _blocking(Kgflow.collections)
    delete_collection = _blocking(Kgflow.delete_collection)
    documents = _blocking(Kgflow.documents)
    delete_documents = _blocking(Kgflow.delete_documents)
    communities = _blocking(Kgflow.communities)
    build_communities = _blocking(Kgflow.build_communities)
    flows = _blocking(Kgflow.flows)
    put_blueprint = _blocking(Kgflow.put_blueprint)
    start_flow = _blocking(Kgflow.start_flow)
    stop_flow = _blocking(Kgflow.stop_flow)
