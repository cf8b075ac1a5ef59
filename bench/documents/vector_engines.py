"""The embedded vector indexes the vector-index section compares (bench/documents/vector_index.py),
each behind one small interface: build from blocks of unit vectors, search the top k, search a
scope (the rows of some documents), say its bytes on disk.

- `ivf`: today's index, processors/stores/sqlite/vector_lists.py through its real code, on a SQLite
  file with the store's pragmas; a scope is its `allowed` documents (filtered inside the probed
  lists: the store's path for scopes above its EXACT_SCOPE, 50,000 chunks; it searches smaller
  ones exactly). `rescored` is the store's search: RESCORE * k hits rescored with full vectors.
- `sqlite-vec`: a `vec0` table of int8 codes (cosine, exact scan) with user and collection as
  partition keys and the document id as a metadata column, so tenant and scope are in the query.
- `usearch` (`usearch-f16`): an HNSW graph of int8 (float16) vectors, one index file per
  collection; a scope is an exact search over the scope's own vectors (read back by key).
- `ivf-resident`: `ivf` with the store's resident copy (processors/stores/sqlite/resident_lists.py:
  the same lists as faiss product-quantizer codes in memory, made at the end of the build, as the
  store makes it at a large space's first search); a scope takes `ivf`'s path, as in the store.
- `faiss`: IVF with 8-bit scalar quantisation (SQ8), lists of `ivf`'s trained size, probing about
  as many items as `ivf`; a scope is an id selector inside the search, at the same probe and over
  every list.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import numpy as np

from processors.algorithms.vectors import quantize
from processors.stores.sqlite.passages import RESCORE
from processors.stores.sqlite.resident_lists import ResidentLists, key_item
from processors.stores.sqlite.vector_lists import LIST_TARGET, PROBE, SCHEMA, VectorLists
from schemas.tenant import Tenant

USER, COLLECTION, SPACE = "bench", "vectors", "chunk"
TENANT = Tenant(USER, COLLECTION)
WRITE_BATCH = 2000  # rows per write transaction, as the document-store writer's batches
BUILD_THREADS = 2  # the machine's cores, for the libraries that build in parallel


class Engine(Protocol):
    """One index under measurement."""

    def build(self, blocks: Iterator[tuple[np.ndarray, np.ndarray]]) -> None:
        """Index (row ids, unit vectors) blocks."""

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        """The ids of the `k` best rows for unit `q`, best first."""

    def scoped(self, q: np.ndarray, k: int, docs: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The same among the rows of documents `docs` (`rows`: their row ids, for libraries that
        filter by id)."""

    def bytes(self) -> int:
        """What the index takes on disk."""


def _file_bytes(*paths: Path) -> int:
    return sum(p.stat().st_size for p in paths if p.exists())


class TodayIvf:
    """processors/stores/sqlite/vector_lists.py, as the SQLite store uses it."""

    def __init__(self, home: Path, docs_per: int) -> None:
        self.path = home / "ivf.sqlite"
        self.docs_per = docs_per
        self.conn = sqlite3.connect(self.path, isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "cache_size=-65536", "mmap_size=1073741824"):
            self.conn.execute("PRAGMA " + pragma)
        self.conn.executescript(SCHEMA)
        self.index = VectorLists(ResidentLists(resident_at=2**62))  # the rows' path alone

    def item(self, row: int) -> str:
        """The index's id of a row: a chunk id, as the store's (the copy keys items by their 64-bit
        hex; ids also order a list's rows, so both engines build the same lists)."""
        return key_item(row - (1 << 63))

    def row(self, item: str) -> int:
        """The row of an index id."""
        return int(item[1:], 16)

    def build(self, blocks: Iterator[tuple[np.ndarray, np.ndarray]]) -> None:
        for ids, vecs in blocks:
            for at in range(0, len(ids), WRITE_BATCH):
                batch = ids[at : at + WRITE_BATCH].tolist()
                items = [(self.item(i), str(i // self.docs_per), vecs[at + n]) for n, i in enumerate(batch)]
                self.conn.execute("BEGIN")
                self.index.add(self.conn, TENANT, SPACE, items)
                self.conn.execute("COMMIT")
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        return np.asarray([self.row(i) for i, _ in self.index.search(self.conn, TENANT, SPACE, q, k)])

    def scoped(self, q: np.ndarray, k: int, docs: np.ndarray, rows: np.ndarray) -> np.ndarray:
        allowed = {str(d) for d in docs.tolist()}
        return np.asarray([self.row(i) for i, _ in self.index.search(self.conn, TENANT, SPACE, q, k, allowed=allowed)])

    def bytes(self) -> int:
        return _file_bytes(self.path, Path(str(self.path) + "-wal"))

    def rescored(self, q: np.ndarray, k: int, vectors: np.ndarray) -> np.ndarray:
        """As the store searches: RESCORE * k hits rescored with the full vectors (here from memory,
        where the store reads them from its chunk rows)."""
        ids = np.asarray([self.row(i) for i, _ in self.index.search(self.conn, TENANT, SPACE, q, RESCORE * k)])
        if not len(ids):
            return ids
        order = np.sort(ids)  # a memory map reads faster in order
        return order[np.argsort(-(np.asarray(vectors[order]) @ q), kind="stable")[:k]]


class ResidentIvf(TodayIvf):
    """`TodayIvf` with the store's resident copy of its lists, made (and saved) at the build's end:
    the same lists as `TodayIvf`'s of the same rows, so the two differ by the copy alone."""

    def __init__(self, home: Path, docs_per: int) -> None:
        super().__init__(home, docs_per)
        self.index = VectorLists(ResidentLists(background=False))

    def build(self, blocks: Iterator[tuple[np.ndarray, np.ndarray]]) -> None:
        super().build(blocks)
        dims = len(self.conn.execute("SELECT code FROM vector_items LIMIT 1").fetchone()[0])
        self.index.search(self.conn, TENANT, SPACE, np.full(dims, dims**-0.5, dtype=np.float32), 1)  # makes the copy

    def bytes(self) -> int:
        return super().bytes() + _file_bytes(*self.path.parent.glob(f"{self.path.name}.resident-*"))


def _int8(vecs: np.ndarray) -> np.ndarray:
    """Codes of a scale per row: cosine ignores the scale, so the codes alone are the vector."""
    return quantize(np.ascontiguousarray(vecs, dtype=np.float32))[1]


class SqliteVec:
    """sqlite-vec's vec0 table (through apsw: this Python's sqlite3 cannot load extensions)."""

    def __init__(self, home: Path, docs_per: int) -> None:
        import apsw
        import sqlite_vec

        self.path = home / "sqlite-vec.sqlite"
        self.docs_per = docs_per
        self.conn = apsw.Connection(str(self.path))
        self.conn.enable_load_extension(True)
        self.conn.load_extension(sqlite_vec.loadable_path())
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS chunks USING vec0(user TEXT PARTITION KEY,"
            " collection TEXT PARTITION KEY, document_id TEXT, embedding int8[384] distance_metric=cosine)"
        )

    def build(self, blocks: Iterator[tuple[np.ndarray, np.ndarray]]) -> None:
        sql = "INSERT INTO chunks(rowid, user, collection, document_id, embedding) VALUES (?,?,?,?,vec_int8(?))"
        for ids, vecs in blocks:
            codes = _int8(vecs)
            for at in range(0, len(ids), WRITE_BATCH):
                batch = ids[at : at + WRITE_BATCH].tolist()
                with self.conn:
                    self.conn.executemany(
                        sql, [(i, USER, COLLECTION, str(i // self.docs_per), codes[at + n].tobytes())
                              for n, i in enumerate(batch)],
                    )  # fmt: skip
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        rows = self.conn.execute(
            "SELECT rowid FROM chunks WHERE embedding MATCH vec_int8(?) AND k = ? AND user = ? AND collection = ?",
            (_int8(q[None])[0].tobytes(), k, USER, COLLECTION),
        ).fetchall()
        return np.asarray([r[0] for r in rows])

    def scoped(self, q: np.ndarray, k: int, docs: np.ndarray, rows: np.ndarray) -> np.ndarray:
        found = self.conn.execute(
            "SELECT rowid FROM chunks WHERE embedding MATCH vec_int8(?) AND k = ? AND user = ? AND collection = ?"
            " AND document_id IN (SELECT value FROM json_each(?))",
            (_int8(q[None])[0].tobytes(), k, USER, COLLECTION, json.dumps([str(d) for d in docs.tolist()])),
        ).fetchall()
        return np.asarray([r[0] for r in found])

    def bytes(self) -> int:
        return _file_bytes(self.path, Path(str(self.path) + "-wal"))


class Usearch:
    """usearch's HNSW index (cosine) of int8 or float16 vectors, saved to a file."""

    def __init__(self, home: Path, dtype: str) -> None:
        from usearch.index import Index

        self.path = home / "usearch.index"
        self.index = Index(ndim=384, metric="cos", dtype=dtype)

    def build(self, blocks: Iterator[tuple[np.ndarray, np.ndarray]]) -> None:
        for ids, vecs in blocks:
            self.index.add(ids, np.ascontiguousarray(vecs, dtype=np.float32), threads=BUILD_THREADS)
        self.index.save(str(self.path))

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        return np.asarray(self.index.search(q, k, threads=1).keys)

    def scoped(self, q: np.ndarray, k: int, docs: np.ndarray, rows: np.ndarray) -> np.ndarray:
        from usearch.index import search

        vecs = np.asarray(self.index.get(rows, dtype=np.float32), dtype=np.float32)
        found = search(vecs, q, k, metric="cos", exact=True, threads=1)
        return rows[np.asarray(found.keys)]

    def bytes(self) -> int:
        return _file_bytes(self.path)


class FaissIvfSq8:
    """faiss's IndexIVFScalarQuantizer (8-bit) on inner product of unit vectors."""

    def __init__(self, home: Path, size: int) -> None:
        import faiss

        self.faiss = faiss
        self.path = home / "faiss.index"
        self.nlist = max(16, size // LIST_TARGET)  # lists of today's trained size
        self.nprobe = max(1, round(PROBE / (size / self.nlist)))  # ~ the items `ivf` reads
        self.train_on = min(size, 40 * self.nlist)  # faiss asks for 39 a list at least
        self.quantizer = faiss.IndexFlatIP(384)
        self.index = faiss.IndexIVFScalarQuantizer(
            self.quantizer, 384, self.nlist, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
        )

    def build(self, blocks: Iterator[tuple[np.ndarray, np.ndarray]]) -> None:
        self.faiss.omp_set_num_threads(BUILD_THREADS)
        held: list[tuple[np.ndarray, np.ndarray]] = []  # blocks kept until there is enough to train on
        for ids, vecs in blocks:
            held.append((ids.astype(np.int64), np.ascontiguousarray(vecs, dtype=np.float32)))
            if self.index.is_trained or sum(len(i) for i, _ in held) >= self.train_on:
                self._add(held)
                held = []
        self._add(held)
        self.faiss.write_index(self.index, str(self.path))
        self.faiss.omp_set_num_threads(1)

    def _add(self, held: list[tuple[np.ndarray, np.ndarray]]) -> None:
        if not held:
            return
        ids, vecs = np.concatenate([i for i, _ in held]), np.concatenate([v for _, v in held])
        if not self.index.is_trained:
            self.index.train(vecs[: self.train_on])
        self.index.add_with_ids(vecs, ids)

    def _search(self, q: np.ndarray, k: int, params: object) -> np.ndarray:
        _, found = self.index.search(q[None].astype(np.float32), k, params=params)
        return found[0][found[0] >= 0]

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        return self._search(q, k, self.faiss.SearchParametersIVF(nprobe=self.nprobe))

    def scoped(self, q: np.ndarray, k: int, docs: np.ndarray, rows: np.ndarray) -> np.ndarray:
        sel = self.faiss.IDSelectorBatch(rows.astype(np.int64))
        return self._search(q, k, self.faiss.SearchParametersIVF(nprobe=self.nprobe, sel=sel))

    def scoped_all_lists(self, q: np.ndarray, k: int, rows: np.ndarray) -> np.ndarray:
        """The scope over every list: exact up to SQ8, at the cost of a full scan."""
        sel = self.faiss.IDSelectorBatch(rows.astype(np.int64))
        return self._search(q, k, self.faiss.SearchParametersIVF(nprobe=self.nlist, sel=sel))

    def bytes(self) -> int:
        return _file_bytes(self.path)


ENGINES = ("ivf", "ivf-resident", "sqlite-vec", "faiss", "usearch", "usearch-f16")


def make(name: str, home: Path, docs_per: int, size: int) -> Engine:
    """A fresh engine by name, its files under `home`."""
    if name == "ivf":
        return TodayIvf(home, docs_per)
    if name == "ivf-resident":
        return ResidentIvf(home, docs_per)
    if name == "sqlite-vec":
        return SqliteVec(home, docs_per)
    if name in ("usearch", "usearch-f16"):
        return Usearch(home, "f16" if name.endswith("f16") else "i8")
    if name == "faiss":
        return FaissIvfSq8(home, size)
    raise ValueError(f"unknown engine {name!r}: one of {', '.join(ENGINES)}")
