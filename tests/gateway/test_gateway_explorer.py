"""The explorer page as the gateway serves it: `/` and its built files with security headers, nothing
else from the folder, the page public but the data behind the token, `kgflow up` printing its URL,
and the progress frames a load sends when asked to stream (what the page's Load tab shows)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import queue
import subprocess
import threading
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from gw_support import BIN, LiveGateway, free_port, served, up_env
from test_gateway_socket import collect, connect

from processors.gateway.explorer import ASSETS, STATIC, add_routes
from processors.gateway.service import GatewaySettings

TOKEN = "explorer-secret"
SECURED = GatewaySettings(token=TOKEN, max_frame_bytes=64 * 1024)


async def test_page_and_its_files_are_served_with_security_headers(live: LiveGateway) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.get(live.url + "/") as r:
            assert r.status == 200 and r.content_type == "text/html"
            html = await r.text()
            csp = r.headers["Content-Security-Policy"]
            assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
            assert r.headers["X-Frame-Options"] == "DENY"
        assert "static/explorer.js" in html and "static/explorer.css" in html
        assert "http://" not in html and "https://" not in html  # no CDN: every file comes from the gateway
        for name, content_type in ASSETS.items():
            async with s.get(f"{live.url}/static/{name}") as r:
                assert r.status == 200, name
                assert r.headers["Content-Type"] == content_type
                assert await r.read() == (STATIC / name).read_bytes()


@pytest.mark.parametrize("path", ["/static/index.html.bak", "/static/..%2Fservice.py", "/static/", "/service.py"])
async def test_nothing_else_is_served(live: LiveGateway, path: str) -> None:
    async with aiohttp.ClientSession() as s, s.get(live.url + path) as r:
        assert r.status in (404, 405), (path, r.status)


async def test_without_a_token_on_loopback_the_probe_lists_the_flows(live: LiveGateway) -> None:
    async with aiohttp.ClientSession() as s, s.post(live.url + "/api/v1/flow", json={"operation": "list-flows"}) as r:
        assert r.status == 200 and "default" in (await r.json())["flow-ids"]


async def test_a_deleted_bundle_answers_404_saying_how_to_rebuild(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<!doctype html><title>x</title>")
    app = web.Application()
    add_routes(app, tmp_path)  # no explorer.js: a source checkout whose bundle was deleted
    async with served(app) as port, aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{port}/") as r:
            assert r.status == 200 and "<title>x</title>" in await r.text()
        async with s.get(f"http://127.0.0.1:{port}/static/explorer.js") as r:
            assert r.status == 404 and "make web" in await r.text()


@pytest.mark.parametrize("live", [SECURED], indirect=True)
async def test_with_a_token_the_page_loads_but_the_data_needs_the_token(live: LiveGateway) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.get(live.url + "/") as r:
            assert r.status == 200  # the page is code, no data: it asks for the token itself
        # The page's probe (web/src/api.ts): a 401 is how it learns it must ask for the token.
        probe = {"operation": "list-flows"}
        async with s.post(live.url + "/api/v1/flow", json=probe) as r:
            assert r.status == 401
        async with s.post(live.url + "/api/v1/flow", json=probe, headers={"Authorization": "Bearer wrong"}) as r:
            assert r.status == 401
        async with s.post(live.url + "/api/v1/flow", json=probe, headers={"Authorization": f"Bearer {TOKEN}"}) as r:
            assert r.status == 200 and "default" in (await r.json())["flow-ids"]
        ws = await s.ws_connect(live.ws)
        await ws.send_json({"type": "auth", "token": "wrong"})
        assert (await ws.receive_json(timeout=10))["type"] == "auth-failed"
        await connect(live, s, TOKEN)


async def test_a_streamed_text_load_reports_progress_then_what_it_loaded(live: LiveGateway) -> None:
    text = "# Harbour\n\nThe harbour of Arnholm shelters fishing boats. Its lighthouse was built in 1858.\n"
    request = {
        "id": "harbour.md",
        "text": base64.b64encode(text.encode()).decode(),
        "charset": "utf-8",
        "collection": "page-docs",
        "streaming": True,
    }
    async with aiohttp.ClientSession() as s:
        ws = await connect(live, s)
        await ws.send_json({"id": "l1", "service": "text-load", "flow": "default", "request": request})
        frames = await collect(ws, "l1")
    *progress, last = frames
    stages = [f["response"]["stage"] for f in progress]
    assert "embedded" in stages and "stored" in stages, frames
    assert all(not f["complete"] for f in progress)
    assert last["complete"] and last["response"] == {"loaded": 1, "unchanged": 0, "chunks": 1}


def test_kgflow_up_prints_the_explorer_url(tmp_path: Path) -> None:
    port = free_port()
    cmd = [str(BIN / "kgflow"), "up", "--home", str(tmp_path / "home"), "--gateway-port", str(port)]
    env = up_env(KGFLOW_GATEWAY_TOKEN=TOKEN)
    wanted = f"kgflow: explorer at http://127.0.0.1:{port}/ (it asks for the gateway's token)\n"
    lines: queue.Queue[str] = queue.Queue()
    with subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True) as proc:
        assert proc.stderr is not None
        # Read in a thread: `kgflow up` prints a few lines, then waits for a signal with stderr open,
        # so a plain readline loop would block forever once the output stops.
        reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True)  # type: ignore[union-attr]
        reader.start()
        seen: list[str] = []
        deadline = time.monotonic() + 120
        try:
            while wanted not in seen and time.monotonic() < deadline and proc.poll() is None:
                with contextlib.suppress(queue.Empty):
                    seen.append(lines.get(timeout=1))
            assert wanted in seen, seen
        finally:
            proc.terminate()
            proc.wait(timeout=30)


async def test_stopping_the_gateway_closes_open_sockets_at_once(live: LiveGateway) -> None:
    """A page keeps its socket open while shown: stopping must close it (1001) rather than wait for it."""
    async with aiohttp.ClientSession() as s:
        ws = await connect(live, s)
        began = time.monotonic()
        await asyncio.wait_for(live.gateway.stop(), timeout=10)
        assert time.monotonic() - began < 5
        msg = await ws.receive(timeout=5)
        assert msg.type == aiohttp.WSMsgType.CLOSE and msg.data == aiohttp.WSCloseCode.GOING_AWAY, msg
