"""The bge-small embeddings backend: the real model, read from the jar deploy/bge-small.sh installs,
with no network; questions get the model's query instruction, passages do not; MiniLM ignores it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from processors.models.embeddings.backends import make_embedder
from processors.models.embeddings.bge import OnnxBgeSmall
from processors.models.embeddings.model import OnnxMiniLM

SCRIPT = """
import asyncio, json
import numpy as np
from processors.models.embeddings.backends import make_embedder

async def main():
    m = make_embedder("bge-small")
    q = np.array(await m.embed(["Which element did Marie Curie name after her homeland?"], query=True))[0]
    p = np.array(await m.embed(["Polonium was named by Marie Curie after Poland, the country of her birth.",
                                "The Eiffel Tower was built for the 1889 World's Fair in Paris."]))
    print(json.dumps({"model": m.model, "scores": (p @ q).tolist(), "norms": np.linalg.norm(p, axis=1).tolist()}))

asyncio.run(main())
"""


def test_the_model_loads_from_its_jar_with_no_network_and_ranks_the_relevant_passage_first() -> None:
    # A network namespace of its own: no interface but loopback, so any fetch would fail.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run(["unshare", "--net", sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                         timeout=300, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    relevant, irrelevant = res["scores"]
    assert res["model"] == "bge-small-en-v1.5-onnx-int8"
    assert relevant > irrelevant + 0.2, res
    assert np.allclose(res["norms"], 1.0, atol=1e-4)


async def test_a_question_gets_the_query_instruction_a_passage_does_not() -> None:
    bge = make_embedder("bge-small")
    assert isinstance(bge, OnnxBgeSmall)
    text = "Where was Marie Curie born?"
    as_query = np.array(await bge.embed([text], query=True))
    by_hand = np.array(await bge.embed([OnnxBgeSmall.query_instruction + text]))
    as_passage = np.array(await bge.embed([text]))
    assert np.allclose(as_query, by_hand, atol=1e-5)
    assert not np.allclose(as_query, as_passage, atol=1e-3)
    minilm = OnnxMiniLM.shared()  # a symmetric model: a question is embedded as any text
    assert np.allclose(await minilm.embed([text], query=True), await minilm.embed([text]), atol=1e-6)
    assert bge.dimensions == minilm.dimensions == 384
