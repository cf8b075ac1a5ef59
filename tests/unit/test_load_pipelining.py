"""A load keeps the model and the parser busy: a batch whose chunks are embedded and parsed makes
room for the next while it is stored, with at most one batch more being stored than `in_flight`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from processors.commands.loading import Batching, load_documents
from schemas.communities import CommunitiesResponse
from schemas.documents import Document, DocumentsResponse, LoadDocuments, LoadResponse
from schemas.services import COMMUNITIES, COMMUNITY_BUILD, DOCUMENT_LOAD, DOCUMENTS

DOCS = [Document(id=f"d{n}", title=f"doc {n}", text=f"text of document {n}.") for n in range(6)]


class SlowStore:
    """The document-load service's steps, with each batch's store held until the test lets it go."""

    def __init__(self) -> None:
        self.working: set[str] = set()  # batches (by first document) being embedded and parsed
        self.sent: set[str] = set()  # batches sent and not answered
        self.most_working = 0
        self.most_sent = 0
        self.store_open = asyncio.Event()
        self.started_while_storing = 0

    async def __call__(self, service: Any, request: Any, timeout_s: float) -> AsyncIterator[Any]:
        if service is DOCUMENT_LOAD:
            async for res in self._load(request):
                yield res
        elif service is DOCUMENTS:
            yield DocumentsResponse(stamp=1.0)
        elif service in (COMMUNITIES, COMMUNITY_BUILD):
            yield CommunitiesResponse()

    async def _load(self, req: LoadDocuments) -> AsyncIterator[LoadResponse]:
        name = req.documents[0].id
        if len(self.sent) > len(self.working):  # another batch is being stored as this one starts
            self.started_while_storing += 1
        self.sent.add(name)
        self.working.add(name)
        self.most_working = max(self.most_working, len(self.working))
        self.most_sent = max(self.most_sent, len(self.sent))
        await asyncio.sleep(0.01)
        yield LoadResponse(stage="embedded", done=len(req.documents))
        self.working.discard(name)  # parsed too: what is left is storing
        yield LoadResponse(stage="extracted", done=len(req.documents))
        await self.store_open.wait()
        self.sent.discard(name)
        yield LoadResponse(loaded=len(req.documents), end_of_stream=True)


async def test_a_stored_batch_makes_room_for_the_next_and_one_more_at_most() -> None:
    stream = SlowStore()
    load = asyncio.create_task(load_documents(stream, "u", "c", DOCS, batching=Batching(documents=1, in_flight=2)))
    await asyncio.sleep(0.3)
    # Two batches were embedded and parsed, then held in the store: one more started meanwhile.
    assert stream.most_sent == 3 and not load.done()
    stream.store_open.set()
    done = await load
    assert done.loaded == len(DOCS) and done.complete
    assert stream.most_working <= 2 and stream.most_sent <= 3
    assert stream.started_while_storing >= 1
