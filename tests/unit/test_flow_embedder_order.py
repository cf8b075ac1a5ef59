"""A FlowEmbedder requests texts shortest first (each request holds texts of about one length, which
the model embeds in fewer, fuller calls) and still answers each text's vector in the caller's order."""

from __future__ import annotations

from typing import Any

from processors.models.embeddings.client import FlowEmbedder
from schemas.embeddings import EmbeddingsRequest, EmbeddingsResponse


class RecordingClient:
    """Answers each text with a vector naming it (its length and first character), recording requests."""

    def __init__(self) -> None:
        self.requests: list[list[str]] = []

    async def request(self, req: EmbeddingsRequest, **_: Any) -> EmbeddingsResponse:
        self.requests.append(list(req.texts))
        return EmbeddingsResponse(vectors=[[float(len(t)), float(ord(t[0]))] for t in req.texts], model="m")


async def test_requests_go_shortest_first_and_vectors_come_back_in_order() -> None:
    texts = ["ccccc", "a", "dddddddd", "bb", "eee", "f" * 12, "g"]
    client = RecordingClient()
    vectors = await FlowEmbedder(client, batch=3).embed(texts)  # type: ignore[arg-type]
    assert vectors == [[float(len(t)), float(ord(t[0]))] for t in texts]
    sent = [t for r in client.requests for t in r]
    assert sorted(sent) == sorted(texts)
    assert [len(t) for t in sent] == sorted(len(t) for t in texts)  # gather starts them in order
    assert all(len(r) <= 3 for r in client.requests)


async def test_an_empty_list_sends_nothing() -> None:
    client = RecordingClient()
    assert await FlowEmbedder(client).embed([]) == []  # type: ignore[arg-type]
    assert client.requests == []
