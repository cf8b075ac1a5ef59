"""A scripted OpenAI-compatible embeddings endpoint (`POST /v1/embeddings`) on loopback, in a thread
of the test process: each text's vector is a fixed function of the model name and the text (a
seeded random unit vector), so a test can tell which model made a stored vector. It records the
texts it embedded."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from aiohttp import web


@dataclass
class ScriptedEmbeddings:
    """Where the endpoint listens, which model it claims to be, and what it embedded."""

    model: str
    dimensions: int
    base_url: str = ""
    texts: list[str] = field(default_factory=list)

    def vector(self, text: str) -> list[float]:
        """The vector this endpoint gives `text`."""
        seed = int.from_bytes(hashlib.sha256(f"{self.model}\0{text}".encode()).digest()[:8], "big")
        v = np.random.default_rng(seed).standard_normal(self.dimensions).astype(np.float32)
        return (v / np.linalg.norm(v)).tolist()

    def flow_params(self) -> list[str]:
        """`kgflow flow start` parameters of a flow whose embeddings are this endpoint."""
        return ["embeddings-backend=openai", f"embeddings-model={self.model}",
                f"embeddings-base-url={self.base_url}", "embeddings-api-key=test-key"]  # fmt: skip


def _app(script: ScriptedEmbeddings) -> web.Application:
    async def embeddings(request: web.Request) -> web.Response:
        """`POST /v1/embeddings`: one scripted vector per input text."""
        body = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        script.texts.extend(texts)
        data = [{"object": "embedding", "index": i, "embedding": script.vector(t)} for i, t in enumerate(texts)]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        return web.json_response({"object": "list", "data": data, "model": script.model, "usage": usage})

    app = web.Application()
    app.router.add_post("/v1/embeddings", embeddings)
    return app


@contextmanager
def scripted_embeddings(model: str, dimensions: int) -> Iterator[ScriptedEmbeddings]:
    """Serve the scripted endpoint on a free loopback port (its own event loop, in a thread) until
    the block ends."""
    script = ScriptedEmbeddings(model, dimensions)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(_app(script))
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    script.base_url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    try:
        yield script
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
