"""The chunks a DRIFT search retrieved and what the model may cite of them (bus-free).

Every chunk retrieved for a request — primer samples, follow-up chunks, neighbour chunks, even
those that did not fit a prompt — is in the book under a short handle (P1, P2, ...) the prompts
use. A citation is resolved against the whole book: a handle or chunk id in it becomes a
`Citation` enriched from the chunk (span, document id and name), or the bare chunk id when the
book knows the id but not the chunk's text; anything else is a hallucination, dropped and counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from schemas.documents import Chunk
from schemas.retrieval import Citation

SPAN_CHARS = 200
_HANDLE = re.compile(r"^\[?\s*(P\d+)\s*\]?$", re.IGNORECASE)


class CitationBook:
    """The full retrieved chunk set of one request, and the citation counts."""

    def __init__(self) -> None:
        self.chunks: dict[str, Chunk | None] = {}  # chunk id -> chunk (None: id known, text not)
        self._handles: dict[str, str] = {}  # chunk id -> handle
        self._ids: dict[str, str] = {}  # handle -> chunk id
        self._spans: dict[str, str] = {}  # chunk id -> the span a local answer quoted
        self.returned = 0
        self.dropped = 0

    def add(self, chunks: Iterable[Chunk]) -> None:
        """Record retrieved chunks (each gets a handle the first time)."""
        for c in chunks:
            self._handle(c.id)
            if self.chunks.get(c.id) is None:
                self.chunks[c.id] = c

    def add_ids(self, ids: Iterable[str]) -> None:
        """Record retrieved chunk ids whose texts were not fetched."""
        for cid in ids:
            self._handle(cid)
            self.chunks.setdefault(cid, None)

    def _handle(self, chunk_id: str) -> str:
        h = self._handles.get(chunk_id)
        if h is None:
            h = self._handles[chunk_id] = f"P{len(self._handles) + 1}"
            self._ids[h] = chunk_id
        return h

    def handles(self, chunks: Iterable[Chunk]) -> list[tuple[str, Chunk]]:
        """(handle, chunk) of recorded chunks, as prompts show them."""
        return [(self._handle(c.id), c) for c in chunks]

    def handle_of(self, chunk_id: str) -> str:
        """The handle of a recorded chunk."""
        return self._handles[chunk_id]

    def resolve(self, cited: object) -> str | None:
        """The chunk id a cited handle or id names, or None when it was not retrieved."""
        if not isinstance(cited, str):
            return None
        text = cited.strip()
        m = _HANDLE.match(text)
        if m:
            return self._ids.get(m.group(1).upper())
        text = text.strip("[] ")
        return text if text in self.chunks else None

    def cite(self, cited: object, span: object = "") -> Citation | str | None:
        """The enriched citation of a handle or id (the bare id when its text is unknown), or
        None — counted as dropped — when it names nothing retrieved."""
        cid = self.resolve(cited)
        if cid is None:
            self.dropped += 1
            return None
        self.returned += 1
        chunk = self.chunks.get(cid)
        if chunk is None:
            return cid
        quoted = span.strip() if isinstance(span, str) else ""
        if quoted and quoted.lower() in chunk.text.lower():
            self._spans.setdefault(cid, quoted)
        else:
            quoted = self._spans.get(cid) or chunk.text[:SPAN_CHARS]
        name = chunk.title or chunk.document_id or "unknown"
        return Citation(chunk_id=cid, span=quoted, document_id=chunk.document_id, document_name=name,
                        page=chunk.page, section=chunk.section)  # fmt: skip

    def cite_all(self, cited: Iterable[Any]) -> list[Citation | str]:
        """The valid, distinct citations of `cited` (ids, handles or {chunk_id, span} objects)."""
        out: dict[str, Citation | str] = {}
        for c in cited:
            ref, span = (c.get("chunk_id"), c.get("span", "")) if isinstance(c, dict) else (c, "")
            got = self.cite(ref, span)
            if got is None:
                continue
            key = got if isinstance(got, str) else got.chunk_id
            if key in out:
                self.returned -= 1  # the same chunk twice is one citation
            out.setdefault(key, got)
        return list(out.values())
