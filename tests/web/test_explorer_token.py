"""The explorer against a gateway with a token: the page asks for it, refuses a wrong one, then works —
and the token never travels in a URL (REST: a Bearer header; the socket: its auth frame)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.gateway.gw_support import BIN, ROOT, kgflow_up, up_env
from tests.web.browser import ask

pytestmark = pytest.mark.timeout(600)
TOKEN = "s3cret-explorer-token"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`kgflow up` with KGFLOW_GATEWAY_TOKEN set and the demo graph loaded; yields the page's URL."""
    home = tmp_path_factory.mktemp("explorer-token") / "home"
    env = up_env()
    cmd = [str(BIN / "kgflow"), "load", "triples", str(ROOT / "examples" / "sample.tsv"), "--home", str(home)]
    subprocess.run([*cmd, "-C", "demo", "--no-progress"], check=True, env=env, capture_output=True, timeout=300)
    with kgflow_up(home, up_env(KGFLOW_GATEWAY_TOKEN=TOKEN)) as url:
        yield url + "/"


def test_page_asks_for_the_token_and_works_with_it(page: Page, guarded: str, tmp_path: Path) -> None:
    urls: list[str] = []
    probes: list[str | None] = []  # the Authorization header of each flow-list probe
    page.on("request", lambda r: urls.append(r.url))
    page.on("request", lambda r: r.url.endswith("/api/v1/flow") and probes.append(r.headers.get("authorization")))
    page.on("websocket", lambda ws: urls.append(ws.url))
    page.goto(guarded)
    page.wait_for_selector("#token-dialog[open]")
    assert "needs a token" in page.inner_text("#token-error")

    page.fill("#token", "wrong")
    page.click("#token-submit")
    page.wait_for_selector("#token-dialog[open] >> text=did not accept")
    page.fill("#token", TOKEN)
    page.click("#token-submit")
    page.wait_for_selector("#status.ok")
    assert "(token)" in page.inner_text("#status")

    answer = ask(page, "demo", "graph-rag", "Where was marie_curie's husband born?")
    assert "place of birth" in answer
    page.screenshot(path=str(tmp_path / "token.png"))
    assert urls and not [u for u in urls if TOKEN in u], urls
    # Asked with no token (401), then with the wrong one (401), then with the right one, as a Bearer header.
    assert probes == [None, "Bearer wrong", f"Bearer {TOKEN}"], probes
    assert page.evaluate("sessionStorage.getItem('kgflow-token')") == TOKEN

    # A reload keeps the token for the tab's session (sessionStorage), and asks nothing.
    page.reload()
    page.wait_for_selector("#status.ok")
    assert not page.locator("#token-dialog[open]").count()
    assert probes[-1] == f"Bearer {TOKEN}"

    # A stored token the gateway no longer accepts is dropped and asked for again.
    page.evaluate("sessionStorage.setItem('kgflow-token', 'revoked')")
    page.reload()
    page.wait_for_selector("#token-dialog[open] >> text=did not accept")
    assert page.evaluate("sessionStorage.getItem('kgflow-token')") is None
