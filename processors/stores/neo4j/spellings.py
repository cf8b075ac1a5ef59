"""Concept spellings in the Neo4j document store: a document keeps its spellings of the concepts
it owns, with their mentions (`KgDocument.spellings`, JSON: `doc_spellings`), and their sums per
concept are nodes

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

OLD_SPELLINGS = (
    "UNWIND $dkeys AS dk MATCH (d:KgDocument {key: dk}) WHERE d.user = $user AND d.collection = $collection "
    "RETURN d.spellings AS spellings"
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


def doc_spellings(record: DocumentRecord) -> str:
    """A document node's `spellings`: its record's, as JSON [[iri, label, mentions], ...]."""
    rows = [[iri, label, n] for iri, counts in sorted(record.spellings.items()) for label, n in sorted(counts.items())]
    return json.dumps(rows, ensure_ascii=False)


async def stored_spellings(run: Runner, params: dict[str, Any]) -> Counter[tuple[str, str]]:
    """The spellings the stored documents of `params["dkeys"]` hold, summed: (iri, label) -> mentions."""
    out = Counter[tuple[str, str]]()
    for row in await run(OLD_SPELLINGS, params):
        for iri, label, n in json.loads(row["spellings"] or "[]"):
            out[iri, label] += n
    return out


async def adjust_spellings(
    run: Runner,
    tenant: Tenant,
    params: dict[str, Any],
    old: Counter[tuple[str, str]],
    records: Sequence[DocumentRecord] = (),
) -> None:
    """Inside the document write or delete that replaced the spellings `old` by `records`' (none for
    a delete): the sums follow."""
    delta = Counter[tuple[str, str]]()
    for r in records:
        for iri, counts in r.spellings.items():
            for label, n in counts.items():
                delta[iri, label] += n
    delta.subtract(old)
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
