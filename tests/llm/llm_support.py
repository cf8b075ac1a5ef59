"""Helpers shared by the language-model tests (importable from test modules, unlike conftest)."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

SERVER_MODEL = "smollm2"  # the --model_alias the llama.cpp server answers to


@dataclass(frozen=True)
class LlamaServer:
    """A running `python -m llama_cpp.server`."""

    base_url: str  # ends with /v1
    model: str
    log: Path

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's log."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(no log: {exc})"


def answers(url: str) -> bool:
    """Tell whether `url` answers 200 (within 2 s)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as res:  # noqa: S310 - loopback only
            return bool(res.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
