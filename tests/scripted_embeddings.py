"""A scripted OpenAI-compatible embeddings endpoint (`POST /v1/embeddings`) on loopback, in a thread
of the test process: each text's vector is a fixed function of the model name and the text (a
seeded random unit vector), so a test can tell which model made a stored vector. It records the
texts it embedded."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np


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


def _handler(script: ScriptedEmbeddings) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            """Quiet."""

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            """`POST /v1/embeddings`: one scripted vector per input text."""
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            script.texts.extend(texts)
            data = [{"object": "embedding", "index": i, "embedding": script.vector(t)} for i, t in enumerate(texts)]
            answer = {"object": "list", "data": data, "model": body.get("model", script.model),
                      "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)}}  # fmt: skip
            out = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    return Handler


@contextmanager
def scripted_embeddings(model: str, dimensions: int) -> Iterator[ScriptedEmbeddings]:
    """Serve the scripted endpoint on a free loopback port until the block ends."""
    script = ScriptedEmbeddings(model, dimensions)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    script.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield script
    finally:
        server.shutdown()
        server.server_close()
