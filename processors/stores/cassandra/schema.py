"""Cassandra schema, prepared statements and an asyncio bridge for `cassandra-driver`.

Every statement below is a constant prepared once per connection; values travel only as bound
parameters. The keyspace name (configuration, not request data) is the one identifier that has
to appear in DDL text: it is checked against a strict pattern by `cql_identifier` first.

Tables (all partitioned by user + collection + something, so no query needs ALLOW FILTERING):

* ``triples_out  ((user, collection, s), lbl, p, o, o_lit, o_dt, o_lang)``: out-edges of an entity.
  ``lbl`` is true for rdfs:label edges, so a neighbour query excludes them with ``lbl = false``
  before its LIMIT.
* ``triples_in   ((user, collection, o, o_lit, o_dt, o_lang), lbl, p, s)``: in-edges of an object.
* ``triples_pred ((user, collection, p), s, o, o_lit, o_dt, o_lang)``: edges by predicate.
* ``predicates   ((user, collection), p)``: the predicates of a collection (small; used to scan
  or delete a collection).
* ``labels       ((user, collection, iri), label)``: rdfs:label of each IRI.
* ``entity_vectors ((user, collection, kind), iri, label, vec vector<float, VECTOR_DIMENSIONS>, vec_raw blob)``
  with an SAI cosine index on ``vec``; ANN queries restrict the partition (tenant + kind). ``vec_raw`` holds
  the same floats as bytes, which is what queries read back (decoded at once with numpy, where the driver
  decodes a vector one element at a time).
* ``entity_tokens ((user, collection, tok), iri, label)``: lexical label search.
* ``entity_names ((user, collection, name), iri)``: entities by normalised label (linking text).
* ``collections ((user), collection)``: a user's collections (written with their triples).
* ``load_state   ((user), collection)``: each collection's last load (protocol.LoadState).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import re
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from processors.accounting.usage import StoreUsage, count, current
from processors.stores.protocol import VECTOR_DIMENSIONS, int_literal

CONCURRENCY = 128  # in-flight requests per logical call
# Cassandra 5.0.x fails concurrent inserts into one SAI vector memtable index beyond a small pool
# ("Number of outstanding pooled objects has gone beyond the limit", CASSANDRA-21644): vector
# writes go out a few at a time and are retried if the replica still refuses one.
VECTOR_WRITE_CONCURRENCY = 2
VECTOR_WRITE_RETRIES = 8
IN_CHUNK = 100  # keys per IN (...) list

_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,47}")

TABLES = (
    "CREATE TABLE IF NOT EXISTS triples_out (user text, collection text, s text, lbl boolean, p text, o text,"
    " o_lit boolean, o_dt text, o_lang text, PRIMARY KEY ((user, collection, s), lbl, p, o, o_lit, o_dt, o_lang))",
    "CREATE TABLE IF NOT EXISTS triples_in (user text, collection text, o text, o_lit boolean, o_dt text,"
    " o_lang text, lbl boolean, p text, s text, PRIMARY KEY ((user, collection, o, o_lit, o_dt, o_lang), lbl, p, s))",
    "CREATE TABLE IF NOT EXISTS triples_pred (user text, collection text, p text, s text, o text, o_lit boolean,"
    " o_dt text, o_lang text, PRIMARY KEY ((user, collection, p), s, o, o_lit, o_dt, o_lang))",
    "CREATE TABLE IF NOT EXISTS predicates (user text, collection text, p text, PRIMARY KEY ((user, collection), p))",
    "CREATE TABLE IF NOT EXISTS labels (user text, collection text, iri text, label text,"
    " PRIMARY KEY ((user, collection, iri)))",
    "CREATE TABLE IF NOT EXISTS entity_vectors (user text, collection text, kind text, iri text, label text,"
    " vec vector<float, " + int_literal(VECTOR_DIMENSIONS) + ">, vec_raw blob,"
    " PRIMARY KEY ((user, collection, kind), iri))",
    "CREATE CUSTOM INDEX IF NOT EXISTS entity_vectors_vec ON entity_vectors (vec) USING 'StorageAttachedIndex'"
    " WITH OPTIONS = {'similarity_function': 'cosine'}",
    "CREATE TABLE IF NOT EXISTS entity_tokens (user text, collection text, tok text, iri text, label text,"
    " PRIMARY KEY ((user, collection, tok), iri))",
    "CREATE TABLE IF NOT EXISTS entity_names (user text, collection text, name text, iri text,"
    " PRIMARY KEY ((user, collection, name), iri))",
    "CREATE TABLE IF NOT EXISTS collections (user text, collection text, PRIMARY KEY ((user), collection))",
    "CREATE TABLE IF NOT EXISTS load_state (user text, collection text, started double, finished double,"
    " source text, triples bigint, vectors bigint, error text, PRIMARY KEY ((user), collection))",
    "CREATE TABLE IF NOT EXISTS vector_models (user text, collection text, model text, dimensions int,"
    " PRIMARY KEY ((user), collection))",
)
_LOAD_COLS = "started, finished, source, triples, vectors, error"  # LoadState.row() order

# Added after the first release: tables created before it get the column (idempotent).
MIGRATIONS = ("ALTER TABLE entity_vectors ADD vec_raw blob",)

_OUT_COLS = "INSERT INTO triples_out (user, collection, s, lbl, p, o, o_lit, o_dt, o_lang)"
_IN_COLS = "INSERT INTO triples_in (user, collection, o, o_lit, o_dt, o_lang, lbl, p, s)"
_OUT_KEY = "WHERE user = ? AND collection = ? AND s = ?"
_IN_KEY = "WHERE user = ? AND collection = ? AND o = ? AND o_lit = ? AND o_dt = ? AND o_lang = ?"
_OUT_IN = "WHERE user = ? AND collection = ? AND s IN ?"
_IN_IN = "WHERE user = ? AND collection = ? AND o IN ? AND o_lit = ? AND o_dt = ? AND o_lang = ?"
_OUT_SEL = "SELECT s, p, o, o_lit, o_dt, o_lang FROM triples_out "
_IN_SEL = "SELECT s, p, o, o_lit, o_dt, o_lang FROM triples_in "

STATEMENTS: dict[str, str] = {
    "ins_out": _OUT_COLS + " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "ins_in": _IN_COLS + " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "ins_pred": "INSERT INTO triples_pred (user, collection, p, s, o, o_lit, o_dt, o_lang)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "ins_predicate": "INSERT INTO predicates (user, collection, p) VALUES (?, ?, ?)",
    "ins_label": "INSERT INTO labels (user, collection, iri, label) VALUES (?, ?, ?, ?)",
    "ins_collection": "INSERT INTO collections (user, collection) VALUES (?, ?)",
    "collections": "SELECT collection FROM collections WHERE user = ?",
    "del_collection": "DELETE FROM collections WHERE user = ? AND collection = ?",
    # single triples
    "del_out_one": "DELETE FROM triples_out " + _OUT_KEY + " AND lbl = ? AND p = ? AND o = ? AND o_lit = ?"
    " AND o_dt = ? AND o_lang = ?",
    "del_in_one": "DELETE FROM triples_in " + _IN_KEY + " AND lbl = ? AND p = ? AND s = ?",
    "del_pred_one": "DELETE FROM triples_pred WHERE user = ? AND collection = ? AND p = ? AND s = ? AND o = ?"
    " AND o_lit = ? AND o_dt = ? AND o_lang = ?",
    # pattern / neighbours
    "out_s": _OUT_SEL + _OUT_KEY + " LIMIT ?",
    "out_s_all": _OUT_SEL + _OUT_KEY,
    "out_sp": _OUT_SEL + _OUT_KEY + " AND lbl = ? AND p = ? LIMIT ?",
    "out_spo": _OUT_SEL + _OUT_KEY + " AND lbl = ? AND p = ? AND o = ? AND o_lit = ? AND o_dt = ? AND o_lang = ?",
    "out_edges": _OUT_SEL + _OUT_KEY + " AND lbl = false LIMIT ?",
    # a whole frontier chunk in one request: the first N edges of each partition, as N queries would
    "out_edges_in": _OUT_SEL + _OUT_IN + " AND lbl = false PER PARTITION LIMIT ?",
    "out_sp_in": _OUT_SEL + _OUT_IN + " AND lbl = ? AND p = ? PER PARTITION LIMIT ?",
    "in_o": _IN_SEL + _IN_KEY + " LIMIT ?",
    "in_po": _IN_SEL + _IN_KEY + " AND lbl = ? AND p = ? LIMIT ?",
    "in_edges": _IN_SEL + _IN_KEY + " AND lbl = false LIMIT ?",
    "in_edges_in": _IN_SEL + _IN_IN + " AND lbl = false PER PARTITION LIMIT ?",
    "in_po_in": _IN_SEL + _IN_IN + " AND lbl = ? AND p = ? PER PARTITION LIMIT ?",
    "pred_p": "SELECT s, p, o, o_lit, o_dt, o_lang FROM triples_pred WHERE user = ? AND collection = ? AND p = ?"
    " LIMIT ?",
    "pred_all": "SELECT s, p, o, o_lit, o_dt, o_lang FROM triples_pred WHERE user = ? AND collection = ? AND p = ?",
    "predicates": "SELECT p FROM predicates WHERE user = ? AND collection = ?",
    "label": "SELECT iri, label FROM labels WHERE user = ? AND collection = ? AND iri = ?",
    "labels_in": "SELECT iri, label FROM labels WHERE user = ? AND collection = ? AND iri IN ?",
    # collection deletion
    "del_out": "DELETE FROM triples_out WHERE user = ? AND collection = ? AND s = ?",
    "del_in": "DELETE FROM triples_in " + _IN_KEY,
    "del_pred": "DELETE FROM triples_pred WHERE user = ? AND collection = ? AND p = ?",
    "del_predicates": "DELETE FROM predicates WHERE user = ? AND collection = ?",
    "del_label": "DELETE FROM labels WHERE user = ? AND collection = ? AND iri = ?",
    # entity index
    # vec feeds the SAI index; vec_raw (the same float32s, big-endian) is what queries read back:
    # the driver decodes a vector<float> one element at a time (~0.3-0.7 ms per 384-float vector)
    "ins_vec": "INSERT INTO entity_vectors (user, collection, kind, iri, label, vec, vec_raw)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)",
    "ins_token": "INSERT INTO entity_tokens (user, collection, tok, iri, label) VALUES (?, ?, ?, ?, ?)",
    "del_token": "DELETE FROM entity_tokens WHERE user = ? AND collection = ? AND tok = ? AND iri = ?",
    "vec_labels": "SELECT iri, label FROM entity_vectors WHERE user = ? AND collection = ? AND kind = ? AND iri IN ?",
    "vec_get": "SELECT iri, vec_raw FROM entity_vectors WHERE user = ? AND collection = ? AND kind IN ? AND iri IN ?",
    "vec_get_legacy": "SELECT iri, vec FROM entity_vectors WHERE user = ? AND collection = ? AND kind IN ?"
    " AND iri IN ?",
    "vec_ann": "SELECT iri, label, vec_raw FROM entity_vectors WHERE user = ? AND collection = ? AND kind = ?"
    " ORDER BY vec ANN OF ? LIMIT ?",
    "vec_all_labels": "SELECT iri, label FROM entity_vectors WHERE user = ? AND collection = ? AND kind = ?",
    "tokens": "SELECT tok, iri, label FROM entity_tokens WHERE user = ? AND collection = ? AND tok IN ?"
    " PER PARTITION LIMIT ?",
    "del_vec_kind": "DELETE FROM entity_vectors WHERE user = ? AND collection = ? AND kind = ?",
    "del_token_part": "DELETE FROM entity_tokens WHERE user = ? AND collection = ? AND tok = ?",
    "ins_name": "INSERT INTO entity_names (user, collection, name, iri) VALUES (?, ?, ?, ?)",
    "del_name": "DELETE FROM entity_names WHERE user = ? AND collection = ? AND name = ? AND iri = ?",
    "del_name_part": "DELETE FROM entity_names WHERE user = ? AND collection = ? AND name = ?",
    "named": "SELECT iri FROM entity_names WHERE user = ? AND collection = ? AND name = ? LIMIT 1",
    "del_vec": "DELETE FROM entity_vectors WHERE user = ? AND collection = ? AND kind = ? AND iri = ?",
    "count_entities": "SELECT count(*) FROM entity_vectors WHERE user = ? AND collection = ? AND kind = 'entity'",
    # load state
    "set_load": "INSERT INTO load_state (user, collection, " + _LOAD_COLS + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "get_load": "SELECT " + _LOAD_COLS + " FROM load_state WHERE user = ? AND collection = ?",
    "del_load": "DELETE FROM load_state WHERE user = ? AND collection = ?",
    # the model of a collection's vectors: claimed by its first write (a lightweight transaction)
    "get_vector_model": "SELECT model, dimensions FROM vector_models WHERE user = ? AND collection = ?",
    "claim_vector_model": "INSERT INTO vector_models (user, collection, model, dimensions) VALUES (?, ?, ?, ?)"
    " IF NOT EXISTS",
    "del_vector_model": "DELETE FROM vector_models WHERE user = ? AND collection = ?",
    "any_vector": "SELECT iri FROM entity_vectors WHERE user = ? AND collection = ? AND kind IN ('entity', 'predicate')"
    " LIMIT 1",
}


def cql_identifier(name: str) -> str:
    """`name` if it is a safe unquoted CQL identifier (lower-case letters, digits, _), else ValueError."""
    if not _IDENT.fullmatch(name):
        raise ValueError(f"invalid Cassandra keyspace name {name!r}: use [a-z_][a-z0-9_]* (max 48 chars)")
    return name


def _migrate(session: Any, keyspace: str) -> None:
    """Add the columns later releases read to tables an earlier release created."""
    have = {
        (r.table_name, r.column_name)
        for r in session.execute(
            "SELECT table_name, column_name FROM system_schema.columns WHERE keyspace_name = %s", (keyspace,)
        )
    }
    for ddl in MIGRATIONS:
        table, column = ddl.split()[2], ddl.split()[4]
        if (table, column) not in have:
            session.execute(ddl, timeout=120)


@functools.lru_cache(maxsize=256)
def _row_type(names: tuple[str, ...]) -> Any:
    # a lightweight transaction's result names a column `[applied]`: as a field, `applied`
    return collections.namedtuple("Row", [re.sub(r"\W", "", n) for n in names])  # type: ignore[misc]


def cached_namedtuple_factory(colnames: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[Any]:
    """Rows as named tuples, one class per column list: the driver's own factory builds a new
    namedtuple class (an exec) for every result page, which cost more than decoding the rows."""
    row = _row_type(tuple(colnames))
    return [row._make(r) for r in rows]


def raw_vector(v: Sequence[float]) -> bytes:
    """A vector as the `vec_raw` column stores it (float32, big-endian)."""
    return np.asarray(v, dtype=">f4").tobytes()


def in_chunks(keys: Sequence[str]) -> list[list[str]]:
    """`keys` in lists of at most IN_CHUNK, one `IN (...)` query each."""
    return [list(keys[i : i + IN_CHUNK]) for i in range(0, len(keys), IN_CHUNK)]


def vector_array(raw: bytes) -> np.ndarray:
    """The float32 array of a `vec_raw` value."""
    return np.frombuffer(raw, dtype=">f4").astype(np.float32)


class CassandraConnection:
    """One cluster session with the kgflow schema and prepared statements, shared by both stores.

    Connecting (blocking in the driver) runs in a worker thread on first use. Queries are sent
    with `execute_async`; their callbacks resolve asyncio futures with `call_soon_threadsafe`, so
    the event loop never blocks and one connection serves any loop. Reference counted: the last
    `release` shuts the cluster down.
    """

    def __init__(self, hosts: Sequence[str] | str, port: int = 9042, keyspace: str = "kgflow") -> None:
        self.hosts = [h.strip() for h in hosts.split(",")] if isinstance(hosts, str) else list(hosts)
        self.port = port
        self.keyspace = cql_identifier(keyspace)
        self._lock = threading.Lock()
        self._cluster: Any = None
        self._session: Any = None
        self._prepared: dict[str, Any] = {}
        self._refs = 0

    def acquire(self) -> CassandraConnection:
        """Count one more user of this connection."""
        with self._lock:
            self._refs += 1
        return self

    def connect(self) -> None:
        """Connect, create keyspace/tables/index if missing, prepare statements (blocking; idempotent)."""
        with self._lock:
            if self._session is not None:
                return
            from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
            from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

            # token-aware: each single-partition query goes straight to a replica of its partition
            profile = ExecutionProfile(
                load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()),
                row_factory=cached_namedtuple_factory,
            )
            cluster = Cluster(
                self.hosts, port=self.port, protocol_version=5, execution_profiles={EXEC_PROFILE_DEFAULT: profile}
            )
            try:
                session = cluster.connect()
                ks = cql_identifier(self.keyspace)
                session.execute(
                    "CREATE KEYSPACE IF NOT EXISTS " + ks + " WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}"
                )
                session.set_keyspace(ks)
                for ddl in TABLES:
                    session.execute(ddl, timeout=120)
                _migrate(session, ks)
                self._prepared = {name: session.prepare(cql) for name, cql in STATEMENTS.items()}
            except Exception:
                cluster.shutdown()
                raise
            self._cluster, self._session = cluster, session

    async def ready(self) -> None:
        """Connect in a worker thread unless already connected."""
        if self._session is None:
            await asyncio.to_thread(self.connect)

    def _start(
        self, name: str, params: Sequence[Any], page_all: bool, usage: StoreUsage | None
    ) -> asyncio.Future[list[Any]]:
        """Send one request; its future resolves with every row (all pages when `page_all`). The
        request and each further page fetched count as requests of `usage`."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[Any]] = loop.create_future()
        rows: list[Any] = []
        pages = [0]  # further pages fetched (counted when the call settles, on the event loop)
        count(usage, 1)
        rf = self._session.execute_async(self._prepared[name], params)

        def settle(result: list[Any] | None, exc: BaseException | None) -> None:
            count(usage, pages[0])
            pages[0] = 0
            if fut.done():
                return
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(result or [])

        def ok(page: Any) -> None:
            try:
                rows.extend(page or ())
                if page_all and rf.has_more_pages:
                    pages[0] += 1
                    rf.start_fetching_next_page()  # the same callbacks fire for the next page
                    return
            except Exception as exc:  # never let an error vanish in the driver's thread
                loop.call_soon_threadsafe(settle, None, exc)
                return
            loop.call_soon_threadsafe(settle, rows, None)

        def err(exc: BaseException) -> None:
            loop.call_soon_threadsafe(settle, None, exc)

        rf.add_callbacks(ok, err)
        return fut

    async def run(self, name: str, params: Sequence[Any], page_all: bool = False) -> list[Any]:
        """Execute one prepared statement by name; all pages when `page_all`."""
        await self.ready()
        usage = current()
        count(usage, 0, 1)
        return await self._start(name, params, page_all, usage)

    async def run_many(
        self,
        calls: Sequence[tuple[str, Sequence[Any]]],
        page_all: bool = False,
        concurrency: int = CONCURRENCY,
        write_retries: int = 0,
    ) -> list[list[Any]]:
        """Execute many prepared statements concurrently (one logical round trip); results in order.

        `write_retries` re-sends an (idempotent) write that the replica failed to apply.
        """
        if not calls:
            return []
        await self.ready()
        usage = current()
        count(usage, 0, 1)  # one round trip: every request of the call is in flight together
        gate = asyncio.Semaphore(concurrency)

        async def one(name: str, params: Sequence[Any]) -> list[Any]:
            async with gate:
                for attempt in range(write_retries + 1):
                    try:
                        return await self._start(name, params, page_all, usage)
                    except Exception as exc:
                        if attempt >= write_retries or type(exc).__name__ != "WriteFailure":
                            raise
                        await asyncio.sleep(0.05 * (attempt + 1))
                raise AssertionError("unreachable")

        return list(await asyncio.gather(*(one(n, p) for n, p in calls)))

    async def release(self) -> None:
        """Drop one user; shut the cluster down (in a thread) when none remain."""
        with self._lock:
            self._refs -= 1
            cluster = self._cluster if self._refs <= 0 else None
            if cluster is not None:
                self._cluster = self._session = None
        if cluster is not None:
            await asyncio.to_thread(cluster.shutdown)
