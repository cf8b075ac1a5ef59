"""The collection every doc-QA section indexes into and asks of, and how it reaches a service."""

from __future__ import annotations

from typing import Any

from processors.base.client import RequestResponseClient
from processors.commands.system import System

USER, COLLECTION = "bench", "docqa"
TIMEOUT_S = 3600.0  # a whole set's index build is one request


def client(system: System, service: Any, flow: str = "default") -> RequestResponseClient[Any]:
    """A client of `service` in `flow`."""
    return RequestResponseClient.for_service(system.bus, service, flow, TIMEOUT_S)
