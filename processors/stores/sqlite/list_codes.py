"""The int8 codes of a vector index's lists as a search reads them (`Codes`), and a bounded cache
of them across searches (`ListCache`): a question of a large space reads the lists nearest it,
and the next question (or the follow-up round of the same one) mostly reads the same lists again.
A cached list is used only while its stamp holds (a write stamps the lists it changes anew), so a
search sees exactly the rows a read would give, in the same order. Scoring codes against
questions: `best_each` (a space scored whole), `best_of_lists` (each question its own lists)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from processors.algorithms.vectors import top_k

# Bytes of codes (and their ids) the list cache of one index holds, as much as its small spaces'
# codes (vector_lists.CACHED_SPACES): about 60k items at 384 dims, every list of a 50k-chunk
# collection, or the lists of seven questions (8,192 items each) of a collection of millions.
LIST_CACHE_BYTES = 32 << 20
SCORE_BLOCK = 8192  # rows dequantised at a time when a space is scored whole
ITEM_OVERHEAD = 160  # bytes an item's id, document id and scale take beside its code (Python objects)


@dataclass
class Codes:
    """Items of a space as read for a search: ids, documents, int8 codes (a row each) and scales."""

    ids: list[str]
    docs: list[str]
    codes: np.ndarray
    scales: np.ndarray
    lists: np.ndarray  # each item's list

    @staticmethod
    def empty() -> Codes:
        """No items."""
        return Codes([], [], np.zeros((0, 0), dtype=np.int8), np.zeros(0, dtype=np.float32), np.zeros(0, np.int64))

    @staticmethod
    def joined(parts: Sequence[Codes]) -> Codes:
        """The items of `parts`, in their order."""
        parts = [p for p in parts if p.ids]
        if not parts:
            return Codes.empty()
        if len(parts) == 1:
            return parts[0]
        return Codes(
            [i for p in parts for i in p.ids],
            [d for p in parts for d in p.docs],
            np.concatenate([p.codes for p in parts]),
            np.concatenate([p.scales for p in parts]),
            np.concatenate([p.lists for p in parts]),
        )

    def only(self, keep: np.ndarray) -> Codes:
        """The items where `keep` is true."""
        return self._rows(np.flatnonzero(keep))

    def by_list(self) -> dict[int, Codes]:
        """Each list's items (a list's items are contiguous, as a read returns them)."""
        if not self.ids:
            return {}
        starts = [0, *(np.flatnonzero(np.diff(self.lists)) + 1).tolist(), len(self.ids)]
        return {int(self.lists[a]): self._slice(a, b) for a, b in zip(starts, starts[1:], strict=False)}

    def kept_lists(self, lists: Sequence[int]) -> dict[int, Codes]:
        """Each of `lists`' items (this read's), in arrays of their own so they can be kept (`owned`);
        a list with no items gets `empty`."""
        found = {lst: codes.owned() for lst, codes in self.by_list().items()}
        return {lst: found[lst] if lst in found else Codes.empty() for lst in lists}

    def owned(self) -> Codes:
        """These items in arrays of their own: a slice of a read would keep the whole read's buffer
        alive while the cache counts only the slice (measured: the cache held past its budget)."""
        return Codes(self.ids, self.docs, self.codes.copy(), self.scales.copy(), self.lists.copy())

    def nbytes(self) -> int:
        """About the memory the items take."""
        return int(self.codes.nbytes) + ITEM_OVERHEAD * len(self.ids)

    def _slice(self, a: int, b: int) -> Codes:
        return Codes(self.ids[a:b], self.docs[a:b], self.codes[a:b], self.scales[a:b], self.lists[a:b])

    def _rows(self, rows: np.ndarray) -> Codes:
        ids, docs = [self.ids[i] for i in rows], [self.docs[i] for i in rows]
        return Codes(ids, docs, self.codes[rows], self.scales[rows], self.lists[rows])


SpaceKey = tuple[str, str, str]  # (user, collection, space)


class ListCache:
    """Lists' codes by (space, list), each with the stamp it was read at; least recently used out
    past `budget` bytes. Safe across the store's reader threads."""

    def __init__(self, budget: int = LIST_CACHE_BYTES) -> None:
        self.budget = budget
        self._lists: OrderedDict[tuple[SpaceKey, int], tuple[int, Codes]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def lists(
        self, space: SpaceKey, stamps: Mapping[int, int], lists: Sequence[int],
        read: Callable[[Sequence[int]], Codes],
    ) -> dict[int, Codes]:  # fmt: skip
        """Each of `lists`' codes at its stamp (`stamps`, as the file has them now): from the cache,
        the others by one `read` of them (whose result, in the order asked, is split by list and kept)."""
        found: dict[int, Codes] = {}
        with self._lock:
            for lst in lists:
                hit = self._lists.get((space, lst))
                if hit is not None and hit[0] == stamps[lst]:
                    self._lists.move_to_end((space, lst))
                    found[lst] = hit[1]
        missing = [lst for lst in lists if lst not in found]
        if not missing:
            return found
        fresh = read(missing).kept_lists(missing)
        with self._lock:
            for lst, codes in fresh.items():
                self._put((space, lst), stamps[lst], codes)
        return found | fresh

    def _put(self, key: tuple[SpaceKey, int], stamp: int, codes: Codes) -> None:
        old = self._lists.pop(key, None)
        if old is not None:
            self._bytes -= old[1].nbytes()
        if codes.nbytes() > self.budget:
            return
        self._lists[key] = (stamp, codes)
        self._bytes += codes.nbytes()
        while self._bytes > self.budget:
            _, (_, out) = self._lists.popitem(last=False)
            self._bytes -= out.nbytes()


def best_each(codes: Codes, qs: Sequence[np.ndarray], k: int) -> list[list[tuple[str, float]]]:
    """For each unit vector of `qs`, (item, approximate cosine) of the best `k` of `codes`, best
    first. The codes are dequantised a block at a time (bounded scratch memory), each block once
    for all of `qs`: a follow-up round's searches of a small space share one conversion."""
    if not codes.ids:
        return [[] for _ in qs]
    parts: list[list[np.ndarray]] = [[] for _ in qs]
    for i in range(0, len(codes.codes), SCORE_BLOCK):
        block = codes.codes[i : i + SCORE_BLOCK].astype(np.float32)
        for part, q in zip(parts, qs, strict=True):
            part.append(block @ q)
    out = []
    for part in parts:
        sims = np.concatenate(part) * codes.scales
        out.append([(codes.ids[i], float(sims[i])) for i in top_k(sims, k).tolist()])
    return out


def best_of_lists(
    found: dict[int, Codes], picks: Sequence[Sequence[int]], qs: Sequence[np.ndarray], k: int
) -> list[list[tuple[str, float]]]:
    """For each unit vector of `qs`, (item, approximate cosine) of the best `k` items of its lists
    (`picks`, nearest first), best first. Each list is dequantised once for every question that
    picked it (a follow-up round's questions mostly pick the same lists: joined and dequantised
    per question, a round of eight converted each list eight times), and scored per question, so
    a question's scores do not depend on the others asked with it."""
    askers: dict[int, list[int]] = {}
    for n, p in enumerate(picks):
        for x in p:
            askers.setdefault(x, []).append(n)
    sims: dict[tuple[int, int], np.ndarray] = {}
    for x, who in askers.items():
        c = found[x]
        if not c.ids:
            continue
        block = c.codes.astype(np.float32)
        sims.update({(x, n): (block @ qs[n]) * c.scales for n in who})
    out = []
    for n, p in enumerate(picks):
        have = [x for x in p if (x, n) in sims]
        if not have:
            out.append([])
            continue
        scores = np.concatenate([sims[(x, n)] for x in have])
        ids = [i for x in have for i in found[x].ids]
        out.append([(ids[i], float(scores[i])) for i in top_k(scores, k).tolist()])
    return out


def of_docs(codes: Codes, allowed: Collection[str]) -> Codes:
    """The items of `allowed` documents."""
    return codes.only(np.fromiter((d in allowed for d in codes.docs), dtype=bool, count=len(codes.docs)))
