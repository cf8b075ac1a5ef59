"""The int8 codes of a vector index's lists as a search reads them (`Codes`), and a bounded cache
of them across searches (`ListCache`): a question of a large space reads the lists nearest it,
and the next question (or the follow-up round of the same one) mostly reads the same lists again.
A cached list is used only while its space's version holds (any write to the space bumps it), so
a search sees exactly the rows a read would give, in the same order."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# Bytes of codes (and their ids) the list cache of one index holds, as much as its small spaces'
# codes (vector_lists.CACHED_SPACES): about 60k items at 384 dims, every list of a 50k-chunk
# collection, or the lists of seven questions (8,192 items each) of a collection of millions.
LIST_CACHE_BYTES = 32 << 20
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
    """Lists' codes by (space, list), each with the space version it was read at; least recently
    used out past `budget` bytes. Safe across the store's reader threads."""

    def __init__(self, budget: int = LIST_CACHE_BYTES) -> None:
        self.budget = budget
        self._lists: OrderedDict[tuple[SpaceKey, int], tuple[int, Codes]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def lists(
        self, space: SpaceKey, version: int, lists: Sequence[int], read: Callable[[Sequence[int]], Codes]
    ) -> dict[int, Codes]:
        """Each of `lists`' codes at `version`: from the cache, the others by one `read` of them
        (whose result, in the order asked, is split by list and kept)."""
        found: dict[int, Codes] = {}
        with self._lock:
            for lst in lists:
                hit = self._lists.get((space, lst))
                if hit is not None and hit[0] == version:
                    self._lists.move_to_end((space, lst))
                    found[lst] = hit[1]
        missing = [lst for lst in lists if lst not in found]
        if not missing:
            return found
        fresh = {lst: codes.owned() for lst, codes in read(missing).by_list().items()}
        fresh.update({lst: Codes.empty() for lst in missing if lst not in fresh})  # an empty list
        with self._lock:
            for lst, codes in fresh.items():
                self._put((space, lst), version, codes)
        return found | fresh

    def _put(self, key: tuple[SpaceKey, int], version: int, codes: Codes) -> None:
        old = self._lists.pop(key, None)
        if old is not None:
            self._bytes -= old[1].nbytes()
        if codes.nbytes() > self.budget:
            return
        self._lists[key] = (version, codes)
        self._bytes += codes.nbytes()
        while self._bytes > self.budget:
            _, (_, out) = self._lists.popitem(last=False)
            self._bytes -= out.nbytes()
