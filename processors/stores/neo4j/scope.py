"""Tenant and scope parameters shared by the Neo4j document and community stores.

A document node holds its metadata twice: as JSON (`metadata`, returned as stored) and as
`meta`, a list of `[key, JSON value]` pairs (each JSON-encoded, so 1 and "1" differ, as on
SQLite) that a scope's metadata filter tests with list membership inside the query.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from processors.stores.neo4j.schema import node_key
from schemas.tenant import Tenant

# Is document `d` in the request's scope? ($doc_ids: ids or null; $meta: one list of allowed
# pairs per metadata key, or null: every key must match one of its pairs.)
IN_SCOPE = (
    "($doc_ids IS NULL OR d.id IN $doc_ids) AND ($meta IS NULL OR all(f IN $meta WHERE any(x IN f WHERE x IN d.meta)))"
)
UNSCOPED = "$doc_ids IS NULL AND $meta IS NULL"
# The tenant's documents in scope, bound to `d`.
SCOPE_DOCS = "MATCH (d:KgDocument {user: $user, collection: $collection}) WHERE " + IN_SCOPE


def meta_pair(key: str, value: object) -> str:
    """One metadata value as stored in `meta` and asked for by a scope."""
    return json.dumps([key, json.dumps(value)], ensure_ascii=False)


def meta_pairs(metadata: Mapping[str, object]) -> list[str]:
    """Every (key, value) of a document's metadata (a list value gives one pair per item)."""
    return sorted({meta_pair(k, x) for k, v in metadata.items() for x in _as_list(v)})


def tenant_params(tenant: Tenant) -> dict[str, Any]:
    """Query parameters of a tenant and its scope, if any (see `IN_SCOPE`)."""
    params: dict[str, Any] = {"user": tenant.user, "collection": tenant.collection, "doc_ids": None, "meta": None}
    scope = tenant.scope
    if scope is not None and not scope.is_empty:
        params["doc_ids"] = list(scope.document_ids) if scope.document_ids is not None else None
        if scope.metadata:
            params["meta"] = [[meta_pair(k, x) for x in _as_list(v)] for k, v in scope.metadata.items()]
    return params


def keys(tenant: Tenant, ids: Sequence[str]) -> list[str]:
    """Node keys of these ids of one tenant (first occurrence order, no repeats)."""
    return [node_key(tenant, i) for i in dict.fromkeys(ids)]


def _as_list(v: object) -> list[object]:
    return list(v) if isinstance(v, list) else [v]
