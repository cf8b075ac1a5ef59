"""MCP test support: a corpus (examples/documents and a two-page PDF) loaded with `kgflow load documents`,
a real `kgflow up` gateway over it with tokens, and MCP client sessions of the SDK over both transports."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from tests.documents.format_files import text_pdf
from tests.gateway.gw_support import BIN, ROOT, kgflow_up, up_env

COLLECTION = "docs"
ADMIN_TOKEN = "mcp-admin-token"
ALICE_TOKEN = "mcp-alice-token"  # bound to workspace `alice`
PDF_ID = "curie-notes.pdf"
PAGE_TWO = "Radium chloride crystals glowed faintly blue in the dark laboratory shed."


@dataclass(frozen=True)
class Corpus:
    """A home with the corpus loaded (as workspace `default`), and a copy of it for stdio servers."""

    home: Path
    copy: Path


@dataclass(frozen=True)
class Gateway:
    """A `kgflow up` over the corpus, tokens required."""

    url: str

    @property
    def mcp(self) -> str:
        """The MCP endpoint."""
        return f"{self.url}/mcp"


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """examples/documents and a two-page PDF, loaded into collection `docs` with the CLI."""
    root = tmp_path_factory.mktemp("mcp")
    files = root / "files"
    shutil.copytree(ROOT / "examples" / "documents", files)
    (files / "NOTICE").unlink(missing_ok=True)
    (files / PDF_ID).write_bytes(text_pdf("The Curie Notes", ["Notes on pitchblende and polonium.", PAGE_TWO]))
    home = root / "home"
    subprocess.run([str(BIN / "kgflow"), "load", "documents", str(files), "--home", str(home), "-C", COLLECTION,
                    "--no-progress"], check=True, env=up_env(), capture_output=True, timeout=600)  # fmt: skip
    copy = root / "home-stdio"
    shutil.copytree(home, copy)  # stdio servers get their own stores: never two writers on one SQLite home
    return Corpus(home, copy)


@pytest.fixture(scope="session")
def gateway(corpus: Corpus) -> Iterator[Gateway]:
    """`kgflow up` over the corpus; an admin token and one bound to workspace `alice`."""
    tokens = corpus.home.parent / "tokens"
    tokens.write_text(f"{ADMIN_TOKEN}\n{ALICE_TOKEN} alice\n", encoding="utf-8")
    with kgflow_up(corpus.home, up_env(KGFLOW_GATEWAY_TOKEN_FILE=str(tokens))) as url:
        yield Gateway(url)


@contextlib.asynccontextmanager
async def http_session(
    url: str,
    token: str | None,
    workspace: str | None = None,
    seen: list[httpx2.Response] | None = None,
    flow: str | None = None,
) -> AsyncIterator[ClientSession]:
    """An initialised MCP session over streamable HTTP with these credentials (each HTTP response to `seen`)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if workspace:
        headers["X-Kgflow-Workspace"] = workspace
    if flow:
        headers["X-Kgflow-Flow"] = flow

    async def record(response: httpx2.Response) -> None:
        if seen is not None:
            await response.aread()
            seen.append(response)

    hooks = {"response": [record]}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(300.0), event_hooks=hooks) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


@contextlib.asynccontextmanager
async def stdio_session(log: Path, *args: str) -> AsyncIterator[ClientSession]:
    """An initialised MCP session with a `kgflow mcp ARGS` subprocess (its stderr appended to `log`)."""
    env = {k: v for k, v in up_env().items() if k in ("PATH", "HOME", "PYTHONPATH", "KGFLOW_LOG_LEVEL")}
    params = StdioServerParameters(command=str(BIN / "kgflow"), args=["mcp", *args], env=env)
    with log.open("a", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> CallToolResult:
    """The result of one tool call."""
    return await session.call_tool(tool, arguments)


def text(result: CallToolResult) -> str:
    """A result's readable text."""
    return "".join(getattr(c, "text", "") for c in result.content)
