"""What the question-answering services' answers share: the evidence an answer rests on, and the
model that wrote it."""

from __future__ import annotations

from pydantic import BaseModel

from schemas.communities import CommunityInfo
from schemas.documents import Chunk
from schemas.retrieval import Citation, DocumentRef, EntityRef, RelationshipRef


class Evidence(BaseModel):
    """What an answer rests on: the documents, chunks, entities, relationships and communities it
    was read from, and its citations into them."""

    documents: list[DocumentRef] = []
    chunks: list[Chunk] = []
    entities: list[EntityRef] = []
    relationships: list[RelationshipRef] = []
    communities: list[CommunityInfo] = []
    citations: list[Citation] = []


class ModelUse(BaseModel):
    """The model that wrote the answer and the tokens it read and wrote (None: no model ran)."""

    model: str | None = None
    in_token: int | None = None
    out_token: int | None = None
