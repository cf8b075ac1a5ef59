"""Probes of a running `kgflow up` over its websocket gateway (`make bench-reliability`):
other clients' graph-rag latency while hostile text loads arrive, and the process's RSS over rounds
of mixed load."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness.stats import percentile

ANSWER_TIMEOUT_S = 600.0  # a busy shared machine: a hostile load may take minutes


async def ask(ws: aiohttp.ClientWebSocketResponse, rid: str, service: str, request: dict[str, Any]) -> dict[str, Any]:
    await ws.send_json({"id": rid, "service": service, "flow": "default", "request": request})
    while True:
        frame = await ws.receive_json(timeout=ANSWER_TIMEOUT_S)
        if frame.get("id") == rid and frame.get("complete"):
            return frame


async def socket(session: aiohttp.ClientSession, url: str, token: str) -> aiohttp.ClientWebSocketResponse:
    ws = await session.ws_connect(url.replace("http", "ws") + "/api/v1/socket", max_msg_size=64 << 20)
    await ws.send_json({"type": "auth", "token": token})
    if (await ws.receive_json(timeout=30)).get("type") != "auth-ok":
        raise RuntimeError("auth failed")
    return ws


async def decode_stall(url: str, token: str, collection: str, questions: list[str], clients: int = 3) -> dict[str, Any]:
    """Graph-rag p50/p95 of `clients` clients idle, then while a fourth sends hostile text loads at
    once: a 350 kB punycode document (4-5 s of a quadratic decoder), two UTF-16 documents of 1M
    characters (over the limit) and two of 50,000 (indexed)."""
    text = "kgflöw " * 50_000
    hostile = [{"id": "puny", "text": base64.b64encode(text.encode("punycode")).decode(), "charset": "punycode"}]
    wide = "Graph retrieval answers questions over documents in Lima and Quito. " * 15_000
    for i, size in enumerate((1_000_000, 1_000_000, 50_000, 50_000)):  # two over the limit, two indexed
        data = base64.b64encode((f"{i} " + wide)[:size].encode("utf-16")).decode()
        hostile.append({"id": f"utf16-{size}-{i}", "text": data, "charset": "utf-16"})

    async def ask_loop(stop: asyncio.Event, ms: list[float], n: int) -> None:
        async with aiohttp.ClientSession() as s:
            ws = await socket(s, url, token)
            i = 0
            while not stop.is_set():
                began = time.perf_counter()
                q = questions[(n * 7 + i) % len(questions)]
                await ask(ws, f"q{n}-{i}", "graph-rag", {"query": q, "collection": collection, "no-llm": True})
                ms.append((time.perf_counter() - began) * 1000)
                i += 1
            await ws.close()

    async def measured(during: Any) -> dict[str, Any]:
        stop, ms = asyncio.Event(), []
        askers = [asyncio.create_task(ask_loop(stop, ms, n)) for n in range(clients)]
        outcome = await during()
        stop.set()
        await asyncio.gather(*askers)
        return {"requests": len(ms), "p50_ms": round(percentile(ms, 50), 1), "p95_ms": round(percentile(ms, 95), 1),
                "max_ms": round(max(ms), 1), **(outcome or {})}  # fmt: skip

    async def hostile_loads() -> dict[str, Any]:
        async with aiohttp.ClientSession() as s:
            ws = await socket(s, url, token)
            began = time.perf_counter()
            target = f"{collection}-hostile"
            for i, h in enumerate(hostile):  # all at once: one reader collects the answers
                frame = {
                    "id": f"h{i}",
                    "service": "text-load",
                    "flow": "default",
                    "request": {**h, "collection": target},
                }
                await ws.send_json(frame)
            done: dict[str, dict[str, Any]] = {}
            while len(done) < len(hostile):
                frame = await ws.receive_json(timeout=ANSWER_TIMEOUT_S)
                if frame.get("complete"):
                    done[frame["id"]] = frame
            await ws.close()
        answers = [done[f"h{i}"] for i in range(len(hostile))]
        kinds = [a["error"]["type"] if "error" in a else "ok" for a in answers]
        return {"hostile_loads": dict(zip([h["id"] for h in hostile], kinds, strict=True)),
                "hostile_s": round(time.perf_counter() - began, 1)}  # fmt: skip

    await measured(lambda: asyncio.sleep(10))  # warm: models, caches, server connections
    idle = await measured(lambda: asyncio.sleep(20))
    loaded = await measured(hostile_loads)
    return {"idle": idle, "during_hostile_loads": loaded, "p95_within_1s": loaded["p95_ms"] <= 1000}


def rss_mb(pid: int) -> dict[str, float]:
    """Resident set size of `pid` (MB): all, anonymous (heaps), file-backed (the SQLite files mapped)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile"):
            out[{"VmRSS": "rss_mb", "RssAnon": "anon_mb", "RssFile": "file_mb"}[name]] = round(
                int(value.split()[0]) / 1024, 1
            )
    return out


async def rss_rounds(url: str, pid: int, token: str, collection: str, questions: list[str], rounds: int = 20,
                     docs: list[dict[str, Any]] | None = None) -> dict[str, Any]:  # fmt: skip
    """The gateway process's RSS after each round of mixed load: graph-rag, lazy-rag and kg-query
    questions, a text load and the delete of what it loaded, an embeddings request."""
    docs = docs or [{"id": "r", "text": "Acme was founded in Lima by Ada Lovelace. " * 40}]
    series = []
    for n in range(rounds):
        began = time.perf_counter()
        async with aiohttp.ClientSession() as s:
            ws = await socket(s, url, token)
            for i, q in enumerate(questions[:8]):
                await ask(ws, f"g{n}-{i}", "graph-rag", {"query": q, "collection": collection, "no-llm": True})
            docs_coll, churn_coll = f"{collection}-docs", f"{collection}-churn"
            for i, q in enumerate(questions[:2]):
                await ask(ws, f"l{n}-{i}", "lazy-rag", {"query": q, "collection": docs_coll, "no_llm": True})
                kg = {"query": q, "collection": docs_coll, "no_llm": True, "mode": "hybrid"}
                await ask(ws, f"k{n}-{i}", "kg-query", kg)
            d = docs[n % len(docs)]
            text = base64.b64encode(d["text"].encode()).decode()
            await ask(ws, f"t{n}", "text-load", {"id": f"churn-{n}", "text": text, "collection": churn_coll})
            churn = {"operation": "delete-documents", "collection": churn_coll, "document_ids": [f"churn-{n}"]}
            await ask(ws, f"x{n}", "document-store", churn)
            await ask(ws, f"e{n}", "embeddings", {"texts": [d["text"][:500]] * 32})
            await ws.close()
        series.append({"round": n, **rss_mb(pid), "s": round(time.perf_counter() - began, 1)})

    def spread(key: str) -> float:
        last = [r[key] for r in series[rounds // 2 :]]
        return round(100 * (max(last) - min(last)) / min(last), 2) if last and min(last) else 0.0

    return {"rounds": series, "last_half_spread_pct": spread("rss_mb"), "anon_last_half_spread_pct": spread("anon_mb"),
            "flat_within_5pct": spread("rss_mb") <= 5.0}  # fmt: skip


async def load_over(url: str, token: str, collection: str, data: Path) -> None:
    """Load a JSONL's documents through the gateway (text-load), one by one."""
    async with aiohttp.ClientSession() as s:
        ws = await socket(s, url, token)
        for n, line in enumerate((await asyncio.to_thread(data.read_text, encoding="utf-8")).splitlines()):
            d = json.loads(line)
            text = base64.b64encode(d["text"].encode()).decode()
            await ask(ws, f"d{n}", "text-load", {"id": d["id"], "text": text, "collection": collection})
        await ws.close()
