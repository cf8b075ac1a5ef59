"""lazy-rag with the real local model: one structured call writes the summary, the confidence and
what is missing; the response carries the token counts and the model's name, and every citation is
a chunk it retrieved. (Mechanics only: the 135M model's prose is not judged.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from processors.base.settings import RuntimeSettings
from processors.commands.system import embedded
from processors.stores.settings import StoreSettings
from schemas.lazy_rag import LazyRagRequest
from schemas.services import LAZY_RAG
from tests.documents.scope_property import CORPUS, client, load


async def test_lazy_rag_answers_with_the_local_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGFLOW_LLM", "local")  # the default flow leaves `llm` unset: text-completion reads it
    monkeypatch.setenv("KGFLOW_LLM_TIMEOUT", "900")
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings(request_timeout_s=900)) as system:
        await load(system, "alice", "docs", CORPUS)
        req = LazyRagRequest(user="alice", collection="docs", query="Where was Marie Curie born?",
                             max_entities=20, timeout_s=900)  # fmt: skip
        res = await client(system, LAZY_RAG).request(req)
    assert not res.warnings, res.warnings  # the model answered: no retrieval-only fallback
    assert res.response.strip() and 0.0 <= res.confidence <= 1.0
    assert isinstance(res.missing_info, list)
    assert res.model and "smollm" in res.model.lower(), res.model
    assert res.in_token and res.in_token > 0 and res.out_token and res.out_token > 0
    assert res.stats is not None and res.stats.llm_calls == 1
    assert res.chunks and {c.chunk_id for c in res.citations} <= {c.id for c in res.chunks}
