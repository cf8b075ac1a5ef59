"""A process that only asks questions (`kgflow query`) never loads the bulk lane's ONNX session:
it is made on the first bulk work, and embeds as the question lane does."""

from __future__ import annotations

import numpy as np

from processors.models.embeddings.model import QUERY_TEXTS, OnnxMiniLM

QUESTION = "which element did marie curie name after her homeland?"


async def test_the_bulk_session_is_made_by_the_first_bulk_work() -> None:
    model = OnnxMiniLM()  # its own instance: the shared one may have done bulk work already
    question = np.array(await model.embed([QUESTION], query=True))
    assert model._bulk_made is None  # noqa: SLF001 - what a question-only process never loads
    bulk = np.array(await model.embed([QUESTION] * (QUERY_TEXTS + 1)))  # more texts than the query lane takes
    assert model._bulk_made is not None  # noqa: SLF001
    assert np.allclose(bulk, question, atol=1e-5)
