"""A tiny test processor (`echo`) run as its own OS process on Pulsar.

Run: `python tests/integration/workers/echo.py --pulsar URL (--flow ID | --follow-config)`.
It prints `ready` once serving and `flow-started ID` / `flow-stopped ID` lines on stdout,
so a test can wait for facts instead of sleeping.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.base.pulsar_bus import PulsarBus
from processors.base.settings import RuntimeSettings
from processors.commands.cli import exit_process
from schemas.base import Message, Response
from schemas.services import Service

SERVICE = "echo"


class EchoRequest(Message):
    """What the echo service does with a request."""

    text: str
    mode: Literal["echo", "stream", "hang-first", "stream-hang-first", "hang", "slow", "boom"] = "echo"
    count: int = 1
    delay: float = 0.0  # slow: seconds before answering
    marker_dir: str | None = None  # *hang-first: the first instance to take the request writes <pid> here


class EchoResponse(Response):
    """The echoed text, which process answered, and the position in a stream."""

    text: str = ""
    pid: int = 0
    index: int = 0


class EchoProcessor(FlowProcessor):
    """Serves `echo`; announces flow starts and stops on stdout."""

    name = SERVICE

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(Service(SERVICE, EchoRequest, EchoResponse), self.handle)]

    async def start_flow(self, flow_id: str, parameters: dict[str, Any]) -> FlowContext:
        ctx = await super().start_flow(flow_id, parameters)
        print(f"flow-started {flow_id}", flush=True)
        return ctx

    async def stop_flow(self, flow_id: str) -> None:
        known = flow_id in self._flows
        await super().stop_flow(flow_id)
        if known:
            print(f"flow-stopped {flow_id}", flush=True)

    def handle(self, req: EchoRequest, flow: FlowContext) -> Any:
        """Dispatch on the request mode (a stream is an async generator)."""
        if req.mode in ("stream", "stream-hang-first"):
            return self._stream(req)
        return self._one(req)

    async def _stream(self, req: EchoRequest) -> AsyncIterator[EchoResponse]:
        """`count` pieces; stream-hang-first: the first instance stops after half of them and hangs."""
        first = req.mode == "stream-hang-first" and bool(req.marker_dir)
        first = first and await asyncio.to_thread(_take, Path(req.marker_dir or "."))
        for i in range(req.count):
            if first and i == req.count // 2:
                print(f"streamed {i}", flush=True)
                await asyncio.sleep(3600)  # killed mid-stream
            yield EchoResponse(text=f"{req.text}-{i}", pid=os.getpid(), index=i, end_of_stream=i == req.count - 1)

    async def _one(self, req: EchoRequest) -> EchoResponse:
        if req.mode == "boom":
            raise RuntimeError("unexpected failure in the handler")
        if req.mode == "hang-first" and req.marker_dir:
            if await asyncio.to_thread(_take, Path(req.marker_dir)):
                await asyncio.sleep(3600)  # killed while in flight
        if req.mode == "hang":
            print("hanging", flush=True)
            await asyncio.sleep(3600)  # abandoned by the handler timeout
        if req.mode == "slow":
            print("slow-started", flush=True)
            await asyncio.sleep(req.delay)
        return EchoResponse(text=req.text, pid=os.getpid())


def _take(marker: Path) -> bool:
    """Claim the request unless another instance already has (writes <pid> into `marker`)."""
    if any(marker.iterdir()):
        return False
    (marker / str(os.getpid())).write_text("taken")
    return True


async def main(argv: list[str] | None = None) -> None:
    """Serve one flow directly (--flow) or every flow the config service names (--follow-config)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--pulsar", required=True)
    ap.add_argument("--flow")
    ap.add_argument("--follow-config", action="store_true")
    ap.add_argument("--max-redeliveries", type=int, default=3)
    ap.add_argument("--nack-delay-ms", type=int, default=200)
    ap.add_argument("--handler-timeout", type=float, default=300.0)
    a = ap.parse_args(argv)
    bus = PulsarBus(a.pulsar, nack_delay_ms=a.nack_delay_ms)
    rt = RuntimeSettings(concurrency=8, max_redeliveries=a.max_redeliveries, handler_timeout_s=a.handler_timeout)
    proc = EchoProcessor(bus, rt)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        if a.follow_config:
            await proc.start()
        else:
            await proc.start_flow(a.flow, {})
        print(f"ready {os.getpid()}", flush=True)
        await stop.wait()
    finally:
        await proc.stop()
        await bus.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
    exit_process(0)  # as `kgflow` exits: the Pulsar client may abort in interpreter teardown
