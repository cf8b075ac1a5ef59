"""Reaching kgflow from a command: the API client its options name, and the checks made first."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from processors.commands.options import runtime_settings, store_settings

if TYPE_CHECKING:
    from processors.commands.api import Kgflow


def require_data(a: argparse.Namespace) -> None:
    """Refuse to query an embedded home that holds nothing (instead of creating an empty one)."""
    if runtime_settings(a).bus == "pulsar":
        return
    stores = store_settings(a)
    if stores.triples_backend == "sqlite" and not (stores.home / "graph.db").exists():
        raise ValueError(
            f"no kgflow data in {stores.home.resolve()} (set --home or KGFLOW_HOME, or load first: "
            "kgflow load triples FILE --collection C, or kgflow load documents PATH --collection C)"
        )


def client(a: argparse.Namespace, timeout_s: float | None = None) -> Kgflow:
    """The API client the command line names: a gateway (`--url`), Pulsar (`--pulsar`), or the
    processors in this process on the embedded stores (`--home`, default)."""
    from processors.commands.api import Kgflow
    from processors.commands.transports import BusTransport

    user, flow = getattr(a, "user", None), getattr(a, "flow", "default")
    timeout = timeout_s or runtime_settings(a).request_timeout_s
    if getattr(a, "url", None):  # no --user: the token's workspace (Kgflow.open learns it)
        token = getattr(a, "token", None) or os.environ.get("KGFLOW_GATEWAY_TOKEN")
        return Kgflow.connect(a.url, token, user=user, flow=flow)
    return Kgflow(BusTransport(store_settings(a), runtime_settings(a)), user or "default", flow, timeout)
