"""How the Python API (api.py) reaches kgflow: a bus (the processors started in this process on the
embedded default, or running processors over Pulsar) or a gateway URL. Both speak kgflow's
request/response models, so everything above them — the API and the CLI — is the same code."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from pydantic import BaseModel

from processors.base.bus import Bus
from processors.base.client import RemoteError, RequestResponseClient, RequestTimeout
from processors.base.settings import RuntimeSettings
from processors.ingest.triples.readers import Format, read_triples
from processors.stores.settings import StoreSettings
from schemas.base import Response
from schemas.flows import FlowRequest, FlowResponse
from schemas.services import TRIPLES_STORE, Service
from schemas.terms import Triple
from schemas.triples import BeginLoad, EmbedLabels, FinishLoad, StoreTriples

R = TypeVar("R", bound=Response)

if TYPE_CHECKING:  # the loader imports the stores and the models: not at every command's start
    from processors.commands.system import System
    from processors.gateway.client import GatewayClient
    from processors.ingest.triples.loader import Begun
    from processors.stores.protocol import VectorKind

# (phase "store" | "embed", items just done, the phase's total when known)
TriplesProgress = Callable[[str, int, int | None], None]
LOAD_TIMEOUT_S = 600.0  # one step of a triples load: a batch stored, or its labels embedded
BEGIN_TIMEOUT_S = 60.0  # its first step: a flow with no triples-store processor fails here
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

    def stream(
        self, service: Service[BaseModel, R], flow: str, request: BaseModel, timeout_s: float
    ) -> AsyncIterator[R]:
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


@dataclass
class FlowLoadSteps:
    """A triples load's steps (loader.LoadSteps) as requests to the flow's triples-store service;
    `begun` tells whether anything may have been written."""

    client: RequestResponseClient[Any]
    user: str
    collection: str
    begun: bool = False

    async def begin(self, source: str) -> Begun:
        from processors.ingest.triples.loader import Begun

        req = BeginLoad(user=self.user, collection=self.collection, source=source)
        try:
            res = await self.client.request(req, timeout_s=BEGIN_TIMEOUT_S)
        except RequestTimeout:
            raise RuntimeError(
                f"no triples-store processor answered within {BEGIN_TIMEOUT_S:.0f}s: is one serving the flow "
                "(`kgflow up`, or `kgflow run triples-store`)?"
            ) from None
        self.begun = True
        return Begun(res.fresh, res.repairing)

    async def store(self, batch: list[Triple], fresh: bool) -> tuple[int, set[str]]:
        req = StoreTriples(user=self.user, collection=self.collection, triples=batch, in_load=True, fresh=fresh)
        res = await self.client.request(req)
        return res.stored, set(res.changed)

    async def embed(self, kind: VectorKind, iris: list[str], labels: dict[str, str], keep: list[str]) -> int:
        req = EmbedLabels(user=self.user, collection=self.collection, kind=kind, iris=iris, labels=labels, keep=keep)
        return int((await self.client.request(req)).embedded)

    async def finish(self, stored: int, vectors: int, error: str | None = None) -> None:
        await self.client.request(FinishLoad(user=self.user, collection=self.collection, stored=stored,
                                             vectors=vectors, error=error))  # fmt: skip


class BusTransport:
    """Services over a bus. Embedded (no `pulsar_url` in the runtime settings): the processors are
    started in this process on first use; flow operations before that go to the registry file,
    so `kgflow flow list` starts nothing."""

    def __init__(self, store: StoreSettings, runtime: RuntimeSettings) -> None:
        self.store, self.runtime = store, runtime
        self._stack = contextlib.AsyncExitStack()
        self._bus: Bus | None = None
        self._system: System | None = None
        self._clients: dict[tuple[str, str], RequestResponseClient[Response]] = {}
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
                    from processors.commands.system import embedded

                    self._system = await self._stack.enter_async_context(embedded(self.store, self.runtime))
                    self._bus = self._system.bus
                else:
                    from processors.base.runtime import make_bus

                    self._bus = make_bus(self.runtime)
                    self._stack.push_async_callback(self._bus.close)
            return self._bus

    async def _client(self, service: Service[BaseModel, R], flow: str, timeout_s: float) -> RequestResponseClient[R]:
        bus = await self.bus()
        if flow not in self._checked:
            await require_flow(bus, flow)
            self._checked.add(flow)
        key = (service.name, flow)
        if key not in self._clients:
            self._clients[key] = RequestResponseClient.for_service(bus, service, flow, timeout_s)
        return cast(RequestResponseClient[R], self._clients[key])  # made for `service` above

    async def stream(
        self, service: Service[BaseModel, R], flow: str, request: BaseModel, timeout_s: float
    ) -> AsyncIterator[R]:
        client = await self._client(service, flow, timeout_s)
        async for res in client.stream(request, timeout_s):
            yield res

    async def flow_request(self, request: FlowRequest) -> FlowResponse:
        if self.embedded and self._bus is None:
            from processors.base.flow_registry import FlowRegistry
            from processors.commands.catalog import PARAMS

            return _flow_answer(FlowRegistry(self.store.home / "flows.json", PARAMS).handle(request)[0])
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
        """Through the flow's triples-store service, a step at a time (the flow's model embeds the
        labels; the service tells label caches the collection changed)."""
        from processors.ingest.triples.loader import run_load

        triples, total = await asyncio.to_thread(checked_triples, path, fmt)  # type: ignore[arg-type]
        progress("store", 0, total)
        steps = FlowLoadSteps(await self._client(TRIPLES_STORE, flow, LOAD_TIMEOUT_S), user, collection)
        try:
            r = await run_load(steps, triples, progress, source=str(path))
        except (RemoteError, RuntimeError, OSError) as e:
            why = e.message if isinstance(e, RemoteError) else str(e)
            if not steps.begun:  # refused before anything was written (e.g. another embedding model)
                raise RuntimeError(why) from None
            raise RuntimeError(
                f"{why}\n  {user}/{collection} is marked incomplete (queries say so); fix the problem and load again"
            ) from None
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

    async def _gw(self) -> GatewayClient:
        async with self._lock:
            if not self._connected:
                await self.gateway.connect()
                self._connected = True
        return self.gateway

    async def workspace(self) -> str | None:
        """The workspace the token acts in when a request names none (the gateway says so on
        connecting); None when the gateway cannot be reached or refuses the token, which every
        request then reports (an MCP server stays up to say so per tool call)."""
        try:
            return (await self._gw()).workspace
        except (RemoteError, RuntimeError):
            return None

    async def stream(
        self, service: Service[BaseModel, R], flow: str, request: BaseModel, timeout_s: float
    ) -> AsyncIterator[R]:
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
        """Through the gateway's triples import route, each frame acknowledged once the flow stored it."""
        from processors.commands.import_triples import import_over_gateway

        triples, total = await asyncio.to_thread(checked_triples, path, fmt)  # type: ignore[arg-type]
        progress("store", 0, total)
        return TriplesStored(
            triples=await import_over_gateway(self.url, self.token, flow, user, collection, triples, progress)
        )

    async def close(self) -> None:
        if self._connected:
            await self.gateway.close()
            self._connected = False


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
