"""A vector index inside SQLite: inverted lists (IVF) of int8 codes, per collection and space
(`chunk`, `relation`, `community-<level>`), so a search reads a bounded share of a collection
from the file instead of holding the collection's vectors in the process.

- A space starts as one list without a centroid (searched whole). When it passes `TRAIN_AT`
  items, k-means over its items makes `TRAIN_AT // LIST_TARGET` lists; from then on a new item
  joins the list of its nearest centroid, and a list grown past `SPLIT_AT` items is split in two
  by 2-means over its own members. A write touches its own items and at most one list's members:
  nothing is rebuilt as the collection grows.
- A search scores the centroids (cached per space, checked against the space's version) and reads
  the nearest lists until it has `probe` items, then scores their int8 codes; the caller rescores
  the best with the full vectors it keeps elsewhere. With `allowed` documents (a scope), the
  document predicate is inside the list query. The lists read are kept (list_codes.ListCache,
  bounded): the next question, or the follow-up round of this one, reads only the lists it has
  not read yet.
- Each list carries a stamp: the space's version when the list last changed. A kept list (and a
  small space's kept codes, list by list) stays valid while its stamp holds, so after a write the
  next search reads again only the lists the write changed, not the whole space (issue 38: after
  a one-document write the next question re-read every list, 0.4-1.3 s at 10k chunks).

Every query is constant SQL with parameters; `space` is a parameter, never pasted.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from processors.algorithms.vectors import kmeans, nearest_rows, quantize, unit_rows
from processors.stores.sqlite.list_codes import Codes, ListCache, best_each, best_of_lists, of_docs
from processors.stores.sqlite.resident_lists import ResidentLists
from schemas.tenant import Tenant

TRAIN_AT = 4096
LIST_TARGET = 512
SPLIT_AT = 2048
PROBE = 8192  # items a search reads (whole lists, nearest first)
# A space of at most PROBE items is searched whole: its codes stay in memory until its version
# changes, for at most CACHED_SPACES spaces per file (each at most PROBE x dims bytes of codes plus
# its ids: about 4 MB at 384 dims, so at most about 32 MB).
CACHED_SPACES = 8
MAX_TRAIN_LISTS = 4096  # lists a first training makes (a backfill of a large collection)
TRAIN_SAMPLE = 64  # items per list k-means trains on (the rest are assigned to the nearest)

SCHEMA = """
CREATE TABLE IF NOT EXISTS vector_spaces (
    user TEXT NOT NULL, collection TEXT NOT NULL, space TEXT NOT NULL, version INTEGER NOT NULL,
    items INTEGER NOT NULL, lists INTEGER NOT NULL,
    PRIMARY KEY (user, collection, space)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vector_lists (
    user TEXT NOT NULL, collection TEXT NOT NULL, space TEXT NOT NULL, list INTEGER NOT NULL,
    centroid BLOB, size INTEGER NOT NULL, stamp INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (user, collection, space, list)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vector_items (
    user TEXT NOT NULL, collection TEXT NOT NULL, space TEXT NOT NULL, list INTEGER NOT NULL,
    item TEXT NOT NULL, document_id TEXT NOT NULL, scale REAL NOT NULL, code BLOB NOT NULL,
    PRIMARY KEY (user, collection, space, list, item)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS vector_items_by_item ON vector_items(user, collection, space, item);
"""

_SPACE = "SELECT version, items, lists FROM vector_spaces WHERE user = ? AND collection = ? AND space = ?"
_CENTROIDS = (
    "SELECT list, centroid, size, stamp FROM vector_lists WHERE user = ? AND collection = ? AND space = ? ORDER BY list"
)
# The lists of ?4 (JSON array) stamped with the space's version (after the write's own bump).
_STAMP = (
    "UPDATE vector_lists SET stamp = (SELECT version FROM vector_spaces WHERE user = ?1 AND collection = ?2"
    " AND space = ?3) WHERE user = ?1 AND collection = ?2 AND space = ?3 AND list IN (SELECT value FROM json_each(?4))"
)
_INSERT_LIST = "INSERT INTO vector_lists (user, collection, space, list, centroid, size) VALUES (?,?,?,?,?,?)"
_LIST_ITEMS = (
    "SELECT item, document_id, scale, code FROM vector_items WHERE user = ?1 AND collection = ?2 AND space = ?3"
    " AND list = ?4"
)
_LISTS_ITEMS = (
    "SELECT list, item, document_id, scale, code FROM vector_items WHERE user = ?1 AND collection = ?2"
    " AND space = ?3 AND list IN (SELECT value FROM json_each(?4))"
)
_ITEM_LISTS = (
    "SELECT item, list FROM vector_items INDEXED BY vector_items_by_item WHERE user = ? AND collection = ?"
    " AND space = ? AND item IN (SELECT value FROM json_each(?))"
)
_SPACE_ITEMS = "SELECT item, scale, code FROM vector_items WHERE user = ? AND collection = ? AND space = ?"
_ITEM_CODES = (
    "SELECT item, scale, code FROM vector_items INDEXED BY vector_items_by_item WHERE user = ? AND collection = ?"
    " AND space IN (SELECT value FROM json_each(?)) AND item IN (SELECT value FROM json_each(?))"
)


@dataclass
class Centroids:
    """A space's lists as last read: version, list ids, sizes, unit centroids (None: untrained) and
    each list's stamp."""

    version: int
    lists: list[int]
    sizes: list[int]
    matrix: np.ndarray | None
    stamps: dict[int, int]


def migrate(conn: sqlite3.Connection) -> None:
    """Give a file's lists their stamp (0: as they were before any write since)."""
    cols = [r[1] for r in conn.execute("PRAGMA table_info(vector_lists)")]
    if cols and "stamp" not in cols:
        conn.execute("ALTER TABLE vector_lists ADD COLUMN stamp INTEGER NOT NULL DEFAULT 0")


class VectorLists:
    """The IVF index of a SQLite file's collections (see the module docstring)."""

    def __init__(self, resident: ResidentLists | None = None) -> None:
        self.resident = resident or ResidentLists()  # large spaces' lists held in the process
        self._cache: dict[tuple[str, str, str], Centroids] = {}
        # small spaces' codes by (user, collection, space): (version, each list's (stamp, codes), all of
        # them joined), least recently used first
        self._codes: OrderedDict[tuple[str, str, str], tuple[int, dict[int, tuple[int, Codes]], Codes]] = OrderedDict()
        self._lock = threading.Lock()  # searches run on several pool threads
        self._lists = ListCache()  # a large space's lists as searches last read them

    # --- writes (inside the caller's transaction) -----------------------------------------------
    def add(
        self, conn: sqlite3.Connection, tenant: Tenant, space: str,
        items: Sequence[tuple[str, str, np.ndarray]],
    ) -> None:  # fmt: skip
        """Index `items` (item id, document id, vector); an item already indexed moves."""
        if not items:
            return
        self.remove(conn, tenant, space, [i for i, _, _ in items])
        cents = self._centroids(conn, tenant, space, cached=False)
        vecs = unit_rows(np.stack([v for _, _, v in items]))
        if cents.matrix is None:
            lists = np.zeros(len(items), dtype=np.int64)
        else:
            lists = np.asarray(cents.lists)[np.argmax(vecs @ cents.matrix.T, axis=1)]
        self._insert(conn, tenant, space, [(i, d) for i, d, _ in items], vecs, lists)
        self._bump(conn, tenant, space, len(items))
        touched = set(lists.tolist())
        self._stamp(conn, tenant, space, touched | self._rebalance(conn, tenant, space, touched))

    def remove(self, conn: sqlite3.Connection, tenant: Tenant, space: str, items: Sequence[str]) -> None:
        """Drop `items` from the index (ids not indexed are ignored)."""
        if not items:
            return
        found = conn.execute(_ITEM_LISTS, (tenant.user, tenant.collection, space, json.dumps(list(items)))).fetchall()
        if not found:
            return
        conn.executemany(
            "DELETE FROM vector_items WHERE user = ? AND collection = ? AND space = ? AND list = ? AND item = ?",
            [(tenant.user, tenant.collection, space, lst, item) for item, lst in found],
        )
        per_list: dict[int, int] = {}
        for _, lst in found:
            per_list[lst] = per_list.get(lst, 0) + 1
        conn.executemany(
            "UPDATE vector_lists SET size = size - ? WHERE user = ? AND collection = ? AND space = ? AND list = ?",
            [(n, tenant.user, tenant.collection, space, lst) for lst, n in per_list.items()],
        )
        self._bump(conn, tenant, space, -len(found))
        self._stamp(conn, tenant, space, set(per_list))

    def drop(self, conn: sqlite3.Connection, tenant: Tenant, space: str | None = None) -> None:
        """Forget a collection's spaces (one, or all), their resident copies and files too."""
        args = (tenant.user, tenant.collection, space)
        spaces = conn.execute("SELECT space FROM vector_spaces WHERE user = ? AND collection = ? AND (?3 IS NULL"
                              " OR space = ?3)", args).fetchall()  # fmt: skip
        self.resident.discard(conn, [(tenant.user, tenant.collection, r[0]) for r in spaces])
        for table in ("vector_items", "vector_lists", "vector_spaces"):
            conn.execute(
                "DELETE FROM " + table + " WHERE user = ? AND collection = ? AND (?3 IS NULL OR space = ?3)", args
            )

    # --- reads ------------------------------------------------------------------------------------
    def search(
        self, conn: sqlite3.Connection, tenant: Tenant, space: str, q: np.ndarray, k: int,
        allowed: Collection[str] | None = None, probe: int = PROBE, whole_max: int | None = None,
    ) -> list[tuple[str, float]]:  # fmt: skip
        """(item, approximate cosine) of the best `k` items of the lists nearest unit `q` (only
        items of `allowed` documents, when given), best first (see `search_many`)."""
        return self.search_many(conn, tenant, space, [q], k, allowed, probe, whole_max)[0]

    def search_many(
        self, conn: sqlite3.Connection, tenant: Tenant, space: str, qs: Sequence[np.ndarray], k: int,
        allowed: Collection[str] | None = None, probe: int = PROBE, whole_max: int | None = None,
    ) -> list[list[tuple[str, float]]]:  # fmt: skip
        """`search` for each unit vector of `qs`. One statement checks the space's version; a
        space of at most `whole_max` items (default: `probe`) is then scored whole from its cached
        codes, a larger one reads the lists nearest each vector in one more statement."""
        cents = self._centroids(conn, tenant, space)
        if not cents.lists or not qs:
            return [[] for _ in qs]
        if sum(cents.sizes) <= (probe if whole_max is None else whole_max):
            whole = self._whole(conn, tenant, space, cents)
            return best_each(whole if allowed is None else of_docs(whole, allowed), qs, k)
        picks = [_nearest_lists(cents, q, probe) for q in qs]
        key = (tenant.user, tenant.collection, space)
        if allowed is None:  # a large space's copy in memory, once made (resident_lists.py)
            sizes = dict(zip(cents.lists, cents.sizes, strict=True))
            read = (lambda c, lists: self._read(c, tenant, space, lists),
                    lambda c, items: self.codes(c, tenant, [space], items))  # fmt: skip
            hits = self.resident.search(conn, key, (cents.stamps, sizes), read, picks, qs, k)
            if hits is not None:
                return hits
        wanted = list(dict.fromkeys(x for p in picks for x in p))
        found = self._lists.lists(key, cents.stamps, wanted, lambda lists: self._read(conn, tenant, space, lists))
        if allowed is not None:
            found = {x: of_docs(c, allowed) for x, c in found.items()}
        return best_of_lists(found, picks, qs, k)

    def codes(
        self, conn: sqlite3.Connection, tenant: Tenant, spaces: Sequence[str], items: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """The dequantised vectors (scale × int8 code, as `search` scores them) of `items` indexed in
        any of `spaces`, read by key."""
        args = (tenant.user, tenant.collection, json.dumps(list(spaces)), json.dumps(list(dict.fromkeys(items))))
        return {
            str(item): np.frombuffer(code, dtype=np.int8).astype(np.float32) * np.float32(scale)
            for item, scale, code in conn.execute(_ITEM_CODES, args)
        }

    def size(self, conn: sqlite3.Connection, tenant: Tenant, space: str) -> tuple[int, int]:
        """(version, items) of a space ((0, 0): none)."""
        row = conn.execute(_SPACE, (tenant.user, tenant.collection, space)).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def _centroids(self, conn: sqlite3.Connection, tenant: Tenant, space: str,
                   cached: bool = True) -> Centroids:  # fmt: skip
        key = (tenant.user, tenant.collection, space)
        row = conn.execute(_SPACE, key).fetchone()
        version = int(row[0]) if row else 0
        hit = self._cache.get(key)
        if cached and hit is not None and hit.version == version:
            return hit
        rows = conn.execute(_CENTROIDS, key).fetchall()
        matrix = None
        if rows and rows[0][1] is not None:
            matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        stamps = {int(r[0]): int(r[3]) for r in rows}
        cents = Centroids(version, [int(r[0]) for r in rows], [int(r[2]) for r in rows], matrix, stamps)
        self._cache[key] = cents
        return cents

    def _whole(self, conn: sqlite3.Connection, tenant: Tenant, space: str, cents: Centroids) -> Codes:
        """Every item of a small space, from the cache while the space's version holds; after a
        write, the lists whose stamp moved are read again (one statement) and the rest kept. At
        most CACHED_SPACES spaces, least recently used out."""
        key = (tenant.user, tenant.collection, space)
        with self._lock:
            hit = self._codes.get(key)
            if hit is not None and hit[0] == cents.version:
                self._codes.move_to_end(key)
                return hit[2]
        kept = hit[1] if hit is not None else {}
        each = {x: kept[x] for x in cents.lists if x in kept and kept[x][0] == cents.stamps[x]}
        stale = [x for x in cents.lists if x not in each]
        if stale:
            fresh = self._read(conn, tenant, space, stale).kept_lists(stale)
            each.update({x: (cents.stamps[x], fresh[x]) for x in stale})
        codes = Codes.joined([each[x][1] for x in cents.lists])
        with self._lock:
            self._codes[key] = (cents.version, each, codes)
            self._codes.move_to_end(key)
            while len(self._codes) > CACHED_SPACES:
                self._codes.popitem(last=False)
        return codes

    def _read(self, conn: sqlite3.Connection, tenant: Tenant, space: str, lists: Sequence[int]) -> Codes:
        """The items of `lists` (one statement), in the order of `lists`."""
        args = (tenant.user, tenant.collection, space, json.dumps([int(x) for x in lists]))
        rows = conn.execute(_LISTS_ITEMS, args).fetchall()
        if not rows:
            return Codes.empty()
        rank = {lst: i for i, lst in enumerate(lists)}
        rows.sort(key=lambda r: rank[r[0]])  # stable: within a list, the stored order
        found, ids, docs, scales, blobs = zip(*rows, strict=True)
        codes = np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(rows), -1)
        return Codes(list(ids), list(docs), codes, np.asarray(scales, dtype=np.float32), np.asarray(found))

    def _insert(
        self, conn: sqlite3.Connection, tenant: Tenant, space: str,
        keys: Sequence[tuple[str, str]], vecs: np.ndarray, lists: np.ndarray,
    ) -> None:  # fmt: skip
        scales, codes = quantize(vecs)
        conn.executemany(
            "INSERT INTO vector_items VALUES (?,?,?,?,?,?,?,?)",
            [(tenant.user, tenant.collection, space, int(lst), item, doc, float(s), c.tobytes())
             for (item, doc), lst, s, c in zip(keys, lists, scales, codes, strict=True)],
        )  # fmt: skip
        counts = np.unique(lists, return_counts=True)
        conn.executemany(
            "INSERT INTO vector_lists (user, collection, space, list, centroid, size) VALUES (?,?,?,?,NULL,?)"
            " ON CONFLICT DO UPDATE SET size = size + excluded.size",
            [(tenant.user, tenant.collection, space, int(lst), int(n)) for lst, n in zip(*counts, strict=True)],
        )

    def _bump(self, conn: sqlite3.Connection, tenant: Tenant, space: str, added: int) -> None:
        # A new space's version starts at the clock (ns), not 1: a space deleted and made again
        # (a community replace, a collection delete) must not repeat a version a cache holds.
        conn.execute(
            "INSERT INTO vector_spaces VALUES (?,?,?,?,?,1) ON CONFLICT DO UPDATE SET version = version + 1,"
            " items = items + excluded.items",
            (tenant.user, tenant.collection, space, time.time_ns(), added),
        )

    def _rebalance(self, conn: sqlite3.Connection, tenant: Tenant, space: str, touched: set[int]) -> set[int]:
        """Train an untrained space that passed TRAIN_AT; split a touched list past SPLIT_AT. Returns
        the lists made or changed."""
        cents = self._centroids(conn, tenant, space, cached=False)
        sizes = dict(zip(cents.lists, cents.sizes, strict=True))
        if cents.matrix is None:
            items = sum(sizes.values())
            if items >= TRAIN_AT:
                return self._partition(conn, tenant, space, 0, min(MAX_TRAIN_LISTS, items // LIST_TARGET), cents)
            return set()
        made: set[int] = set()
        for lst in sorted(touched):
            if sizes.get(lst, 0) > SPLIT_AT:
                made |= self._partition(conn, tenant, space, lst, 2,
                                        self._centroids(conn, tenant, space, cached=False))  # fmt: skip
        return made

    def _stamp(self, conn: sqlite3.Connection, tenant: Tenant, space: str, lists: set[int]) -> None:
        """Stamp the lists a write changed with the space's version after it. The version is new
        (every change bumps it; a new space's starts at the clock), so no earlier content of any
        list carries it. The centroids kept here predate the stamps: dropped, read again."""
        conn.execute(_STAMP, (tenant.user, tenant.collection, space, json.dumps(sorted(lists))))
        self._cache.pop((tenant.user, tenant.collection, space), None)

    def _partition(
        self, conn: sqlite3.Connection, tenant: Tenant, space: str, lst: int, parts: int,
        cents: Centroids,
    ) -> set[int]:  # fmt: skip
        """Replace list `lst` by `parts` lists (k-means over its members), reassigning only them;
        returns the lists made (`lst` among them)."""
        rows = conn.execute(_LIST_ITEMS, (tenant.user, tenant.collection, space, lst)).fetchall()
        codes = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.int8).reshape(len(rows), -1)
        vecs = unit_rows(codes)
        sample = vecs
        if len(vecs) > TRAIN_SAMPLE * parts:  # train on a sample, then assign everything
            sample = vecs[np.random.default_rng(len(rows)).choice(len(vecs), TRAIN_SAMPLE * parts, replace=False)]
        centroids, _ = kmeans(sample, parts, seed=len(rows))
        labels = nearest_rows(vecs, centroids)
        next_id = max(cents.lists) + 1
        new_ids = np.asarray([lst, *range(next_id, next_id + parts - 1)])
        conn.execute(
            "DELETE FROM vector_items WHERE user = ? AND collection = ? AND space = ? AND list = ?",
            (tenant.user, tenant.collection, space, lst),
        )
        conn.execute(
            "DELETE FROM vector_lists WHERE user = ? AND collection = ? AND space = ? AND list = ?",
            (tenant.user, tenant.collection, space, lst),
        )
        conn.executemany(
            "INSERT INTO vector_items VALUES (?,?,?,?,?,?,?,?)",
            [(tenant.user, tenant.collection, space, int(new_ids[label]), r[0], r[1], r[2], r[3])
             for r, label in zip(rows, labels.tolist(), strict=True)],
        )  # fmt: skip
        sizes = np.bincount(labels, minlength=parts)
        conn.executemany(
            _INSERT_LIST,
            [(tenant.user, tenant.collection, space, int(i), centroids[n].astype(np.float32).tobytes(), int(sizes[n]))
             for n, i in enumerate(new_ids.tolist())],
        )  # fmt: skip
        conn.execute(
            "UPDATE vector_spaces SET version = version + 1, lists = (SELECT count(*) FROM vector_lists"
            " WHERE user = ?1 AND collection = ?2 AND space = ?3) WHERE user = ?1 AND collection = ?2 AND space = ?3",
            (tenant.user, tenant.collection, space),
        )
        return {int(i) for i in new_ids.tolist()}


def _nearest_lists(cents: Centroids, q: np.ndarray, probe: int) -> list[int]:
    """The lists nearest unit `q`, nearest first, until they hold `probe` items."""
    order = range(len(cents.lists)) if cents.matrix is None else np.argsort(-(cents.matrix @ q), kind="stable")
    out: list[int] = []
    read = 0
    for n in order:
        out.append(cents.lists[int(n)])
        read += cents.sizes[int(n)]
        if read >= probe:
            break
    return out
