"""The bench's local-model answers: each has a budget the slow local model fits on a loaded box,
and a failed answer is reported in the figures instead of discarding the run measured before it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.docqa import llm
from processors.base.client import RemoteError
from processors.retrieval.lazy_rag.retrieve import LazyRagSettings


def test_the_model_answer_gets_the_bench_budget_not_lazy_rags_default() -> None:
    req = llm.lazy_rag_model_request("Who founded the band?")
    default = LazyRagSettings()
    assert default.timeout_s < llm.LLM_ANSWER_TIMEOUT_S  # the 60 s that timed the answer out
    assert default.for_request(req).timeout_s == llm.LLM_ANSWER_TIMEOUT_S  # what the service will wait
    assert req.max_entities == llm.LAZY_LLM_ENTITIES


async def test_a_failed_model_answer_is_reported_in_the_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    async def timed_out(home: Path, questions: list[dict[str, Any]], log: Any) -> dict[str, Any]:
        raise RemoteError("timeout", "lazy-rag exceeded 60.0s; partial results discarded")

    logged: list[str] = []
    monkeypatch.setattr(llm, "with_local_model", timed_out)
    got = await llm.local_model_figures(Path("unused"), [{"question": "q"}], logged.append)
    assert got == {"failed": "timeout: lazy-rag exceeded 60.0s; partial results discarded"}
    assert logged and "failed" in logged[0]


async def test_a_bench_bug_still_stops_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(home: Path, questions: list[dict[str, Any]], log: Any) -> dict[str, Any]:
        raise KeyError("wall_s")

    monkeypatch.setattr(llm, "with_local_model", broken)
    with pytest.raises(KeyError):
        await llm.local_model_figures(Path("unused"), [], print)
