"""A scripted OpenAI-compatible chat endpoint for the explorer's tests: it streams a fixed answer a few
words at a time, with a pause between pieces, so the page really receives the answer in pieces (the
embedded default has no model, and its retrieval-only answer arrives in one frame).

It runs in a thread of the test process (`kgflow up` is a subprocess pointed at it with KGFLOW_LLM=openai)
and records the requests it answered.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

ANSWER = "Pierre Curie, the husband of Marie Curie, was born in Paris, France."
# The answer to a structured (JSON-schema) request, lazy-rag's summary: markdown, citing the first passage
# of the prompt by its chunk id (`{cite}`), as a model following lazy-rag's prompt does.
SUMMARY = "**Polonium** was named after *Poland*, Marie Curie's homeland {cite}.\n\n- element: polonium"
PASSAGE = re.compile(r"^\[([0-9A-Za-z_.:#-]+)\] \(", re.MULTILINE)
PIECE_WORDS = 2
PAUSE_S = 0.25  # between pieces: long enough for the page to draw each one before the next arrives


@dataclass
class ScriptedLlm:
    """Where the endpoint listens and what it was asked."""

    base_url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    summary: str = SUMMARY  # what a structured request is answered with (`{cite}`: the first passage's id)

    def env(self) -> dict[str, str]:
        """The environment that points `kgflow up`'s text-completion at this endpoint."""
        return {
            "KGFLOW_LLM": "openai",
            "KGFLOW_LLM_MODEL": "scripted-model",
            "KGFLOW_LLM_BASE_URL": self.base_url,
            "KGFLOW_LLM_API_KEY": "test-key",
            "KGFLOW_LLM_MAX_RETRIES": "0",
        }


def pieces(text: str = ANSWER) -> list[str]:
    """The answer as the endpoint streams it: PIECE_WORDS words a piece, the spaces between them kept."""
    words = text.split(" ")
    groups = [" ".join(words[i : i + PIECE_WORDS]) for i in range(0, len(words), PIECE_WORDS)]
    return [g + " " for g in groups[:-1]] + groups[-1:]


def answer_for(body: dict[str, Any], summary: str = SUMMARY) -> str:
    """The scripted answer: ANSWER, or for a request with a `response_format`, lazy-rag's summary JSON."""
    if not body.get("response_format"):
        return ANSWER
    prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []) if isinstance(m, dict))
    found = PASSAGE.search(prompt)
    text = summary.replace("{cite}", f"[{found.group(1)}]" if found else "")
    return json.dumps({"summary": text, "confidence": 0.9, "missing_info": []})


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
    event: dict[str, Any] = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1}
    event["model"] = "scripted-model"
    event["choices"] = [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]
    if usage:
        event["usage"] = usage
    return f"data: {json.dumps(event)}\n\n".encode()


def _handler(script: ScriptedLlm) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            """Quiet: the test's output is the page's."""

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            """`POST /v1/chat/completions`: the scripted answer, streamed when asked."""
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            script.requests.append(body)
            text = answer_for(body, script.summary)
            usage = {
                "prompt_tokens": 40,
                "completion_tokens": len(pieces(text)),
                "total_tokens": 40 + len(pieces(text)),
            }
            if not body.get("stream"):
                answer = {"id": "chatcmpl-s", "object": "chat.completion", "created": 1, "model": "scripted-model"}
                answer["choices"] = [{"index": 0, "message": {"role": "assistant", "content": text}}]
                answer["choices"][0]["finish_reason"] = "stop"
                answer["usage"] = usage
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")  # the stream ends when the connection does
            self.end_headers()
            self.wfile.write(_chunk({"role": "assistant"}))
            for piece in pieces(text):
                self.wfile.write(_chunk({"content": piece}))
                self.wfile.flush()
                time.sleep(PAUSE_S)  # this thread's own pause: the gateway sees a slow model
            self.wfile.write(_chunk({}, "stop") + _chunk({}, usage=usage) + b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


@contextmanager
def scripted_llm() -> Iterator[ScriptedLlm]:
    """Serve the scripted endpoint on a free loopback port until the block ends."""
    script = ScriptedLlm("")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    script.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield script
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLlm]:
    """The scripted model a module's `kgflow up` answers with (import this fixture into the module)."""
    with scripted_llm() as script:
        yield script
