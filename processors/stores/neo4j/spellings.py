"""Concept spellings in the Neo4j document store: a document keeps its spellings of the concepts it
owns, with their mentions (`KgDocument.spellings`, JSON), and their sums per concept are nodes

    (:KgSpelling {key, user, collection, iri, label, n})

which a write adds to and a delete or replace takes away from in its own transaction (a spelling
left with none goes), so a concept's label (its most frequent spelling) is a function of the
documents stored, read with one index seek per concept whatever the collection's size."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from processors.stores.documents_protocol import DocumentRecord
from processors.stores.neo4j.schema import Runner, node_key
from schemas.tenant import Tenant

_DOCS = "UNWIND $dkeys AS dk MATCH (d:KgDocument {key: dk}) WHERE d.user = $user AND d.collection = $collection "
OLD_SPELLINGS = _DOCS + "RETURN d.spellings AS spellings"
SET_SPELLINGS = (
    "UNWIND $docs AS row MATCH (d:KgDocument {key: row.key}) WHERE d.user = $user AND d.collection = $collection "
    "SET d.spellings = row.spellings"
)
# Rows in key order: concurrent writers lock the spellings they share in one order.
ADJUST = (
    "UNWIND $rows AS row MERGE (s:KgSpelling {key: row.key}) ON CREATE SET s.user = $user, "
    "s.collection = $collection, s.iri = row.iri, s.label = row.label, s.n = 0 "
    "SET s.n = s.n + row.n WITH s WHERE s.n <= 0 DELETE s"
)
READ = (
    "UNWIND $iris AS i MATCH (s:KgSpelling {user: $user, collection: $collection, iri: i}) "
    "RETURN s.iri AS iri, s.label AS label, s.n AS n"
)
DELETE_COLLECTION = (
    "MATCH (n:KgSpelling {user: $user, collection: $collection}) CALL (n) { DELETE n } IN TRANSACTIONS OF 2000 ROWS"
)


async def replace_spellings(
    run: Runner, tenant: Tenant, params: dict[str, Any], records: Sequence[DocumentRecord] = ()
) -> None:
    """Inside a document write or delete (`params`: the tenant and `dkeys`, the documents'
    keys): take the stored versions' spellings away from the sums and add `records`' (none for a
    delete), recording theirs on their document nodes."""
    delta = Counter[tuple[str, str]]()
    for row in await run(OLD_SPELLINGS, params):
        for iri, label, n in json.loads(row["spellings"] or "[]"):
            delta[iri, label] -= n
    docs = []
    for r in records:
        mine = [[iri, label, n] for iri, counts in sorted(r.spellings.items()) for label, n in sorted(counts.items())]
        docs.append({"key": node_key(tenant, r.document.id), "spellings": json.dumps(mine, ensure_ascii=False)})
        for iri, label, n in mine:
            delta[iri, label] += n
    if docs:
        await run(SET_SPELLINGS, {**params, "docs": docs})
    rows = [{"key": node_key(tenant, "spelling", iri, label), "iri": iri, "label": label, "n": n}
            for (iri, label), n in delta.items() if n]  # fmt: skip
    if rows:
        await run(ADJUST, {**params, "rows": sorted(rows, key=lambda x: x["key"])})


async def read_spellings(run: Runner, tenant: Tenant, iris: Sequence[str]) -> dict[str, dict[str, int]]:
    """Each of `iris`' spellings with their mentions (concepts with none left out)."""
    out: dict[str, dict[str, int]] = {}
    rows = await run(READ, {"user": tenant.user, "collection": tenant.collection, "iris": list(dict.fromkeys(iris))})
    for row in rows:
        out.setdefault(row["iri"], {})[row["label"]] = int(row["n"])
    return out
