"""Fuzzed gateway websocket frames: what an attacker sends first (seeded, reproducible)."""

from __future__ import annotations

import json
import random
from typing import Any

QUESTION = "Who is the spouse of ludwig ii of bavaria?"
VALID: list[tuple[str, str | None, dict[str, Any]]] = [
    ("graph-rag", "default", {"query": QUESTION, "collection": "pq2h"}),
    ("graph-rag", "default", {"query": QUESTION, "collection": "pq2h", "streaming": True}),
    ("triples", "default", {"collection": "pq2h", "limit": 5}),
    ("embeddings", "default", {"texts": ["marie curie"]}),
    ("graph-embeddings", "default", {"vector": [0.1] * 384, "limit": 3, "collection": "pq2h"}),
    ("text-completion", "default", {"prompt": "hello"}),
    ("document-rag", "default", {"query": QUESTION, "collection": "pq2h"}),
    ("lazy-rag", "default", {"query": QUESTION, "collection": "pq2h", "no-llm": True}),
    ("documents", "default", {"operation": "search", "text": QUESTION, "collection": "pq2h"}),
    ("flow", None, {"operation": "list-flows"}),
    ("flow", None, {"operation": "get-flow", "flow-id": "default"}),
    ("flow", None, {"operation": "start-flow", "flow-id": "evil", "blueprint-name": "graph-rag"}),
    ("config", None, {"operation": "list"}),
]
ODD_VALUES: list[Any] = [None, -1, 0, 10**30, 1e308, "", "x" * 5000, [], {}, [1, [2, [3]]], True, "\ud800",
                         {"t": "i", "i": ""}, "../../etc/passwd", "'; DROP TABLE triples; --"]  # fmt: skip
# Questions in other scripts, of symbols only, and full-text query syntax (each once answered HTTP 500).
ODD_QUESTIONS = ["谁拍摄了照片？", "写真を撮ったのは誰ですか？", "🔬🧪☢️", "—", "…", "Ⅻ？", "مَنْ الْتَقَطَ الصُّورَة؟",
                 '"', "a OR (", "tenant : x", "\\", "谁" * 8000]  # fmt: skip


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _mutate(rng: random.Random, request: dict[str, Any]) -> dict[str, Any]:
    out = dict(request)
    for _ in range(rng.randint(1, 3)):
        key = rng.choice([*out, "entity-limit", "max-path-length", "limit", "s", "workspace", "texts", "query"])
        out[key] = rng.choice(ODD_VALUES)
    return out


def fuzz_frame(rng: random.Random, rid: str) -> tuple[Any, str | bytes]:
    """One frame and the id a reply will carry (None when the frame has no usable id)."""
    service, flow, request = rng.choice(VALID)
    frame: dict[str, Any] = {"id": rid, "service": service, "request": request}
    if flow is not None:
        frame["flow"] = flow
    kind = rng.choice(["valid", "mutated", "mutated", "deep", "malformed", "not-object", "odd-id", "no-id",
                       "binary", "huge-number", "unknown", "surrogate", "envelope", "question"])  # fmt: skip
    if kind == "question":
        frame["request"] = {**request, "query": rng.choice(ODD_QUESTIONS), "text": rng.choice(ODD_QUESTIONS)}
    elif kind == "mutated":
        frame["request"] = _mutate(rng, request)
    elif kind == "deep":
        return rid, json.dumps(frame)[:-1] + ', "x": ' + _deep(rng.choice([1000, 5000, 50000])) + "}"
    elif kind == "malformed":
        text = json.dumps(frame)
        return None, text[: rng.randint(1, len(text) - 1)]
    elif kind == "not-object":
        return None, json.dumps(rng.choice([[frame], 42, "frame", None]))
    elif kind == "odd-id":
        frame["id"] = rng.choice([None, [], {}, True, ""])
        return None, json.dumps(frame)
    elif kind == "no-id":
        del frame["id"]
        return None, json.dumps(frame)
    elif kind == "binary":
        return None, rng.randbytes(rng.randint(1, 2000))
    elif kind == "huge-number":
        return rid, json.dumps(frame)[:-1] + ', "n": 1' + "0" * 5000 + "}"
    elif kind == "unknown":
        frame["service"] = rng.choice(["agent", "librarian", "", "graph-rag\x00", "a" * 300])
        frame["flow"] = rng.choice(["default", "nope", "../x", 7])
        if frame["service"] == "":
            return rid, json.dumps(frame)
    elif kind == "surrogate":
        return rid, json.dumps(frame).replace(QUESTION, "\\udc80\\ud800 lone surrogates")
    elif kind == "envelope":
        frame[rng.choice(["service", "flow", "request", "workspace"])] = rng.choice(ODD_VALUES)
    return rid, json.dumps(frame)


def fuzz_frames(rng: random.Random, n: int, prefix: str = "") -> list[tuple[Any, str | bytes]]:
    """`n` fuzzed frames with ids `prefix0`, `prefix1`, ..."""
    return [fuzz_frame(rng, f"{prefix}{i}") for i in range(n)]
