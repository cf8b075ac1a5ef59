"""Label resolver: batched, cached `rdfs:label` lookup."""

from __future__ import annotations

from pydantic import Field

from schemas.base import Response, ScopedRequest
from schemas.triples import MAX_BATCH


class LabelRequest(ScopedRequest):
    """Labels of these IRIs."""

    iris: list[str] = Field(min_length=1, max_length=MAX_BATCH)


class LabelResponse(Response):
    """IRI → label; IRIs without a label are absent. Counts say how the cache did."""

    labels: dict[str, str] = {}
    cache_hits: int = 0
    cache_misses: int = 0
