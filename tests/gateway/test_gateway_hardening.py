"""What an attacker tries first against the gateway: deep JSON, odd tokens, secrets, unauthenticated
reads, plain HTTP; and the answers a client relies on: HTTP statuses and import acknowledgements."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from gw_support import LiveGateway
from test_gateway_socket import QUESTION, collect, connect, rag

from processors.gateway.service import GatewayProcessor, GatewaySettings

DEEP = "[" * 50_000  # within the frame limit; Python's parser gives up near 1,000 levels
TOKEN = "admin-secret"
SECURED = GatewaySettings(token=TOKEN, max_frame_bytes=256 * 1024)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def label(iri: str, text: str) -> dict[str, Any]:
    """An import triple giving `iri` the label `text`."""
    return {
        "s": {"t": "i", "i": iri},
        "p": {"t": "i", "i": "http://www.w3.org/2000/01/rdf-schema#label"},
        "o": {"t": "l", "v": text},
    }


def import_frame(fid: str, collection: str, *triples: dict[str, Any]) -> dict[str, Any]:
    """A TrustGraph triples-import frame."""
    return {"metadata": {"id": fid, "metadata": [], "collection": collection}, "triples": list(triples)}


async def test_deeply_nested_json_costs_only_its_own_frame(live: LiveGateway) -> None:
    async with aiohttp.ClientSession() as s:
        ws = await connect(live, s)
        sent = {f"n-{i}": f"Who is {who}?" for i, who in enumerate(["marie curie", "pierre curie"] * 10)}
        for rid, question in sent.items():
            await ws.send_json(rag(rid, question))
        await ws.send_str(DEEP)
        await ws.send_str('{"id": "deep", "service": "graph-rag", "flow": "default", "request": ' + DEEP)
        answered: dict[str, dict[str, Any]] = {}
        errors: dict[Any, dict[str, Any]] = {}
        while len(answered) < len(sent) or len(errors) < 2:
            frame = await ws.receive_json(timeout=60)
            if "error" in frame:
                errors[frame["id"]] = frame["error"]
            elif frame["complete"]:
                answered[frame["id"]] = frame["response"]
        assert set(answered) == set(sent)  # every in-flight request on the socket was answered
        assert set(errors) == {None, "deep"} and all(e["type"] == "bad-request" for e in errors.values())
        assert "nested too deeply" in errors["deep"]["message"]
        await ws.send_json({"id": "after", "service": "embeddings", "flow": "default", "request": {"texts": ["a"]}})
        assert (await collect(ws, "after"))[0]["response"]["vectors"]
        async with s.post(f"{live.url}/api/v1/flow/default/service/graph-rag", data=DEEP) as r:
            assert r.status == 400 and "nested too deeply" in (await r.json())["error"]["message"]


async def test_import_acknowledges_what_is_stored_and_refuses_what_is_not(live: LiveGateway) -> None:
    async with aiohttp.ClientSession() as s:
        ws = await s.ws_connect(f"{live.url}/api/v1/flow/default/import/triples?workspace=default")
        await ws.send_json(import_frame("f-1", "acked", label("urn:a", "alpha")))
        await ws.send_json(import_frame("f-2", "acked", label("urn:b", "beta"), label("urn:c", "gamma")))
        await ws.send_str('{"metadata": {"id": "f-deep"}, "triples": ' + DEEP)
        await ws.send_json(import_frame("f-bad", "acked", {"s": {"t": "i", "i": "urn:x"}}))
        replies = [await ws.receive_json(timeout=30) for _ in range(3)]
        refused = [r["refused"]["ids"] for r in replies if "refused" in r]
        assert sorted(refused) == [["f-bad"], ["f-deep"]], replies
        [ack] = [r["ack"] for r in replies if "ack" in r]
        assert ack == {"ids": ["f-1", "f-2"], "frames": 2, "triples": 3}
        await ws.close()
        ws = await connect(live, s)
        await ws.send_json({"id": "q", "service": "triples", "flow": "default", "request": {"collection": "acked"}})
        stored = (await collect(ws, "q"))[0]["response"]["response"]
        assert {t["o"]["v"] for t in stored} == {"alpha", "beta", "gamma"}


@pytest.mark.parametrize("live", [SECURED], indirect=True)
async def test_secrets_are_never_returned(live: LiveGateway) -> None:
    live.gateway.auth._tokens["carol-token"] = "carol"  # noqa: SLF001 - as a token file line `carol-token carol`
    async with aiohttp.ClientSession() as s:
        start = {"operation": "start-flow", "flow-id": "keyed", "blueprint-name": "default",
                 "parameters": {"llm-api-key": "sk-live-123", "entity-limit": 7}}  # fmt: skip
        async with s.post(f"{live.url}/api/v1/flow", json=start, headers=AUTH) as r:
            assert r.status == 200 and "sk-live-123" not in await r.text()
        carol = {"Authorization": "Bearer carol-token"}
        for op in ({"operation": "get-flow", "flow-id": "keyed"}, {"operation": "get-config"}):
            async with s.post(f"{live.url}/api/v1/flow", json=op, headers=carol) as r:
                text = await r.text()
                assert r.status == 200 and "sk-live-123" not in text and "<redacted>" in text, text
                assert "llm-api-key" in text
    # the processors still get the real value
    assert live.system.processor("text-completion")._flows  # noqa: SLF001
    state = live.gateway.dispatcher.config.flows["keyed"]
    assert state.parameters["llm-api-key"] == "sk-live-123"


@pytest.mark.parametrize("live", [SECURED], indirect=True)
async def test_unauthenticated_reads_and_odd_tokens(live: LiveGateway) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{live.url}/api/v1/health") as r:
            assert r.status == 200 and await r.json() == {"status": "ok"}  # no flow names without a token
        async with s.get(f"{live.url}/api/v1/health", headers=AUTH) as r:
            assert (await r.json())["flows"] == ["default"]
        async with s.get(f"{live.url}/api/metrics") as r:
            assert r.status == 401
        async with s.get(f"{live.url}/api/metrics", headers=AUTH) as r:
            assert r.status == 200 and "kgflow_gateway" in await r.text()
        async with s.post(f"{live.url}/api/v1/flow?token={TOKEN}", json={"operation": "list-flows"}) as r:
            assert r.status == 401  # tokens travel in headers, not URLs (which end up in logs)
        for token in (12345, ["admin-secret"], {"t": 1}, "\ud800"):
            ws = await s.ws_connect(live.ws)
            await ws.send_json({"type": "auth", "token": token})
            reply = await ws.receive_json(timeout=10)
            assert reply["type"] == "auth-failed", (token, reply)
    reader, writer = await asyncio.open_connection("127.0.0.1", live.gateway.port)
    writer.write(b"GET /api/metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\xfe\xc3\x28\r\n\r\n")
    await writer.drain()
    status = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    assert status.split()[1] == b"401", status


async def test_rest_statuses(live: LiveGateway) -> None:
    base = f"{live.url}/api/v1/flow"
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{base}/default/service/graph-rag", json={"collection": "sample"}) as r:
            assert r.status == 400 and (await r.json())["error"]["type"] == "bad-request"
        async with s.post(f"{base}/nope/service/graph-rag", json={"query": QUESTION}) as r:
            assert r.status == 404 and (await r.json())["error"]["type"] == "unknown-flow"
        async with s.post(f"{base}/default/service/no-such-service", json={}) as r:
            assert r.status == 404 and (await r.json())["error"]["type"] == "unknown-service"
        async with s.post(f"{base}/default/service/agent", json={}) as r:  # TrustGraph has it, kgflow does not:
            assert r.status == 200 and (await r.json())["error"]["type"] == "not-supported"  # shown by its CLI
        slow = {"query": QUESTION, "collection": "sample", "timeout-s": 0.000001}
        async with s.post(f"{base}/default/service/graph-rag", json=slow) as r:
            assert r.status == 504 and (await r.json())["error"]["type"] == "timeout"
        async with s.post(f"{base}/default/service/graph-rag", json={"query": QUESTION, "collection": "sample"}) as r:
            assert r.status == 200 and "paris" in (await r.json())["response"]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


async def test_binds_loopback_unless_told_and_serves_tls(live: LiveGateway, certificate: tuple[Path, Path]) -> None:
    bus, rt = live.system.bus, live.system.runtime
    assert GatewaySettings().host == "127.0.0.1"
    with pytest.raises(ValueError, match="only with a token"):
        await GatewayProcessor(bus, rt, GatewaySettings(host="0.0.0.0")).start(port=0)
    cert, key = certificate
    with pytest.raises(ValueError, match="both"):
        await GatewayProcessor(bus, rt, GatewaySettings(tls_cert=str(cert))).start(port=0)
    gw = GatewayProcessor(bus, rt, GatewaySettings(token=TOKEN, tls_cert=str(cert), tls_key=str(key)))
    await gw.start(port=0)
    try:
        assert gw.host == "127.0.0.1"  # a token alone does not widen the bind address
        trust = ssl.create_default_context(cafile=str(cert))
        async with aiohttp.ClientSession() as s:
            async with s.get(f"https://127.0.0.1:{gw.port}/api/v1/health", ssl=trust, headers=AUTH) as r:
                assert r.status == 200 and (await r.json())["flows"] == ["default"]
            ws = await s.ws_connect(f"wss://127.0.0.1:{gw.port}/api/v1/socket", ssl=trust)
            await ws.send_json({"type": "auth", "token": TOKEN})
            assert (await ws.receive_json(timeout=10))["type"] == "auth-ok"
            await ws.close()
            with pytest.raises(aiohttp.ClientError):
                async with s.get(f"http://127.0.0.1:{gw.port}/api/v1/health") as r:
                    assert r.status >= 400  # plain HTTP on a TLS port is not served
                    raise aiohttp.ClientError
    finally:
        await gw.stop()


async def test_a_busy_port_is_one_clear_error(live: LiveGateway) -> None:
    gw = GatewayProcessor(live.system.bus, live.system.runtime, GatewaySettings())
    with pytest.raises(RuntimeError, match=f"cannot listen on 127.0.0.1:{live.gateway.port}.*--gateway-port"):
        await gw.start(port=live.gateway.port)
