"""Measure first-token latency and tokens/s of the local and openai (→ llama.cpp server) backends.

Not a test (pytest does not collect it): run `python tests/llm/llm_speed.py [--runs N] [--threads 1 2]`.
Prints one JSON object per configuration. Needs the kgflow[local-llm] extra.

- first_token_ms: from calling `stream()` to the first text piece (includes evaluating the
  whole prompt: every run's prompt starts differently, so no KV-cache prefix is reused);
- decode_tok_s: (out_tokens - 1) / (time of last piece - time of first piece);
- total_tok_s: out_tokens / whole stream time (for openai → llama.cpp this includes the
  one-token usage probe the backend sends because the server streams no usage).
Medians over `--runs` runs after one warm-up run, greedy decoding, a short and a
graph-rag-sized prompt.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from llm_support import answers, free_port  # noqa: E402

from processors.models.text_completion.backend import ChatMessage, CompletionOptions, LLMBackend  # noqa: E402

SHORT = [ChatMessage("user", "What is the capital of France?")]
FACTS = "\n".join(f"entity {i} | related to | entity {i + 1}" for i in range(60))
LONG = [
    ChatMessage("system", "You answer questions using only the knowledge-graph facts given."),
    ChatMessage("user", f"Facts:\n{FACTS}\n\nQuestion: what is entity 3 related to?\nAnswer:"),
]


def unique(messages: list[ChatMessage]) -> list[ChatMessage]:
    """`messages` with a fresh first line, so llama.cpp's prefix cache cannot skip the prompt."""
    head = ChatMessage(messages[0].role, f"[request {time.perf_counter_ns()}]\n{messages[0].content}")
    return [head, *messages[1:]]


async def one_run(backend: LLMBackend, messages: list[ChatMessage], max_tokens: int) -> dict[str, float]:
    """Stream one completion (of a never-seen prompt) and time it."""
    messages = unique(messages)
    start = time.perf_counter()
    first = last = None
    final: Any = None
    async for chunk in backend.stream(messages, CompletionOptions(max_tokens=max_tokens, timeout_s=600)):
        now = time.perf_counter()
        if chunk.final:
            final = chunk
        elif chunk.text:
            first = first or now
            last = now
    end = time.perf_counter()
    assert first is not None and last is not None and final is not None
    out = final.out_token
    return {
        "first_token_ms": (first - start) * 1000,
        "decode_tok_s": (out - 1) / (last - first) if last > first else 0.0,
        "total_tok_s": out / (end - start),
        "in_token": final.in_token,
        "out_token": out,
    }


async def measure(name: str, backend: LLMBackend, runs: int, max_tokens: int) -> list[dict[str, Any]]:
    """Warm up, then take medians per prompt."""
    results = []
    for label, messages in (("short", SHORT), ("graph-rag-sized", LONG)):
        await one_run(backend, messages, max_tokens)
        samples = [await one_run(backend, messages, max_tokens) for _ in range(runs)]
        row: dict[str, Any] = {"backend": name, "prompt": label, "runs": runs}
        for key in samples[0]:
            row[key] = round(statistics.median(s[key] for s in samples), 1)
        results.append(row)
    return results


async def main() -> None:
    """Measure every configuration and print JSON lines."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    a = parser.parse_args()

    from processors.models.text_completion.local_backend import LocalLlamaBackend, default_model_path
    from processors.models.text_completion.openai_backend import OpenAIBackend

    gguf = default_model_path()
    print(json.dumps({"load_avg": os.getloadavg(), "cpus": os.cpu_count()}), flush=True)
    for threads in a.threads:
        local = LocalLlamaBackend(gguf, n_threads=threads)
        for row in await measure(f"local (in-process, {threads} thread)", local, a.runs, a.max_tokens):
            print(json.dumps(row), flush=True)

        port = free_port()
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", "smollm2"]
        cmd += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"]
        cmd += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
        proc = await asyncio.create_subprocess_exec(
            *cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        try:
            while not await asyncio.to_thread(answers, f"http://127.0.0.1:{port}/v1/models"):
                if proc.returncode is not None:
                    raise SystemExit("llama_cpp.server exited")
                await asyncio.sleep(0.25)
            remote = OpenAIBackend("smollm2", f"http://127.0.0.1:{port}/v1")
            for row in await measure(f"openai → llama.cpp server ({threads} thread)", remote, a.runs, a.max_tokens):
                print(json.dumps(row), flush=True)
            await remote.close()
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 10)
    print(json.dumps({"load_avg": os.getloadavg()}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
