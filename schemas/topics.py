"""The one place topic names are built.

Requests travel on persistent topics (a Shared subscription, acknowledged after the response is
sent: a processor that dies mid-request loses nothing). Responses travel on non-persistent topics:
a response is for a client that is reading its topic right now, so writing it to disk first would
only delay it (a Pulsar round trip: ~13 ms with persistent responses, ~4 ms without, on localhost).
A response nobody reads is dropped; a client that misses one times out and gets a typed error.
Cancellations are non-persistent for the same reason: they matter only to work running now.
"""

from __future__ import annotations

from typing import Literal

TENANT = "kgflow"
CONFIG_PUSH = f"persistent://{TENANT}/config/config-push"
CONFIG_REQUEST = f"persistent://{TENANT}/config/config-request"
CONFIG_RESPONSE = f"non-persistent://{TENANT}/config/config-response"
GRAPH_CHANGED = f"persistent://{TENANT}/notify/graph-changed"


def topic(service: str, flow_id: str, kind: Literal["request", "response", "cancel"] = "request") -> str:
    """Topic for `service` in flow `flow_id`: requests persistent; responses, and the cancellations
    of requests whose client went away (every instance of the service reads them), non-persistent."""
    for part in (service, flow_id):
        if not part or any(c in part for c in "/: "):
            raise ValueError(f"invalid topic part {part!r}")
    if kind == "request":
        return f"persistent://{TENANT}/flow/{service}:{flow_id}"
    return f"non-persistent://{TENANT}/flow/{kind}:{service}:{flow_id}"


def dead_letter(request_topic: str) -> str:
    """Dead-letter topic of a request topic."""
    return f"{request_topic}-DLQ"
