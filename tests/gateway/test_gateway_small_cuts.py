"""Item 6's small cuts at the gateway, with the clients users run: a chat model name with a `:tag` (as Ollama
clients send `:latest`) is served; `tg-invoke-graph-rag -C nope` says the collection is empty or unknown;
`tg-delete-collection` of a collection that does not exist does not say it was deleted."""

from __future__ import annotations

import asyncio

import aiohttp
import ollama
import openai
import pytest
from gw_support import BIN, LiveGateway

from processors.gateway.chat_format import ChatModelError, parse_model
from processors.gateway.tg_documents import collections_to_wire
from schemas.documents import CollectionInfo

QUESTION = "Where was marie_curie's husband born?"
FACT = "pierre curie | place of birth | paris"


@pytest.mark.parametrize(
    ("name", "service", "mode", "collection"),
    [
        ("kgflow/lazy-rag:latest@c", "lazy-rag", None, "c"),
        ("kgflow/lazy-rag@c:latest", "lazy-rag", None, "c"),
        ("kgflow/drift:v2", "drift", None, "default"),
        ("kgflow/kg-query:hybrid:latest@c", "kg-query", "hybrid", "c"),
        ("kgflow/kg-query:latest", "kg-query", None, "default"),
    ],
)
def test_a_model_name_may_carry_a_tag(name: str, service: str, mode: str | None, collection: str) -> None:
    target = parse_model(name)
    assert (target.service, target.mode, target.collection) == (service, mode, collection)


@pytest.mark.parametrize("name", ["kgflow/kg-query:hybird", "kgflow/lazy-rag:a:b", "kgflow/nope:latest"])
def test_a_mistyped_mode_or_two_tags_are_refused(name: str) -> None:
    with pytest.raises(ChatModelError):
        parse_model(name)


async def test_tagged_model_names_answer_through_the_openai_and_ollama_clients(live: LiveGateway) -> None:
    question = [{"role": "user", "content": QUESTION}]
    client = openai.AsyncOpenAI(base_url=f"{live.url}/v1", api_key="none", max_retries=0)
    res = await client.chat.completions.create(model="kgflow/graph-rag:latest@sample", messages=question)
    assert FACT in (res.choices[0].message.content or "")
    answer = await ollama.AsyncClient(host=live.url).chat(model="kgflow/graph-rag:latest@sample", messages=question)
    assert FACT in answer.message.content


async def _tg(*args: str) -> str:
    """A trustgraph-cli command's output (run off the event loop that serves the gateway)."""
    proc = await asyncio.create_subprocess_exec(
        *[str(BIN / args[0]), *args[1:]], stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    return out.decode()


async def test_tg_invoke_graph_rag_on_an_unknown_collection_says_so(live: LiveGateway) -> None:
    out = await _tg("tg-invoke-graph-rag", "-u", f"{live.url}/", "-C", "nope", "-q", QUESTION)
    assert "Warning: collection 'nope' is empty or unknown" in out and "sample" in out, out
    out = await _tg("tg-invoke-graph-rag", "-u", f"{live.url}/", "-C", "sample", "-q", QUESTION)
    assert FACT in out and "Warning" not in out, out
    # REST, as its --no-streaming would ask (trustgraph-cli 2.11.1's own --no-streaming path fails before sending)
    body = {"query": QUESTION, "collection": "nope"}
    async with (
        aiohttp.ClientSession() as s,
        s.post(f"{live.url}/api/v1/flow/default/service/graph-rag", json=body) as r,
    ):
        text = (await r.json())["response"]
    assert r.status == 200 and text.endswith("Warning: collection 'nope' is empty or unknown (known collections "
                                             "of user 'default': sample)"), text  # fmt: skip


async def test_tg_delete_collection_of_no_such_collection_is_not_deleted(live: LiveGateway) -> None:
    out = await _tg("tg-delete-collection", "-u", f"{live.url}/", "-y", "no-such-collection")
    assert "deleted successfully" not in out and "unknown-collection" in out and "no-such-collection" in out, out
    out = await _tg("tg-delete-collection", "-u", f"{live.url}/", "-y", "sample")  # triples only: it exists
    assert "Collection 'sample' deleted successfully" in out, out
    out = await _tg("tg-delete-collection", "-u", f"{live.url}/", "-y", "sample")
    assert "unknown-collection" in out, out


def test_collection_descriptions_count_in_the_singular_too() -> None:
    info = CollectionInfo(collection="c", documents=1, chunks=1, entities=1, triples=0)
    assert collections_to_wire([info])["collections"][0]["description"] == "1 document, 1 chunk, 1 entity, 0 triples"
