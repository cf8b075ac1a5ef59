"""The one place topic names are built.

Requests travel on persistent topics (a Shared subscription, acknowledged after the response is
sent: a processor that dies mid-request loses nothing). Responses travel on persistent topics too,
read by non-durable readers: a broker drops a non-persistent message the reader cannot take at
once, so a client whose process was busy for a moment lost responses and waited out its timeout
(400 answers of 17 KB to a client that paused 4 s: 25-30 % lost; persisting each costs ~0.25 ms).
Cancellations are non-persistent: they matter only to work running now, and a lost one only lets
that work finish.
"""

from __future__ import annotations

import os
from typing import Literal

# One kgflow deployment per Pulsar tenant (its config topics have fixed names): another deployment
# on the same broker, or a test beside others, sets its own (with namespaces flow, config, notify).
TENANT = os.environ.get("KGFLOW_PULSAR_TENANT") or "kgflow"
CONFIG_PUSH = f"persistent://{TENANT}/config/config-push"
CONFIG_REQUEST = f"persistent://{TENANT}/config/config-request"
CONFIG_RESPONSE = f"persistent://{TENANT}/config/config-response"
GRAPH_CHANGED = f"persistent://{TENANT}/notify/graph-changed"


def topic(service: str, flow_id: str, kind: Literal["request", "response", "cancel"] = "request") -> str:
    """Topic for `service` in flow `flow_id`: requests and responses persistent; the cancellations
    of requests whose client went away (every instance of the service reads them) non-persistent."""
    for part in (service, flow_id):
        if not part or any(c in part for c in "/: "):
            raise ValueError(f"invalid topic part {part!r}")
    if kind == "request":
        return f"persistent://{TENANT}/flow/{service}:{flow_id}"
    scheme = "non-persistent" if kind == "cancel" else "persistent"
    return f"{scheme}://{TENANT}/flow/{kind}:{service}:{flow_id}"


def dead_letter(request_topic: str) -> str:
    """Dead-letter topic of a request topic."""
    return f"{request_topic}-DLQ"
