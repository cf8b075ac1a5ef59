"""Graph-rag answered by the real local model: the `kgflow` CLI end to end, and streaming over the memory bus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from processors.base.client import RequestResponseClient
from processors.commands.system import embedded
from processors.retrieval.graph_rag.rag import NO_MODEL_PREFIX
from processors.stores.settings import StoreSettings
from schemas.graph_rag import GraphRagRequest, GraphRagResponse
from schemas.topics import topic

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample.tsv"
QUESTION = "Where was marie_curie's husband born?"
KGFLOW = [str(Path(sys.executable).with_name("kgflow"))]  # the console script of this venv


def kgflow(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess (fails the test with its output on a non-zero exit)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("KGFLOW_LLM") and k != "OPENAI_API_KEY"}
    full_env.update(env or {})
    done = subprocess.run(
        [*KGFLOW, *args], cwd=ROOT, env=full_env, text=True, capture_output=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"kgflow {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home where examples/sample.tsv was loaded into collection `demo` by the CLI."""
    home = tmp_path_factory.mktemp("kgflow-llm-home")
    kgflow("load", "triples", str(SAMPLE), "--collection", "demo", "--home", str(home), "--no-progress")
    return home


def test_cli_graph_rag_with_local_model_returns_generated_answer_usage_and_facts(
    demo_home: Path, gguf_path: str
) -> None:
    done = kgflow(
        "query", "graph-rag", QUESTION, "--collection", "demo", "--json", "--home", str(demo_home),
        env={"KGFLOW_LLM": "local"},
    )  # fmt: skip
    out = json.loads(done.stdout)
    assert out["answer"].strip()
    assert not out["answer"].startswith(NO_MODEL_PREFIX)  # generated, not the retrieval-only text
    assert out["model"] == Path(gguf_path).name.removesuffix(".gguf")
    assert out["in_token"] > 0 and out["out_token"] > 0
    facts = {(t["s"], t["p"], t["o"]) for t in out["triples"]}
    assert ("marie curie", "spouse", "pierre curie") in facts
    assert ("pierre curie", "place of birth", "paris") in facts
    assert out["stats"]["stage_ms"]["llm"] > 0


def test_cli_graph_rag_without_model_lists_facts(demo_home: Path) -> None:
    done = kgflow("query", "graph-rag", QUESTION, "--collection", "demo", "--json", "--home", str(demo_home))
    out = json.loads(done.stdout)
    assert out["answer"].startswith(NO_MODEL_PREFIX)
    assert "pierre curie | place of birth | paris" in out["answer"]
    assert out["in_token"] in (None, 0) and out["out_token"] in (None, 0)


async def test_graph_rag_streams_local_model_answer_over_the_memory_bus(
    demo_home: Path, gguf_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KGFLOW_LLM", "local")  # read when text-completion starts the flow
    async with embedded(StoreSettings(home=demo_home)) as system:
        client = RequestResponseClient(
            system.bus, topic("graph-rag", "default"), topic("graph-rag", "default", "response"), GraphRagResponse, 300
        )
        try:
            req = GraphRagRequest(user="default", collection="demo", query=QUESTION, streaming=True)
            messages = [m async for m in client.stream(req)]
        finally:
            await client.stop()
    explain, chunks, last = messages[0], messages[1:-1], messages[-1]
    assert explain.message_type == "explain" and explain.triples and not explain.end_of_session
    assert len(chunks) >= 2
    assert all(c.message_type == "chunk" and c.response and not c.end_of_session for c in chunks)
    assert last.end_of_stream and last.end_of_session
    assert last.model == Path(gguf_path).name.removesuffix(".gguf")
    assert (last.in_token or 0) > 0 and (last.out_token or 0) > 0
    assert last.triples and last.stats is not None
    answer = "".join(c.response for c in chunks) + last.response
    assert answer.strip() and not answer.startswith(NO_MODEL_PREFIX)
