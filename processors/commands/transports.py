"""How the Python API (api.py) reaches kgflow: a bus (the processors started in this process on the
embedded default, or running processors over Pulsar) or a gateway URL. Both speak kgflow's
request/response models, so everything above them — the API and the CLI — is the same code."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from processors.base.bus import Bus
from processors.base.client import RemoteError, RequestResponseClient, RequestTimeout
from processors.base.settings import RuntimeSettings
from processors.ingest.triples.readers import Format, read_triples
from processors.stores.settings import StoreSettings
from schemas.flows import FlowRequest, FlowResponse, GraphChanged
from schemas.services import Service
from schemas.terms import Triple
from schemas.topics import GRAPH_CHANGED

# (phase "store" | "embed", items just done, the phase's total when known)
TriplesProgress = Callable[[str, int, int | None], None]
IMPORT_FRAME = 500  # triples per import-socket frame
FLOW_CHECK_TIMEOUT_S = 10.0


class TriplesStored(BaseModel):
    """What a triples load did (`entities`, `relations` and `embedded` are None through a gateway,
    which stores and embeds without counting them back)."""

    triples: int  # new triples stored (through a gateway: triples sent and acknowledged)
    entities: int | None = None
    relations: int | None = None
    embedded: int | None = None
    repaired: str | None = None


class Transport(Protocol):
    """What the API needs from a connection to kgflow."""

    def stream(self, service: Service, flow: str, request: BaseModel, timeout_s: float) -> AsyncIterator[Any]:
        """Every response to `request` (progress, then the answer); errors raise RemoteError."""
        ...

    async def flow_request(self, request: FlowRequest) -> FlowResponse:
        """A flow-registry operation; an error answer raises ValueError."""
        ...

    async def load_triples(
        self, path: Path, fmt: str, user: str, collection: str, flow: str, progress: TriplesProgress
    ) -> TriplesStored:
        """Store a file's triples (read in full first: a malformed line stores nothing)."""
        ...

    async def close(self) -> None:
        """Release the connection (and stop what was started)."""
        ...


def checked_triples(path: Path, fmt: Format) -> tuple[Iterable[Triple], int]:
    """The file's triples and their count, read once in full before anything is stored, so a
    malformed line stops the load with the store untouched (the count sizes the progress bar).
    N-Triples and Turtle are parsed whole anyway (rdflib); TSV and JSONL are read again to load."""
    if fmt in ("nt", "ttl"):
        found = list(read_triples(path, fmt))
        return found, len(found)
    return read_triples(path, fmt), sum(1 for _ in read_triples(path, fmt))


def _flow_answer(res: FlowResponse) -> FlowResponse:
    if res.error is not None:
        raise ValueError(res.error.message)
    return res


class BusTransport:
    """Services over a bus. Embedded (no `pulsar_url` in the runtime settings): the processors are
    started in this process on first use; flow operations before that go to the registry file,
    so `kgflow flow list` starts nothing."""

    def __init__(self, store: StoreSettings, runtime: RuntimeSettings) -> None:
        self.store, self.runtime = store, runtime
        self._stack = contextlib.AsyncExitStack()
        self._bus: Bus | None = None
        self._system: Any = None
        self._clients: dict[tuple[str, str], RequestResponseClient[Any]] = {}
        self._checked: set[str] = set()
        self._lock = asyncio.Lock()

    @property
    def embedded(self) -> bool:
        """Whether the processors run in this process."""
        return self.runtime.bus != "pulsar"

    async def bus(self) -> Bus:
        """The bus, started on first use (embedded: every processor, serving flow `default`)."""
        async with self._lock:
            if self._bus is None:
                if self.embedded:
                    from processors.base.runtime import embedded

                    self._system = await self._stack.enter_async_context(embedded(self.store, self.runtime))
                    self._bus = self._system.bus
                else:
                    from processors.base.runtime import make_bus

                    self._bus = make_bus(self.runtime)
                    self._stack.push_async_callback(self._bus.close)
            return self._bus

    async def _client(self, service: Service, flow: str, timeout_s: float) -> RequestResponseClient[Any]:
        bus = await self.bus()
        if flow not in self._checked:
            await require_flow(bus, flow)
            self._checked.add(flow)
        key = (service.name, flow)
        if key not in self._clients:
            self._clients[key] = RequestResponseClient.for_service(bus, service, flow, timeout_s)
        return self._clients[key]

    async def stream(self, service: Service, flow: str, request: BaseModel, timeout_s: float) -> AsyncIterator[Any]:
        client = await self._client(service, flow, timeout_s)
        async for res in client.stream(request, timeout_s):
            yield res

    async def flow_request(self, request: FlowRequest) -> FlowResponse:
        if self.embedded and self._bus is None:
            from processors.base.flow_registry import FlowRegistry

            return _flow_answer(FlowRegistry(self.store.home / "flows.json").handle(request)[0])
        from processors.base.config_client import config_client

        client = config_client(await self.bus())
        try:
            return _flow_answer(await client.request(request))
        except RemoteError as e:
            raise ValueError(e.message) from None
        finally:
            await client.stop()

    async def load_triples(
        self, path: Path, fmt: str, user: str, collection: str, flow: str, progress: TriplesProgress
    ) -> TriplesStored:
        from processors.ingest.triples.loader import load_triples
        from processors.models.embeddings.model import OnnxMiniLM
        from processors.stores.factory import open_stores

        triples, total = await asyncio.to_thread(checked_triples, path, fmt)  # type: ignore[arg-type]
        progress("store", 0, total)
        running = self._system is not None  # embedded and started: its stores (and in-memory index)
        stores = self._system.stores if running else open_stores(self.store)
        try:
            r = await load_triples(stores, OnnxMiniLM.shared(), user, collection, triples, progress, source=str(path))
        except Exception as e:
            raise RuntimeError(
                f"{e}\n  {user}/{collection} is marked incomplete (queries say so); fix the problem and load again"
            ) from None
        finally:
            if not running:
                await stores.close()
        if running or not self.embedded:  # tell running label caches the collection changed
            prod = await (await self.bus()).producer(GRAPH_CHANGED)
            await prod.send(GraphChanged(user=user, collection=collection).model_dump_json().encode(), {})
        return TriplesStored(
            triples=r.triples, entities=r.entities, relations=r.relations, embedded=r.embedded, repaired=r.repaired
        )

    async def close(self) -> None:
        for client in self._clients.values():
            await client.stop()
        self._clients.clear()
        await self._stack.aclose()
        self._bus = self._system = None


class GatewayTransport:
    """Services through a kgflow gateway (`kgflow up`): one websocket, kgflow's models on it."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 3600.0) -> None:
        from processors.gateway.client import GatewayClient

        self.url, self.token = url, token
        self.gateway = GatewayClient(url, token, timeout_s)
        self._connected = False
        self._lock = asyncio.Lock()

    async def _gw(self) -> Any:
        async with self._lock:
            if not self._connected:
                await self.gateway.connect()
                self._connected = True
        return self.gateway

    async def stream(self, service: Service, flow: str, request: BaseModel, timeout_s: float) -> AsyncIterator[Any]:
        gw = await self._gw()
        gw.timeout_s = max(gw.timeout_s, timeout_s)
        async for res in gw.stream_call(service, flow, request):
            yield res

    async def flow_request(self, request: FlowRequest) -> FlowResponse:
        from processors.gateway import translate as tr

        wire: dict[str, Any] = {"operation": request.operation}
        for name in ("blueprint_name", "flow_id", "description", "parameters"):
            if getattr(request, name, None):
                wire[name.replace("_", "-")] = getattr(request, name)
        if request.blueprint is not None:
            wire["blueprint-name"] = request.blueprint.name
            wire["blueprint-definition"] = tr.blueprint_to_wire(request.blueprint)
        try:
            out = await (await self._gw()).request("flow", wire)
        except RemoteError as e:
            raise ValueError(e.message) from None
        flow = json.loads(out["flow"]) if isinstance(out.get("flow"), str) else None
        return FlowResponse(
            flow_ids=out.get("flow-ids"),
            blueprint_names=out.get("blueprint-names"),
            flow={"id": request.flow_id, "blueprint": flow.get("blueprint-name", ""),  # type: ignore[arg-type]
                  "description": flow.get("description", ""), "parameters": flow.get("parameters") or {}}
            if flow and request.flow_id else None,
        )  # fmt: skip

    async def load_triples(
        self, path: Path, fmt: str, user: str, collection: str, flow: str, progress: TriplesProgress
    ) -> TriplesStored:
        """Through the gateway's triples import socket, each frame acknowledged once stored."""
        from processors.gateway import translate as tr

        triples = await asyncio.to_thread(lambda: list(read_triples(path, fmt)))  # type: ignore[arg-type]
        total = len(triples)
        frames = [
            {"metadata": {"id": n, "collection": collection}, "triples": [tr.triple_to_wire(t) for t in batch]}
            for n, batch in enumerate(_batches(triples, IMPORT_FRAME))
        ]
        progress("store", 0, total)
        stored = await self._import(frames, user, flow, total, progress)
        return TriplesStored(triples=stored)

    async def _import(
        self, frames: list[dict[str, Any]], user: str, flow: str, total: int, progress: TriplesProgress
    ) -> int:
        import aiohttp

        from processors.gateway.client import socket_url

        base = socket_url(self.url).removesuffix("/api/v1/socket")
        url = f"{base}/api/v1/flow/{flow}/import/triples"
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        stored = 0
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(url, params={"workspace": user}, headers=headers, heartbeat=30.0) as ws,
        ):
            for frame in frames:
                await ws.send_str(json.dumps(frame))
            while stored < total:
                msg = await ws.receive(timeout=3600.0)
                if msg.type != aiohttp.WSMsgType.TEXT:
                    raise RuntimeError(f"the gateway closed the import after {stored} of {total} triples")
                reply = json.loads(msg.data)
                if "error" in reply:
                    err = reply["error"]
                    raise RemoteError(str(err.get("type", "error")), f"{err.get('message')} ({stored} stored)")
                done = int(reply.get("ack", {}).get("triples", 0))
                stored += done
                progress("store", done, total)
        return stored

    async def close(self) -> None:
        if self._connected:
            await self.gateway.close()
            self._connected = False


def _batches(items: list[Any], size: int) -> list[list[Any]]:
    it = iter(items)
    return [batch for batch in iter(lambda: list(itertools.islice(it, size)), [])]


async def require_flow(bus: Bus, flow: str) -> None:
    """Raise ValueError unless the flow registry knows `flow` (an unreachable registry is not an
    error here: the request itself will say so)."""
    from processors.base.config_client import config_client

    registry = config_client(bus, FLOW_CHECK_TIMEOUT_S)
    try:
        flows = (await registry.request(FlowRequest(operation="list-flows"))).flow_ids or []
    except RequestTimeout:
        return
    finally:
        await registry.stop()
    if flow not in flows:
        known = ", ".join(sorted(flows)) or "none"
        raise ValueError(f"no flow {flow!r} is running (flows: {known}); start it with kgflow flow start {flow} ...")
