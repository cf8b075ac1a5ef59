"""The explorer when its gateway goes away and comes back (a restarted `kgflow up` on the same port):
the page says it is disconnected, connects again by itself, and answers again, with no reload."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.gateway.gw_support import BIN, ROOT, free_port, kgflow_up, up_env
from tests.web.browser import ask, wait_connected

pytestmark = pytest.mark.timeout(600)
QUESTION = "Where was marie_curie's husband born?"


def test_page_reconnects_after_the_gateway_restarts(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = up_env()
    cmd = [str(BIN / "kgflow"), "load", "triples", str(ROOT / "examples" / "sample.tsv"), "--home", str(home)]
    subprocess.run([*cmd, "-C", "demo", "--no-progress"], check=True, env=env, capture_output=True, timeout=300)
    port = free_port()
    with kgflow_up(home, env, port) as url:
        wait_connected(page, url + "/")
        assert "paris" in ask(page, "demo", "graph-rag", QUESTION)
    # The gateway is gone: the page notices the closed socket.
    page.wait_for_function("() => document.querySelector('#status').textContent.startsWith('disconnected')")
    with kgflow_up(home, env, port):
        page.wait_for_selector("#status.ok", timeout=60_000)
        assert "paris" in ask(page, "demo", "graph-rag", QUESTION)
    page.screenshot(path=str(tmp_path / "reconnected.png"))
