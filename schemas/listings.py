"""What the `documents` service's listings say of a collection and of its documents (in their own
module so schemas/documents.py stays readable; it re-exports them)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel


class CollectionInfo(BaseModel):
    """A collection and what it holds."""

    collection: str
    documents: int = 0
    chunks: int = 0
    entities: int = 0
    triples: int = 0
    communities: int = 0


class DocumentInfo(BaseModel):
    """A stored document."""

    id: str
    title: str = ""
    chunks: int = 0
    content_hash: str = ""
    timestamp: datetime | None = None
