"""A process's compressed copy of a large space's IVF lists, so a search of a collection of
millions scores the lists nearest a question in memory instead of reading their rows.

At 1M chunks a probe of the SQLite lists (vector_lists.py) read 8,192 rows of int8 codes and
scored them in Python: ~57 ms a probe, 264 ms of a 1,170 ms question, nine tenths of it the rows'
read (issue 38). Here each list of a space past `RESIDENT_AT` items is held as faiss product-
quantizer codes (a byte per `DIMS_PER_CODE` dimensions of the unit vector, inner product) in a
faiss IVF index whose lists are the space's own lists, searched only in the lists the caller
picked (`search_preassigned`): ~1 ms a probe, ~107 MB a million 384-dim chunks. Its best
`OVERSAMPLE` x k are then scored by their int8 codes, read by key, so a search answers with the
rows' scores (and, but for a neighbour the coarser codes rank past the cut, the rows' items).

SQLite stays the source of truth; this copy is derived and never answers from a list it does not
hold as the file has it now:
- each list kept carries the stamp it was read at (vector_lists stamps a list anew on every
  change), and a search first refreshes, from the rows, every list it picks whose stamp moved
  (another write, in this process or another);
- it is built in a background thread the first time a large space is searched (the search goes
  on through the rows until it is ready) and saved beside the database (one file, replaced
  whole), so the next process loads it and refreshes only the lists that changed since;
- a space whose items are not chunk ids (`c` and 16 hex digits: the id is the vector's 64-bit
  key) is not copied.

The tenant holds by construction: one copy per (user, collection, space), built from that key's
rows only. A search with `allowed` documents (a scope) is not served here: vector_lists keeps its
document filter inside the list query.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import faiss
import numpy as np

from processors.algorithms.vectors import top_k, unit_rows
from processors.stores.sqlite.list_codes import Codes, SpaceKey

log = logging.getLogger(__name__)

RESIDENT_AT = 50_000  # items past which a space's lists are copied into the process
DIMS_PER_CODE = 4  # vector dimensions per product-quantizer byte (384 dims: 96 bytes a vector)
TRAIN_ITEMS = 32_768  # vectors the product quantizer is trained on
BUILD_LISTS = 16  # lists read per statement while building (~16k rows: bounded scratch memory)
# The copy's candidates per hit wanted, then scored by their int8 codes as the rows are. At 1M, 2
# kept the rows' top 10 in every top 40 of 100 probes (1 kept .996), 4 cost 2.5x the time of 2.
OVERSAMPLE = 2
SPARE_SLOTS = 0.5  # empty slots a copy keeps for lists made after it (splits), as a share of its lists
_CHUNK_ID = re.compile(r"c[0-9a-f]{16}")
_BIAS = 1 << 63  # uint64 <-> int64: faiss keys are signed

faiss.omp_set_num_threads(1)  # the store's reader threads are the parallelism; OpenMP would oversubscribe


class Unsupported(Exception):
    """The space holds items this copy cannot key (not chunk ids)."""


def item_keys(ids: Sequence[str]) -> np.ndarray:
    """Each chunk id's 64-bit key (its hex digits) as faiss keys it."""
    if not all(_CHUNK_ID.fullmatch(i) for i in ids):
        raise Unsupported
    return np.asarray([int(i[1:], 16) - _BIAS for i in ids], dtype=np.int64)


def key_item(key: int) -> str:
    """The chunk id of a faiss key."""
    return f"c{key + _BIAS:016x}"


class ResidentSpace:
    """One space's lists as product-quantizer codes: a faiss IVF index whose slot `slots[list]` holds
    that list's items as they were at `stamps[list]`."""

    def __init__(self, index: faiss.IndexIVFPQ, slots: dict[int, int], stamps: dict[int, int]) -> None:
        self.index = index
        self.slots = slots
        self.stamps = stamps
        self.lock = threading.Lock()

    @staticmethod
    def empty(dims: int, lists: int, sample: np.ndarray) -> ResidentSpace:
        """A copy with room for `lists` lists and their spares, its quantizer trained on `sample`."""
        capacity = lists + max(64, int(lists * SPARE_SLOTS))
        coarse = faiss.IndexFlatIP(dims)
        coarse.add(np.zeros((capacity, dims), dtype=np.float32))  # unused: the caller picks the lists
        index = faiss.IndexIVFPQ(coarse, dims, capacity, dims // DIMS_PER_CODE, 8, faiss.METRIC_INNER_PRODUCT)
        index.by_residual = False
        index.own_fields = True
        coarse.this.disown()
        index.pq.train(sample)
        index.is_trained = True
        return ResidentSpace(index, {}, {})

    def put(self, lst: int, stamp: int, codes: Codes) -> bool:
        """Hold `lst` as `codes` (read at `stamp`); False when no slot is left (rebuild)."""
        slot = self.slots.get(lst)
        if slot is None:
            if len(self.slots) >= self.index.nlist:
                return False
            slot = len(self.slots)
            self.slots[lst] = slot
        self.index.invlists.resize(slot, 0)
        if codes.ids:
            keys = item_keys(codes.ids)
            assign = np.full(len(keys), slot, dtype=np.int64)
            self.index.add_core(len(keys), faiss.swig_ptr(unit_rows(codes.codes)), faiss.swig_ptr(keys),
                                faiss.swig_ptr(assign))  # fmt: skip
        self.stamps[lst] = stamp
        return True

    def stale(self, stamps: dict[int, int], lists: Sequence[int]) -> list[int]:
        """Those of `lists` not held at their stamp in `stamps`."""
        return [x for x in lists if self.stamps.get(x) != stamps[x]]

    def search(self, picks: Sequence[Sequence[int]], qs: Sequence[np.ndarray], k: int) -> list[list[tuple[str, float]]]:
        """For each unit vector of `qs`, (item, approximate cosine) of the best `k` items of its lists
        (`picks`), best first."""
        width = max(len(p) for p in picks)
        nos = np.full((len(qs), width), -1, dtype=np.int64)
        for n, p in enumerate(picks):
            nos[n, : len(p)] = [self.slots[x] for x in p]
        self.index.nprobe = width
        found, keys = self.index.search_preassigned(np.stack(qs).astype(np.float32), k, nos,
                                                    np.zeros(nos.shape, dtype=np.float32))  # fmt: skip
        return [[(key_item(int(key)), float(s)) for key, s in zip(row_k, row_s, strict=True) if key != -1]
                for row_k, row_s in zip(keys.tolist(), found.tolist(), strict=True)]  # fmt: skip

    def save(self, path: Path) -> None:
        """Write this copy to `path` (its slots and stamps as JSON, then the index, streamed), replaced
        whole: a reader never sees half a file."""
        meta = json.dumps({"slots": list(self.slots.items()), "stamps": list(self.stamps.items())}).encode()
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with tmp.open("wb") as fh:  # (writelines/readinto: file I/O, not the store's query calls)
            fh.writelines((len(meta).to_bytes(8, "little"), meta))
            faiss.write_index(self.index, faiss.PyCallbackIOWriter(fh.write))
        os.replace(tmp, path)

    @staticmethod
    def load(path: Path) -> ResidentSpace:
        """A copy saved by `save`, streamed from the file (no second copy in memory)."""
        with path.open("rb") as fh:
            head = bytearray(int.from_bytes(fh.read(8), "little"))
            fh.readinto(head)
            meta = json.loads(head)
            index = faiss.read_index(faiss.PyCallbackIOReader(fh.read))
        return ResidentSpace(index, {int(a): int(b) for a, b in meta["slots"]},
                             {int(a): int(b) for a, b in meta["stamps"]})  # fmt: skip


ReadLists = Callable[[sqlite3.Connection, Sequence[int]], Codes]  # a space's lists' items, in the order asked
ReadCodes = Callable[[sqlite3.Connection, Sequence[str]], dict[str, np.ndarray]]  # items' int8 vectors, by key


class ResidentLists:
    """The copies of one database file's large spaces (see the module docstring)."""

    def __init__(self, resident_at: int = RESIDENT_AT, background: bool = True) -> None:
        self.resident_at = resident_at
        self.background = background  # build in a thread (False: in the first search, as tests do)
        self._spaces: dict[SpaceKey, ResidentSpace | None] = {}  # None: being made, or not copyable
        self._lock = threading.Lock()

    def space(
        self, conn: sqlite3.Connection, key: SpaceKey, stamps: dict[int, int], sizes: dict[int, int],
        read: ReadLists,
    ) -> ResidentSpace | None:  # fmt: skip
        """The copy of `key` if it is ready. Otherwise, for a space past `resident_at` items, starts
        making it (loaded from its file, or built from the rows) and returns None."""
        with self._lock:
            if key in self._spaces:
                return self._spaces[key]
            if sum(sizes.values()) < self.resident_at:
                return None
            self._spaces[key] = None
        db = main_file(conn)
        if self.background and db is not None:
            threading.Thread(target=self._make, args=(key, db, stamps, sizes, read, None), daemon=True).start()
            return None
        self._make(key, db, stamps, sizes, read, conn)
        return self._spaces.get(key)

    def search(
        self, conn: sqlite3.Connection, key: SpaceKey, lists: tuple[dict[int, int], dict[int, int]],
        read: tuple[ReadLists, ReadCodes], picks: Sequence[Sequence[int]], qs: Sequence[np.ndarray], k: int,
    ) -> list[list[tuple[str, float]]] | None:  # fmt: skip
        """For each unit vector of `qs`, (item, approximate cosine) of the best `k` items of its lists
        (`picks`), best first, as the rows would score them: the copy's best `OVERSAMPLE` x `k`
        (its picked lists first refreshed from the rows where their stamp moved), scored by their
        int8 codes read by key (`read`: lists' items, items' codes). `lists`: each list's stamp and
        size as the file has them now. None when no copy is ready (the caller reads the rows)."""
        found = self._candidates(conn, key, lists, read[0], picks, qs, k * OVERSAMPLE)
        if found is None:
            return None
        vecs = read[1](conn, list(dict.fromkeys(i for hits in found for i, _ in hits)))
        out = []
        for q, hits in zip(qs, found, strict=True):
            ids = [i for i, _ in hits if i in vecs]  # one deleted since the copy's search is gone
            sims = np.stack([vecs[i] for i in ids]) @ q if ids else np.zeros(0, dtype=np.float32)
            out.append([(ids[n], float(sims[n])) for n in top_k(sims, k).tolist()])
        return out

    def _candidates(
        self, conn: sqlite3.Connection, key: SpaceKey, lists: tuple[dict[int, int], dict[int, int]],
        read: ReadLists, picks: Sequence[Sequence[int]], qs: Sequence[np.ndarray], k: int,
    ) -> list[list[tuple[str, float]]] | None:  # fmt: skip
        """The copy's own best `k` of each vector's lists (PQ scores), or None (no copy ready)."""
        stamps, sizes = lists
        copy = self.space(conn, key, stamps, sizes, read)
        if copy is None:
            return None
        with copy.lock:
            stale = copy.stale(stamps, list(dict.fromkeys(x for p in picks for x in p)))
            if stale:
                fresh = read(conn, stale).kept_lists(stale)
                try:
                    kept = all([copy.put(x, stamps[x], fresh[x]) for x in stale])
                except Unsupported:
                    kept = False
                if not kept:  # out of slots (made again), or an item it cannot key (then none)
                    self.forget(key[0], key[1])
                    return None
            return copy.search(picks, qs, k)

    def discard(self, conn: sqlite3.Connection, keys: Sequence[SpaceKey]) -> None:
        """Forget the copies of `keys` and delete their files (their spaces are being deleted)."""
        db = main_file(conn)
        with self._lock:
            for key in keys:
                self._spaces.pop(key, None)
        for key in keys if db is not None else []:
            _file(db, key).unlink(missing_ok=True)

    def forget(self, user: str, collection: str) -> None:
        """Drop the copies of a collection's spaces (a later search makes them again)."""
        with self._lock:
            for key in [k for k in self._spaces if k[:2] == (user, collection)]:
                del self._spaces[key]

    def _make(
        self, key: SpaceKey, db: Path | None, stamps: dict[int, int], sizes: dict[int, int], read: ReadLists,
        conn: sqlite3.Connection | None,
    ) -> None:  # fmt: skip
        path = None if db is None else _file(db, key)
        reader = conn or sqlite3.connect(db.as_uri() + "?mode=ro", uri=True, check_same_thread=False)
        try:
            made = _loaded(path, stamps) if path is not None else None
            fresh = made is None
            if made is None:
                made = build(reader, stamps, sizes, read)
            with self._lock:
                self._spaces[key] = made
            if fresh and path is not None:
                made.save(path)
        except Unsupported:  # stays None: searched through the rows
            log.info("space %s keeps no resident copy: its items are not chunk ids", key[2])
        except (OSError, sqlite3.Error, ValueError, RuntimeError) as exc:  # derived: searches go on without it
            log.warning("resident copy of space %s not made or not saved: %s", key[2], exc)
        finally:
            if conn is None:
                reader.close()


def build(conn: sqlite3.Connection, stamps: dict[int, int], sizes: dict[int, int], read: ReadLists) -> ResidentSpace:
    """A copy of every list of `stamps` (list -> stamp as the caller saw them; the rows read are as
    new or newer, and a newer list is refreshed at its first search), trained on random whole lists
    holding about `TRAIN_ITEMS` items."""
    order = sorted(stamps)
    sample_lists, held = [], 0
    for lst in np.random.default_rng(len(order)).permutation(order).tolist():
        if held >= TRAIN_ITEMS:
            break
        sample_lists.append(lst)
        held += sizes.get(lst, 0)
    read_sample = read(conn, sample_lists)
    item_keys(read_sample.ids)  # a space of other ids stops here, before any training
    sample = unit_rows(read_sample.codes)
    if not len(sample):
        raise ValueError("the space has no items")
    made = ResidentSpace.empty(sample.shape[1], len(order), sample)
    for i in range(0, len(order), BUILD_LISTS):
        part = order[i : i + BUILD_LISTS]
        for lst, codes in read(conn, part).kept_lists(part).items():
            made.put(lst, stamps[lst], codes)
    return made


def _loaded(path: Path, stamps: dict[int, int]) -> ResidentSpace | None:
    """The saved copy at `path`, unless missing, unreadable or mostly stale (then rebuilt)."""
    if not path.exists():
        return None
    try:
        made = ResidentSpace.load(path)
    except (OSError, ValueError, RuntimeError, KeyError, TypeError) as exc:
        log.warning("resident copy %s unreadable, rebuilt: %s", path.name, exc)
        return None
    if len(made.stale(stamps, list(stamps))) * 2 > len(stamps):
        return None
    if len(set(stamps) - set(made.slots)) > made.index.nlist - len(made.slots):
        return None  # no slot for the lists made since
    return made


def main_file(conn: sqlite3.Connection) -> Path | None:
    """The connection's main database file (None: in memory)."""
    main = next((r[2] for r in conn.execute("PRAGMA database_list") if r[1] == "main"), "")
    return Path(main) if main else None


def _file(db: Path, key: SpaceKey) -> Path:
    """Where the copy of `key` is saved, beside database file `db` (named by a digest of the key)."""
    return db.with_name(f"{db.name}.resident-{hashlib.sha256(chr(0).join(key).encode()).hexdigest()[:16]}.faiss")
