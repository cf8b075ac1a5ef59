"""The one place topic names are built."""

from __future__ import annotations

from typing import Literal

TENANT = "kgflow"
CONFIG_PUSH = f"persistent://{TENANT}/config/config-push"
CONFIG_REQUEST = f"persistent://{TENANT}/config/config-request"
CONFIG_RESPONSE = f"persistent://{TENANT}/config/config-response"
GRAPH_CHANGED = f"persistent://{TENANT}/notify/graph-changed"


def topic(service: str, flow_id: str, kind: Literal["request", "response", "cancel"] = "request") -> str:
    """Topic for `service` in flow `flow_id`; responses get their own topic, and so do the
    cancellations of requests whose client went away (every instance of the service reads them)."""
    for part in (service, flow_id):
        if not part or any(c in part for c in "/: "):
            raise ValueError(f"invalid topic part {part!r}")
    if kind == "request":
        return f"persistent://{TENANT}/flow/{service}:{flow_id}"
    return f"persistent://{TENANT}/flow/{kind}:{service}:{flow_id}"


def dead_letter(request_topic: str) -> str:
    """Dead-letter topic of a request topic."""
    return f"{request_topic}-DLQ"
