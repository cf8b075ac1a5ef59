"""Each embedder's doc-QA homes: named apart, indexed with that embedder's flow parameter, and a
rebuild of one embedder's home never removes another's."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.docqa import tune as docqa_tune
from bench.docqa.homes import DEFAULT_EMBEDDER, embedder_params, home_prefix, stale_homes


def test_only_another_embedder_needs_a_flow_parameter() -> None:
    assert DEFAULT_EMBEDDER == "local"
    assert embedder_params(DEFAULT_EMBEDDER) == {}
    assert embedder_params("bge-small") == {"embeddings-backend": "bge-small"}


def test_a_rebuild_removes_its_own_stale_homes_not_another_embedder_s(tmp_path: Path) -> None:
    for name in ("musique-titles-0a1b2c", "musique-titles-bge-small-0a1b2c", "musique-notitles-0a1b2c",
                 "musique-titles-bge-small-9f9f9f"):  # fmt: skip
        (tmp_path / name).mkdir()
    local, bge = home_prefix("musique", "titles"), home_prefix("musique", "titles", "bge-small")
    assert local == "musique-titles" and bge == "musique-titles-bge-small"
    assert [h.name for h in stale_homes(local, tmp_path)] == ["musique-titles-0a1b2c"]
    assert [h.name for h in stale_homes(bge, tmp_path)] == ["musique-titles-bge-small-0a1b2c",
                                                            "musique-titles-bge-small-9f9f9f"]  # fmt: skip


def test_tune_asks_with_the_embedder_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    async def record(name: str, variant: str, half: str, settings: object, limit: object, embedder: str) -> dict:
        seen.append(embedder)
        row = {"parameters": {}, "recall@2": 0.5, "recall@5": 0.75, "recall@10": 1.0, "p50_ms": 1.0}
        return {"set": name, "variant": variant, "half": half, "embedder": embedder, "questions": 1, "rows": [row],
                "load_average": {"start": [0.0], "end": [0.0]}}  # fmt: skip

    monkeypatch.setattr(docqa_tune, "tune", record)
    docqa_tune.main(["--set", "musique", "--embedder", "bge-small"])
    docqa_tune.main(["--set", "musique"])
    assert seen == ["bge-small", DEFAULT_EMBEDDER]
    with pytest.raises(SystemExit):  # an embedder with no local model is refused before any work
        docqa_tune.main(["--set", "musique", "--embedder", "openai"])
