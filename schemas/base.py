"""Message envelope shared by every request and response."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from schemas.scope import Scope
from schemas.tenant import Tenant

SCHEMA_VERSION = 1
# The longest question or search text a request may carry (a longer lexical query finds nothing more).
MAX_QUERY_CHARS = 8192


class Error(BaseModel):
    """A failure carried in a response: never silence, never a crash."""

    type: str
    message: str


# The error type of a write refused because its collection was deleted after its load began (its stamp).
COLLECTION_DELETED = "collection-deleted"


class Notice(BaseModel):
    """Something a client should know about an answer that is not a failure, e.g.
    `unknown-collection`, `incomplete-collection`, `llm-unavailable`."""

    type: str
    message: str


class Message(BaseModel):
    """Base of every wire message: carries the schema version."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_version: int = SCHEMA_VERSION


class Response(Message):
    """Base of every response: `error` is set on failure."""

    error: Error | None = None
    end_of_stream: bool = True


def _not_blank(name: str) -> str:
    if not name.strip():
        raise ValueError("a collection name may not be blank")
    return name


# A collection is named explicitly: an empty or blank name is refused, never read as `default`.
CollectionName = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_not_blank)]


class ScopedRequest(Message):
    """A retrieval request: the tenant scope is mandatory."""

    user: str = Field(min_length=1, max_length=256)
    collection: CollectionName

    @property
    def tenant(self) -> Tenant:
        """The tenant this request reads or writes (a request with a `scope` field narrows it)."""
        scope = getattr(self, "scope", None)
        return Tenant(self.user, self.collection, scope if isinstance(scope, Scope) else None)
