"""The chat routes with the real `openai` and `ollama` clients against `kgflow up` (the demo documents
and graph loaded): lazy-rag and kg-query with no model configured, streamed and not, and, in a flow
whose model is the scripted endpoint, graph-rag's answer streamed in pieces and lazy-rag's chunk-id
citations renumbered as footnotes. Auth and refusals on an in-process gateway with a token."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import ollama
import openai
import pytest
from gw_support import BIN, ROOT, LiveGateway, kgflow_up, up_env

from processors.gateway.service import GatewaySettings
from tests.web.scripted_llm import ANSWER, PASSAGE, ScriptedLlm

pytestmark = pytest.mark.timeout(600)
NO_MODEL = "No language model is configured"
QUESTION = "Which element did Marie Curie name after her homeland?"
POLONIUM = "polonium-and-radium.md"
POLONIUM_FOOTNOTE = re.compile(r"^\[[1-3]\] Polonium and radium", re.MULTILINE)  # among the first three
SCRIPTED = "scripted"  # the flow whose text-completion is the scripted model


@dataclass(frozen=True)
class ChatServer:
    url: str
    chunk_ids: set[str]  # of the documents collection, which no footnoted answer may show raw


def _kgflow(*args: str) -> str:
    return subprocess.run([str(BIN / "kgflow"), *args], check=True, env=up_env(), capture_output=True,
                          text=True, timeout=300).stdout  # fmt: skip


def _post(url: str, body: dict, headers: dict[str, str] | None = None) -> dict:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json", **(headers or {})}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLlm) -> Iterator[ChatServer]:
    """`kgflow up` with no model in flow `default`, the scripted model in flow `scripted`."""
    home = tmp_path_factory.mktemp("chat") / "home"
    _kgflow(
        "load", "documents", str(ROOT / "examples" / "documents"), "--home", str(home), "-C", "docs", "--no-progress"
    )
    _kgflow(
        "load", "triples", str(ROOT / "examples" / "sample.tsv"), "--home", str(home), "-C", "demo", "--no-progress"
    )
    with kgflow_up(home, up_env()) as url:
        params = {"llm": "openai", "llm-model": "scripted-model", "llm-base-url": llm.base_url,
                  "llm-api-key": "test-key", "llm-max-retries": 0}  # fmt: skip
        _post(f"{url}/api/v1/flow", {"operation": "start-flow", "flow-id": SCRIPTED, "blueprint-name": "default",
                                     "description": "chat test", "parameters": params})  # fmt: skip
        found = _post(f"{url}/api/v1/flow/default/service/kg-query", {"query": QUESTION, "collection": "docs"})
        yield ChatServer(url, {c["id"] for c in found["chunks"]})


def _no_raw_ids(text: str, server: ChatServer) -> None:
    assert not any(f"[{i}]" in text for i in server.chunk_ids), text


def test_openai_models_name_services_modes_and_collections(chat: ChatServer) -> None:
    ids = [m.id for m in openai.OpenAI(base_url=f"{chat.url}/v1", api_key="none").models.list()]
    assert {"kgflow/lazy-rag", "kgflow/graph-rag", "kgflow/drift", "kgflow/kg-query:mix"} <= set(ids)
    assert {"kgflow/lazy-rag@docs", "kgflow/kg-query:naive@demo"} <= set(ids)


def test_openai_lazy_rag_with_no_model_answers_from_its_passages_with_footnotes(chat: ChatServer) -> None:
    client = openai.OpenAI(base_url=f"{chat.url}/v1", api_key="none")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}]
    res = client.chat.completions.create(model="kgflow/lazy-rag@docs", messages=messages)
    text = res.choices[0].message.content or ""
    assert text.startswith(NO_MODEL) and "Sources:\n[1] " in text and POLONIUM_FOOTNOTE.search(text)
    _no_raw_ids(text, chat)
    sources, citations = res.model_extra["sources"], res.model_extra["citations"]
    assert [s["index"] for s in sources] == list(range(1, len(sources) + 1)) and len(citations) == len(sources)
    assert POLONIUM in {s["document_id"] for s in sources}
    assert all(s["chunk_id"] in chat.chunk_ids for s in sources)
    assert all(c in text for c in citations)  # the structured citations are the footnotes shown


def test_openai_kg_query_streams_with_the_collection_from_the_header(chat: ChatServer) -> None:
    client = openai.OpenAI(base_url=f"{chat.url}/v1", api_key="none", default_headers={"X-Kgflow-Collection": "docs"})
    stream = client.chat.completions.create(
        model="kgflow/kg-query:mix",
        messages=[{"role": "user", "content": QUESTION}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith(NO_MODEL) and "Sources:" in text and "polonium" in text.lower()
    _no_raw_ids(text, chat)
    final = [c for c in chunks if c.choices and c.choices[0].finish_reason == "stop"]
    assert len(final) == 1 and POLONIUM in {s["document_id"] for s in final[0].model_extra["sources"]}
    assert chunks[-1].usage is not None and not chunks[-1].choices  # the usage chunk comes last
    assert len({c.id for c in chunks}) == 1


def test_openai_errors_are_openai_errors(chat: ChatServer) -> None:
    client = openai.OpenAI(base_url=f"{chat.url}/v1", api_key="none", max_retries=0)
    with pytest.raises(openai.NotFoundError, match="kgflow/lazy-rag"):  # the message lists what is served
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": QUESTION}])
    with pytest.raises(openai.NotFoundError, match="modes: local, global, hybrid, mix, naive"):
        client.chat.completions.create(model="kgflow/kg-query:deep", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError, match="no user message"):
        client.chat.completions.create(model="kgflow/lazy-rag", messages=[{"role": "system", "content": "x"}])
    with pytest.raises(openai.NotFoundError, match="flow 'nope' is not running"):
        client.chat.completions.create(model="kgflow/lazy-rag", messages=[{"role": "user", "content": "x"}],
                                       extra_headers={"X-Kgflow-Flow": "nope"}, stream=True)  # fmt: skip


def test_ollama_lists_shows_chats_and_generates(chat: ChatServer) -> None:
    client = ollama.Client(host=chat.url)
    names = [m.model for m in client.list().models]
    assert "kgflow/lazy-rag@docs" in names and "kgflow/kg-query:hybrid" in names
    shown = client.show("kgflow/kg-query:local@docs")
    assert shown.modelinfo == {"kgflow.service": "kg-query", "kgflow.mode": "local", "kgflow.collection": "docs"}
    assert client._client.get("/api/version").json()["version"]  # noqa: SLF001 - Open WebUI's first call

    parts = list(
        client.chat(model="kgflow/lazy-rag@docs", messages=[{"role": "user", "content": QUESTION}], stream=True)
    )
    assert parts[-1].done and not any(p.done for p in parts[:-1])
    text = "".join(p.message.content for p in parts)
    assert text.startswith(NO_MODEL) and POLONIUM_FOOTNOTE.search(text)
    _no_raw_ids(text, chat)

    whole = client.generate(model="kgflow/kg-query:mix@docs", prompt=QUESTION, stream=False)
    assert whole.done and whole.response.startswith(NO_MODEL) and "Sources:\n[1] " in whole.response
    raw = _post(f"{chat.url}/api/generate", {"model": "kgflow/kg-query:mix@docs", "prompt": QUESTION, "stream": False})
    assert raw["response"] == whole.response and POLONIUM in {s["document_id"] for s in raw["sources"]}

    with pytest.raises(ollama.ResponseError) as info:
        client.chat(model="llama3.2", messages=[{"role": "user", "content": QUESTION}], stream=False)
    assert info.value.status_code == 404 and "not served by kgflow" in info.value.error


def test_with_a_model_graph_rag_streams_in_pieces_and_lazy_rag_footnotes_its_citations(
    chat: ChatServer, llm: ScriptedLlm
) -> None:
    client = openai.OpenAI(base_url=f"{chat.url}/v1", api_key="none", default_headers={"X-Kgflow-Flow": SCRIPTED})
    stream = client.chat.completions.create(
        model="kgflow/graph-rag@demo", messages=[{"role": "user", "content": "Where was Marie Curie's husband born?"}],
        stream=True,
    )  # fmt: skip
    deltas = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert "".join(deltas).startswith(ANSWER) and len(deltas) >= 4  # the model's pieces, then the sources
    assert "Sources:\n[1] " in deltas[-1] and "pierre curie" in deltas[-1]

    parts = list(ollama.Client(host=chat.url, headers={"X-Kgflow-Flow": SCRIPTED}).chat(
        model="kgflow/lazy-rag@docs", messages=[{"role": "user", "content": QUESTION}], stream=True))  # fmt: skip
    text = "".join(p.message.content for p in parts)
    assert text.startswith("**Polonium** was named after *Poland*, Marie Curie's homeland [1].")
    assert re.search(r"\n\nSources:\n\[1\] [^\n]+ \([a-z-]+\.md\): ", text) and "\n[2]" not in text  # only the cited
    _no_raw_ids(text, chat)
    asked = [r for r in llm.requests if r.get("response_format")]  # lazy-rag's structured call reached the model
    cited = PASSAGE.search(" ".join(m["content"] for m in asked[-1]["messages"]))
    body = {"model": "kgflow/lazy-rag@docs", "messages": [{"role": "user", "content": QUESTION}], "stream": False}
    raw = _post(f"{chat.url}/api/chat", body, {"X-Kgflow-Flow": SCRIPTED})
    assert cited and [s["chunk_id"] for s in raw["sources"]] == [cited.group(1)]


@pytest.mark.parametrize("live", [GatewaySettings(token="chat-secret")], indirect=True)
async def test_chat_routes_need_the_gateway_token(live: LiveGateway) -> None:
    question = [{"role": "user", "content": "Where was marie_curie's husband born?"}]
    wrong = openai.AsyncOpenAI(base_url=f"{live.url}/v1", api_key="guess", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        await wrong.chat.completions.create(model="kgflow/graph-rag@sample", messages=question)
    with pytest.raises(openai.AuthenticationError):
        await wrong.models.list()
    with pytest.raises(ollama.ResponseError) as info:
        await ollama.AsyncClient(host=live.url).chat(model="kgflow/graph-rag@sample", messages=question)
    assert info.value.status_code == 401

    right = openai.AsyncOpenAI(base_url=f"{live.url}/v1", api_key="chat-secret", max_retries=0)
    res = await right.chat.completions.create(model="kgflow/graph-rag@sample", messages=question)
    assert "pierre curie | place of birth | paris" in (res.choices[0].message.content or "")
    authed = ollama.AsyncClient(host=live.url, headers={"Authorization": "Bearer chat-secret"})
    assert "kgflow/graph-rag@sample" in [m.model for m in (await authed.list()).models]
