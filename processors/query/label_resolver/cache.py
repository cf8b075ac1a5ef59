"""LabelCache: TTL + LRU cache of labels keyed by (user, collection, iri), invalidated per collection."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from cachetools import TTLCache

from schemas.tenant import Tenant

_MISSING = ""  # a cached "this IRI has no label" (labels are never empty)


class LabelCache:
    """Shared by every request of a flow. Missing labels are cached too, so a hub without a
    label does not cost a store call on every query."""

    def __init__(self, maxsize: int, ttl_s: float, timer: Callable[[], float] = time.monotonic) -> None:
        self._cache: TTLCache[tuple[str, str, str], str] = TTLCache(maxsize=maxsize, ttl=ttl_s, timer=timer)
        self.hits = 0
        self.misses = 0

    def lookup(self, tenant: Tenant, iris: Sequence[str]) -> tuple[dict[str, str], list[str]]:
        """Known labels, and the IRIs that must be fetched."""
        found: dict[str, str] = {}
        missing: list[str] = []
        for iri in dict.fromkeys(iris):
            label = self._cache.get((tenant.user, tenant.collection, iri))
            if label is None:
                missing.append(iri)
            elif label != _MISSING:
                found[iri] = label
        self.hits += len(dict.fromkeys(iris)) - len(missing)
        self.misses += len(missing)
        return found, missing

    def store(self, tenant: Tenant, asked: Sequence[str], labels: dict[str, str]) -> None:
        """Remember fetched labels (and which of `asked` had none)."""
        for iri in asked:
            self._cache[(tenant.user, tenant.collection, iri)] = labels.get(iri) or _MISSING

    def invalidate(self, tenant: Tenant, iris: Sequence[str] | None = None) -> int:
        """Forget a collection's labels (or just `iris`); returns how many entries went."""
        if iris is not None:
            keys = [
                (tenant.user, tenant.collection, i) for i in iris if (tenant.user, tenant.collection, i) in self._cache
            ]
        else:
            keys = [k for k in list(self._cache.keys()) if k[0] == tenant.user and k[1] == tenant.collection]
        for k in keys:
            self._cache.pop(k, None)
        return len(keys)

    def __len__(self) -> int:
        return len(self._cache)

    @property
    def hit_ratio(self) -> float:
        """Hits over lookups since start."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0
