"""The narrower scope a retrieval request may carry on top of user + collection."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MetadataValue = str | int | float | bool


class Scope(BaseModel):
    """A narrower scope inside user + collection: only these documents, and/or only documents
    whose metadata has `key` equal to the value (or to one of the values). Every store applies
    it inside its queries."""

    model_config = ConfigDict(extra="forbid")

    document_ids: list[str] | None = Field(default=None, max_length=10_000)
    metadata: dict[str, MetadataValue | list[MetadataValue]] | None = Field(default=None, max_length=64)

    @property
    def is_empty(self) -> bool:
        """True when the scope narrows nothing."""
        return self.document_ids is None and not self.metadata
