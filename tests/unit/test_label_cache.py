"""LabelCache: TTL expiry, LRU eviction, negative caching, per-collection invalidation."""

from __future__ import annotations

from processors.query.label_resolver.cache import LabelCache
from schemas.tenant import Tenant


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_hit_after_store_and_miss_before() -> None:
    c = LabelCache(10, 300)
    assert c.lookup(Tenant("u", "c"), ["a"]) == ({}, ["a"])
    c.store(Tenant("u", "c"), ["a"], {"a": "Alpha"})
    assert c.lookup(Tenant("u", "c"), ["a"]) == ({"a": "Alpha"}, [])
    assert (c.hits, c.misses) == (1, 1)


def test_ttl_expiry() -> None:
    clock = Clock()
    c = LabelCache(10, ttl_s=300, timer=clock)
    c.store(Tenant("u", "c"), ["a"], {"a": "Alpha"})
    clock.now = 299
    assert c.lookup(Tenant("u", "c"), ["a"])[1] == []
    clock.now = 301
    assert c.lookup(Tenant("u", "c"), ["a"])[1] == ["a"]


def test_lru_eviction_keeps_recently_used() -> None:
    c = LabelCache(maxsize=2, ttl_s=300)
    c.store(Tenant("u", "c"), ["a", "b"], {"a": "A", "b": "B"})
    c.lookup(Tenant("u", "c"), ["a"])  # a is now more recent than b
    c.store(Tenant("u", "c"), ["x"], {"x": "X"})
    found, missing = c.lookup(Tenant("u", "c"), ["a", "b", "x"])
    assert found == {"a": "A", "x": "X"} and missing == ["b"]


def test_missing_labels_are_cached_too() -> None:
    c = LabelCache(10, 300)
    c.store(Tenant("u", "c"), ["nolabel"], {})
    assert c.lookup(Tenant("u", "c"), ["nolabel"]) == ({}, [])


def test_invalidation_is_per_collection_and_user() -> None:
    c = LabelCache(10, 300)
    c.store(Tenant("u", "c1"), ["a"], {"a": "A"})
    c.store(Tenant("u", "c2"), ["a"], {"a": "A2"})
    c.store(Tenant("v", "c1"), ["a"], {"a": "V"})
    assert c.invalidate(Tenant("u", "c1")) == 1
    assert c.lookup(Tenant("u", "c1"), ["a"])[1] == ["a"]
    assert c.lookup(Tenant("u", "c2"), ["a"])[0] == {"a": "A2"}
    assert c.lookup(Tenant("v", "c1"), ["a"])[0] == {"a": "V"}


def test_scope_is_part_of_the_key() -> None:
    c = LabelCache(10, 300)
    c.store(Tenant("u", "c1"), ["a"], {"a": "secret"})
    assert c.lookup(Tenant("u", "c2"), ["a"]) == ({}, ["a"])
