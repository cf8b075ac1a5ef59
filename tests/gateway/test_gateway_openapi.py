"""The gateway's OpenAPI document: it names every route the gateway serves (checked against the router, so a
new route without an entry fails here), it is served with a page that needs no network, and schemathesis,
generating requests from it against a real `kgflow up` gateway, sees no server error (5xx)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import schemathesis
from gw_support import BIN, ROOT, LiveGateway, kgflow_up, up_env
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from processors.base.bus import MemoryBus
from processors.base.settings import RuntimeSettings
from processors.gateway.openapi import OPERATIONS, document
from processors.gateway.service import GatewayProcessor

SCHEMA = schemathesis.openapi.from_dict(document())


def _documented(path: str) -> str:
    return re.sub(r"{(\w+)(:[^}]*)?}", r"{\1}", path)


def test_every_route_of_the_gateway_is_documented(tmp_path: Path) -> None:
    app = GatewayProcessor(MemoryBus(), RuntimeSettings(), home=tmp_path).app()
    served = {(r.method.lower(), _documented(r.resource.canonical)) for r in app.router.routes()
              if r.method != "HEAD" and r.resource is not None}  # fmt: skip
    documented = {(method, path) for path, ops in document()["paths"].items() for method in ops}
    assert served == documented
    assert len(OPERATIONS) == len(documented)  # no route described twice


def test_the_document_is_openapi_3_1_built_from_the_models() -> None:
    doc = document()
    assert doc["openapi"] == "3.1.0"
    retrieve = doc["paths"]["/retrieve"]["post"]
    body = retrieve["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert body == "#/components/schemas/RetrieveRequest"
    fields = doc["components"]["schemas"]["RetrieveRequest"]["properties"]
    assert {"query", "top_k", "project_id"} <= set(fields) and fields["top_k"]["minimum"] == 1
    answer = doc["components"]["schemas"]["RetrieveResponse"]["properties"]
    assert {"final_answer", "key_facts", "residual_uncertainty", "no_data_found"} <= set(answer)
    progress = doc["components"]["schemas"]["RetrievalProgress"]["properties"]
    assert progress["progress_pct"]["maximum"] == 100 and "phase" in progress
    assert set(doc["paths"]["/api/v1/lazy-rag/expand"]) == {"post"}


async def test_the_document_and_its_page_are_served(live: LiveGateway) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{live.url}/openapi.json") as r:
            assert r.status == 200 and await r.json() == document()
        async with s.get(f"{live.url}/docs") as r:
            page = await r.text()
    assert r.status == 200 and r.content_type == "text/html"
    assert "<script" not in page and "http://" not in page and "https://" not in page  # works offline
    for path in document()["paths"]:
        assert f"<code>{path}</code>" in page
    assert 'id="LazyRagApiRequest"' in page and 'href="#RetrieveResponse"' in page


@pytest.fixture(scope="module")
def up_docs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`kgflow up` over a fresh home with the sample graph and documents in the collection requests default to
    (workspace and collection `default`), so generated questions reach real retrieval, not only refusals."""
    home = tmp_path_factory.mktemp("gw-openapi") / "home"
    env = up_env()
    for kind, path in (("triples", "sample.tsv"), ("documents", "documents")):
        load = [str(BIN / "kgflow"), "load", kind, str(ROOT / "examples" / path), "--home", str(home), "-C", "default"]
        subprocess.run([*load, "--no-progress"], check=True, env=env, capture_output=True, timeout=300)
    with kgflow_up(home, env) as url:
        yield url


@SCHEMA.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_schemathesis_finds_no_server_error(case: schemathesis.Case, up_docs: str) -> None:
    case.call_and_validate(base_url=up_docs, checks=[not_a_server_error], timeout=60)
