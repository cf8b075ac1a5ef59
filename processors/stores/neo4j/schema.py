"""Neo4j graph model, schema and a shared async driver for the Neo4j stores.

Model (every node and relationship carries `user` and `collection`):

* ``(:KgEntity {key, user, collection, uri, label?, index_label?, search_text?, embedding?})``:
  an IRI of one tenant. `label` comes from rdfs:label triples (TripleStore.labels);
  `index_label`, `search_text` (normalized label, full-text indexed) and `embedding` from
  EntityIndex.upsert.
* ``(:KgLiteral {key, user, collection, value, datatype, language})``: a literal object.
* ``(:KgPredicate {key, user, collection, uri, label, embedding})``: a predicate's label vector.
* ``(:KgEntity)-[:KG_EDGE {p, user, collection}]->(:KgEntity|:KgLiteral)``: a triple.
* ``(:KgLoad {key, user, collection, started, finished?, source, triples, vectors, error?})``: a
  collection's last load (protocol.LoadState).
* ``(:KgVectorModel {key, user, collection, model, dimensions})``: the embedding model of the
  collection's vectors (protocol.VectorModel), recorded by its first vector write.

Documents, chunks, relations (KG_REL edges) and communities (DOCUMENT_SCHEMA) are modelled in
neo4j_documents.py and neo4j_communities.py; their chunks link to these same KgEntity nodes.

`key` is the JSON array [user, collection, iri] (literals: [user, collection, value, datatype,
language]) under a uniqueness constraint, so a lookup by key is an index seek and can never
cross tenants. All Cypher is constant text; values are always parameters.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from processors.accounting.usage import count, current
from processors.stores.protocol import VECTOR_DIMENSIONS, int_literal
from schemas.tenant import Tenant

VECTOR_INDEX = "kg_entity_embedding"
FULLTEXT_INDEX = "kg_entity_text"

SCHEMA = (
    "DROP CONSTRAINT kg_docs_version_key IF EXISTS",
    "CREATE CONSTRAINT kg_entity_key IF NOT EXISTS FOR (n:KgEntity) REQUIRE n.key IS UNIQUE",
    "CREATE CONSTRAINT kg_literal_key IF NOT EXISTS FOR (n:KgLiteral) REQUIRE n.key IS UNIQUE",
    "CREATE CONSTRAINT kg_predicate_key IF NOT EXISTS FOR (n:KgPredicate) REQUIRE n.key IS UNIQUE",
    "CREATE CONSTRAINT kg_load_key IF NOT EXISTS FOR (n:KgLoad) REQUIRE n.key IS UNIQUE",
    "CREATE CONSTRAINT kg_vector_model_key IF NOT EXISTS FOR (n:KgVectorModel) REQUIRE n.key IS UNIQUE",
    "CREATE INDEX kg_entity_scope IF NOT EXISTS FOR (n:KgEntity) ON (n.user, n.collection)",
    "CREATE INDEX kg_literal_scope IF NOT EXISTS FOR (n:KgLiteral) ON (n.user, n.collection)",
    "CREATE INDEX kg_predicate_scope IF NOT EXISTS FOR (n:KgPredicate) ON (n.user, n.collection)",
    "CREATE INDEX kg_edge_scope_p IF NOT EXISTS FOR ()-[r:KG_EDGE]-() ON (r.user, r.collection, r.p)",
    "CREATE VECTOR INDEX kg_entity_embedding IF NOT EXISTS FOR (n:KgEntity) ON n.embedding OPTIONS "
    "{indexConfig: {`vector.dimensions`: "
    + int_literal(VECTOR_DIMENSIONS)
    + ", `vector.similarity_function`: 'cosine'}}",
    "CREATE FULLTEXT INDEX kg_entity_text IF NOT EXISTS FOR (n:KgEntity) ON EACH [n.search_text]",
    "CREATE INDEX kg_entity_name IF NOT EXISTS FOR (n:KgEntity) ON (n.search_text)",
)
# Documents, chunks, relation provenance and communities (see neo4j_documents.py for the model).
DOCUMENT_SCHEMA = (
    "CREATE CONSTRAINT kg_document_key IF NOT EXISTS FOR (n:KgDocument) REQUIRE n.key IS UNIQUE",
    "CREATE CONSTRAINT kg_chunk_key IF NOT EXISTS FOR (n:KgChunk) REQUIRE n.key IS UNIQUE",
    "CREATE CONSTRAINT kg_community_key IF NOT EXISTS FOR (n:KgCommunity) REQUIRE n.key IS UNIQUE",
    "CREATE CONSTRAINT kg_term_key IF NOT EXISTS FOR (n:KgTerm) REQUIRE n.key IS UNIQUE",
    "CREATE CONSTRAINT kg_name_key IF NOT EXISTS FOR (n:KgName) REQUIRE n.key IS UNIQUE",
    "CREATE CONSTRAINT kg_deletion_key IF NOT EXISTS FOR (n:KgDeletion) REQUIRE n.key IS UNIQUE",
    "CREATE INDEX kg_deletion_scope IF NOT EXISTS FOR (n:KgDeletion) ON (n.user, n.collection)",
    "CREATE INDEX kg_name_scope IF NOT EXISTS FOR (n:KgName) ON (n.user, n.collection)",
    "CREATE CONSTRAINT kg_spelling_key IF NOT EXISTS FOR (n:KgSpelling) REQUIRE n.key IS UNIQUE",
    "CREATE INDEX kg_spelling_iri IF NOT EXISTS FOR (n:KgSpelling) ON (n.user, n.collection, n.iri)",
    "CREATE CONSTRAINT kg_collection_stats_key IF NOT EXISTS FOR (n:KgCollectionStats) REQUIRE n.key IS UNIQUE",
    "CREATE INDEX kg_term_scope IF NOT EXISTS FOR (n:KgTerm) ON (n.user, n.collection)",
    "CREATE INDEX kg_document_scope IF NOT EXISTS FOR (n:KgDocument) ON (n.user, n.collection)",
    "CREATE INDEX kg_chunk_scope IF NOT EXISTS FOR (n:KgChunk) ON (n.user, n.collection)",
    # a relation's source chunk by its number (KG_REL.src; see relations.py)
    "CREATE INDEX kg_chunk_number IF NOT EXISTS FOR (n:KgChunk) ON (n.n)",
    "CREATE INDEX kg_community_scope IF NOT EXISTS FOR (n:KgCommunity) ON (n.user, n.collection)",
    "CREATE VECTOR INDEX kg_chunk_embedding IF NOT EXISTS FOR (n:KgChunk) ON n.embedding OPTIONS "
    "{indexConfig: {`vector.dimensions`: "
    + int_literal(VECTOR_DIMENSIONS)
    + ", `vector.similarity_function`: 'cosine'}}",
    "CREATE VECTOR INDEX kg_community_embedding IF NOT EXISTS FOR (n:KgCommunity) ON n.embedding OPTIONS "
    "{indexConfig: {`vector.dimensions`: "
    + int_literal(VECTOR_DIMENSIONS)
    + ", `vector.similarity_function`: 'cosine'}}",
    # BM25 terms of the chunk (algorithms/bm25.terms, space-joined) and its tenant token: Lucene
    # ranks a collection's chunks by BM25 (every query requires the tenant), or finds a scope's
    # candidates for the query to score with the scope's own statistics.
    "CREATE FULLTEXT INDEX kg_chunk_text IF NOT EXISTS FOR (n:KgChunk) ON EACH [n.lexical, n.tenant] "
    "OPTIONS {indexConfig: {`fulltext.analyzer`: 'whitespace'}}",
    "DROP INDEX kg_chunk_lexical IF EXISTS",
    "DROP INDEX kg_entity_concept_key IF EXISTS",  # names are KgName nodes, found by their unique key
    # relation search scores a relation by its ends' entity vectors: relations keep none (issue 38)
    "DROP INDEX kg_relation_embedding IF EXISTS",
    # a relation is a KG_REL edge between its ends, found from them (doc_migration version 6)
    "DROP CONSTRAINT kg_relation_key IF EXISTS",
    "DROP INDEX kg_relation_scope IF EXISTS",
    "DROP INDEX kg_relation_object IF EXISTS",
)
AWAIT_INDEXES = "CALL db.awaitIndexes(300)"
# Auto-commit reads: attempts on a retryable error (leader switch, deadlock, lost connection), and
# the first back-off (doubled per attempt)
READ_ATTEMPTS = 3
READ_RETRY_DELAY_S = 0.05


# Lucene treats these as syntax; inside a quoted phrase only \ and " need escaping, but every
# special character is escaped so a token can never become an operator, field or wildcard.
_LUCENE_SPECIAL = set('+-&|!(){}[]^"~*?:\\/')
_SCHEMA_DONE: set[tuple[str, str]] = set()  # (url, database) pairs this process already set up


def entity_key(tenant: Tenant, iri: str) -> str:
    """The unique key of an IRI node of one tenant."""
    return json.dumps([tenant.user, tenant.collection, iri], ensure_ascii=False)


def collection_key(tenant: Tenant) -> str:
    """The key of a collection's own records (its load state, its vector model): an entity key no
    IRI has (no IRI is empty)."""
    return entity_key(tenant, "")


def node_key(tenant: Tenant, *parts: str) -> str:
    """The unique key of a document, chunk, relation or community node of one tenant."""
    return json.dumps([tenant.user, tenant.collection, *parts], ensure_ascii=False)


def literal_key(tenant: Tenant, value: str, datatype: str, language: str) -> str:
    """The unique key of a literal node of one tenant."""
    return json.dumps([tenant.user, tenant.collection, value, datatype, language], ensure_ascii=False)


def lucene_phrase(token: str) -> str:
    """`token` as a quoted Lucene phrase with every special character escaped (data, not syntax)."""
    return '"' + "".join("\\" + ch if ch in _LUCENE_SPECIAL else ch for ch in token) + '"'


class CypherVector(list[float]):
    """A vector query parameter with a short repr.

    The driver formats the repr of every query's parameters for a debug log line whatever the log
    level; spelling out 384 floats cost ~0.4 ms of a 4-5 ms query."""

    def __repr__(self) -> str:
        return f"<vector of {len(self)} floats>"


def cypher_vector(v: Sequence[float]) -> CypherVector:
    """`v` as a query parameter of float32 values (what the stored vectors hold)."""
    return CypherVector(np.asarray(v, dtype=np.float32).tolist())


def stored_vector(v: Sequence[float]) -> CypherVector | None:
    """`v` as float32 values, or None for a zero vector: one is never stored (a zero vector scores
    0 against anything) and a zero query has nothing to search for."""
    a = np.asarray(v, dtype=np.float32)
    return CypherVector(a.tolist()) if float(np.linalg.norm(a)) > 0 else None


Runner = Callable[[str, Mapping[str, Any]], Awaitable[list[dict[str, Any]]]]
PagedQuery = tuple[str, Mapping[str, Any], Callable[[list[tuple[Any, ...]]], None]]  # cypher, params, page callback
T = TypeVar("T")


def _runner(tx: Any) -> Runner:
    """Run one query of a transaction (one store request: a statement the caller waits for);
    records as dicts."""
    usage = current()

    async def run(cypher: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        count(usage, 1)
        return await (await tx.run(cypher, params)).data()

    return run


def _read_runner(tx: Any) -> Runner:
    """`_runner` for a read transaction, its records taken as `Neo4jConnection.read` takes them:
    dict(record), not record.data(), which walks every value again (a read returns plain lists,
    maps and scalars; an expansion's links are a thousand rows)."""
    usage = current()

    async def run(cypher: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        count(usage, 1)
        return [dict(r) async for r in await tx.run(cypher, params)]

    return run


def rows_of(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of a query that returns them as ONE record, `rows` (a list of maps).

    The async driver takes a message per record, ~0.15 ms of CPU each (100 rows: 16 ms on
    localhost); 1,000 rows as one record of maps cost 4 ms.
    """
    return records[0]["rows"] if records else []


class Neo4jConnection:
    """An async Neo4j driver plus one-time schema setup, shared by the triple store and the index.

    Reference counted: the last `release` closes the driver. Create it inside the event loop
    that uses it (the async driver's connections belong to one loop).
    """

    def __init__(self, url: str, user: str = "neo4j", password: str = "", database: str = "neo4j") -> None:
        self.url = url
        self.auth = (user, password) if password else None
        self.database = database
        self._driver: Any = None
        self._ready = False
        self._lock: asyncio.Lock | None = None
        self._refs = 0

    def acquire(self) -> Neo4jConnection:
        """Count one more user of this connection."""
        self._refs += 1
        return self

    async def ready(self) -> None:
        """Open the driver and create constraints and indexes (idempotent), waiting until online."""
        if self._ready:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._ready:
                return
            from neo4j import AsyncGraphDatabase
            from neo4j.exceptions import ClientError

            if self._driver is None:
                # a fresh database warns that a property read before its first write (a collection's
                # vector model) "does not exist"; that is an empty answer, not a user's problem
                self._driver = AsyncGraphDatabase.driver(
                    self.url, auth=self.auth, notifications_disabled_classifications=["UNRECOGNIZED"]
                )
            if (self.url, self.database) in _SCHEMA_DONE:
                self._ready = True
                return
            async with self._driver.session(database=self.database) as session:
                for ddl in SCHEMA + DOCUMENT_SCHEMA:
                    try:
                        await (await session.run(ddl)).consume()
                    except ClientError as exc:  # a concurrent process created an equivalent rule
                        if "EquivalentSchemaRuleAlreadyExists" not in (exc.code or ""):
                            raise
                await (await session.run(AWAIT_INDEXES)).consume()
            _SCHEMA_DONE.add((self.url, self.database))
            self._ready = True

    async def read(self, cypher: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Run one read query as an auto-commit query, retried on transient errors; records as dicts.

        One query needs no transaction around it: a managed one adds a COMMIT round trip to every
        read (2.2 -> 3.5 ms for a one-row read on localhost). A read is idempotent, so the retry a
        managed transaction would make is made here instead.
        """
        await self.ready()
        from neo4j import READ_ACCESS
        from neo4j.exceptions import DriverError, Neo4jError

        usage = current()
        count(usage, 0, 1)
        for attempt in range(READ_ATTEMPTS):
            count(usage, 1)
            try:
                async with self._driver.session(database=self.database, default_access_mode=READ_ACCESS) as session:
                    # dict(record), not record.data(): data() walks every value again, element by
                    # element (a vector is 384 of them); the values are plain lists, maps and scalars
                    return [dict(r) async for r in await session.run(cypher, params)]
            except (DriverError, Neo4jError) as exc:
                if attempt + 1 >= READ_ATTEMPTS or not exc.is_retryable():
                    raise
                await asyncio.sleep(READ_RETRY_DELAY_S * 2**attempt)
        raise AssertionError("unreachable")

    async def read_rows(self, cypher: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The rows of a query that returns them as one record (`rows_of`)."""
        return rows_of(await self.read(cypher, params))

    async def write(self, queries: list[tuple[str, Mapping[str, Any]]]) -> int:
        """Run write queries in ONE managed transaction; returns relationships created."""

        usage = current()

        async def work(tx: Any) -> int:
            created = 0
            for cypher, params in queries:
                count(usage, 1)
                summary = await (await tx.run(cypher, params)).consume()
                created += summary.counters.relationships_created
            return created

        return await self._transaction(work, write=True)

    async def read_tx(self, work: Callable[[Runner], Awaitable[T]]) -> T:
        """Run `work` in one managed read transaction; it runs queries with the `Runner` it gets."""
        return await self._transaction(lambda tx: work(_read_runner(tx)), write=False)

    async def read_pages(self, queries: Sequence[PagedQuery], page: int, restart: Callable[[], None]) -> None:
        """Run read queries in one managed read transaction, handing each one's records (as value
        tuples) to its callback `page` at a time: a large result never sits in memory whole.
        `restart` runs before each attempt (a retried transaction reads everything again)."""
        usage = current()

        async def work(tx: Any) -> None:
            restart()
            for cypher, params, take in queries:
                count(usage, 1)
                batch: list[tuple[Any, ...]] = []
                async for record in await tx.run(cypher, params):
                    batch.append(tuple(record.values()))
                    if len(batch) >= page:
                        take(batch)
                        batch = []
                take(batch)

        await self._transaction(work, write=False)

    async def write_tx(self, work: Callable[[Runner], Awaitable[T]]) -> T:
        """Run `work` in one managed write transaction (retried as a whole on transient errors)."""
        return await self._transaction(lambda tx: work(_runner(tx)), write=True)

    async def _transaction(self, work: Callable[[Any], Awaitable[T]], write: bool) -> T:
        """`work(tx)` in one managed transaction: one round trip; its statements are the requests
        (counted again when the driver runs `work` again after a transient error)."""
        await self.ready()
        count(current(), 0, 1)
        async with self._driver.session(database=self.database) as session:
            return await (session.execute_write if write else session.execute_read)(work)

    async def autocommit(self, cypher: str, params: Mapping[str, Any]) -> None:
        """Run one auto-commit query (needed for CALL { ... } IN TRANSACTIONS)."""
        await self.ready()
        count(current(), 1, 1)
        async with self._driver.session(database=self.database) as session:
            await (await session.run(cypher, params)).consume()

    async def release(self) -> None:
        """Drop one user; close the driver when none remain."""
        self._refs -= 1
        if self._refs <= 0 and self._driver is not None:
            driver, self._driver, self._ready = self._driver, None, False
            await driver.close()
