"""What the MCP tools (mcp_tools.py) hand an agent: structured results, each cited by document, page
and chunk id, and the same result as readable text (an agent that ignores structured content still
sees the answer and where it comes from)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from schemas.documents import Chunk, CollectionInfo, DocumentInfo, LoadResponse

EXCERPT_CHARS = 300  # of a passage in the readable text; the structured result has it whole


class Passage(BaseModel):
    """A chunk of a document: where it is (document, title, page, section, chunk id), its text, its score."""

    document_id: str
    title: str = ""
    page: int | None = None
    section: str = ""
    chunk_id: str
    ordinal: int = 0
    text: str
    score: float | None = None

    @classmethod
    def of(cls, c: Chunk) -> Passage:
        """The passage of a stored or retrieved chunk."""
        return cls(document_id=c.document_id, title=c.title, page=c.page, section=c.section, chunk_id=c.id,
                   ordinal=c.ordinal, text=c.text, score=c.score)  # fmt: skip

    def cite(self, n: int, excerpt: bool = True) -> str:
        """The passage as one footnote: `[n] title (document id), p. 3, chunk c1a2: text`."""
        where = f" ({self.document_id})" if self.title and self.title != self.document_id else ""
        page = f", p. {self.page}" if self.page else ""
        head = f"[{n}] {self.title or self.document_id}{where}{page}, chunk {self.chunk_id}"
        if not excerpt:
            return head
        text = " ".join(self.text.split())
        if len(text) > EXCERPT_CHARS:
            text = text[:EXCERPT_CHARS].rsplit(" ", 1)[0] + "…"
        return f"{head}: {text}"


class Fact(BaseModel):
    """A graph fact graph-rag's answer rests on, by labels and ids."""

    subject: str
    predicate: str
    object: str
    subject_id: str
    object_id: str
    score: float | None = None


class Answer(BaseModel):
    """A retrieval service's answer and what it rests on."""

    service: str
    collection: str
    answer: str
    passages: list[Passage] = []  # best first (the citations)
    facts: list[Fact] = []  # graph-rag's triples
    warnings: list[str] = []

    @classmethod
    def of(cls, service: str, collection: str, res: Any) -> Answer:
        """The answer of a lazy-rag, kg-query, drift or graph-rag response."""
        triples = sorted(getattr(res, "triples", None) or [], key=lambda t: -(t.score or 0.0))
        facts = [Fact(subject=t.s, predicate=t.p, object=t.o, subject_id=t.s_id, object_id=t.o_id, score=t.score)
                 for t in triples]  # fmt: skip
        warnings = [w.message for w in getattr(res, "warnings", None) or []]
        return cls(service=service, collection=collection, answer=res.response or getattr(res, "final_answer", ""),
                   passages=[Passage.of(c) for c in getattr(res, "chunks", None) or []], facts=facts,
                   warnings=warnings)  # fmt: skip

    def text(self) -> str:
        """The answer, then its sources."""
        out = [self.answer.strip() or "(no answer)"]
        out += [f"Note: {w}" for w in self.warnings]
        if self.passages:
            out.append("Sources:\n" + "\n".join(p.cite(n) for n, p in enumerate(self.passages, 1)))
        if self.facts:
            out.append("Facts:\n" + "\n".join(f"- {f.subject} — {f.predicate} — {f.object}" for f in self.facts))
        return "\n\n".join(out)


class Passages(BaseModel):
    """Chunks found or read, best (or asked) first."""

    collection: str
    passages: list[Passage]

    def text(self) -> str:
        """Each passage as a footnote with its text."""
        if not self.passages:
            return f"No passages found in collection {self.collection!r}."
        return "\n\n".join(p.cite(n) for n, p in enumerate(self.passages, 1))


class DocumentText(BaseModel):
    """A stored document read back whole: its text rebuilt from its chunks, and the chunks (with pages)."""

    collection: str
    document_id: str
    title: str
    text: str
    passages: list[Passage]
    complete: bool  # every stored chunk was read (else the text has gaps)

    @classmethod
    def of(cls, collection: str, info: DocumentInfo, chunks: list[Chunk]) -> DocumentText:
        """The document of its chunks: overlapping windows each add the text past the previous one's end;
        the whitespace between two windows (never stored) comes back as one space, or a paragraph break."""
        ordered = sorted(chunks, key=lambda c: c.ordinal)
        parts: list[str] = []
        end: int | None = None
        for c in ordered:
            if c.end <= c.start:  # a chunk without offsets: its text as stored
                parts.append(c.text)
                continue
            if end is not None and c.start > end:
                parts.append(" " if c.start - end == 1 else "\n\n")
            parts.append(c.text[max((end or 0) - c.start, 0) :])
            end = max(end or 0, c.end)
        passages = [Passage.of(c.model_copy(update={"score": None})) for c in ordered]
        return cls(collection=collection, document_id=info.id, title=info.title, text="".join(parts),
                   passages=passages, complete=len(ordered) >= info.chunks)  # fmt: skip

    def text_out(self) -> str:
        """The title, the chunks' citations (with pages), then the text."""
        cites = "\n".join(p.cite(n, excerpt=False) for n, p in enumerate(self.passages, 1))
        gaps = "" if self.complete else "\n\nNote: not every chunk could be read; the text has gaps."
        return f"{self.title or self.document_id} ({self.document_id})\n\nChunks:\n{cites}{gaps}\n\n{self.text}"


class Collections(BaseModel):
    """The caller's collections and what each holds."""

    collections: list[CollectionInfo]

    def text(self) -> str:
        """One line per collection."""
        if not self.collections:
            return "No collections yet: load documents first."
        return "\n".join(f"{c.collection}: {c.documents} documents, {c.chunks} chunks, {c.entities} entities, "
                         f"{c.triples} triples" for c in self.collections)  # fmt: skip


class Documents(BaseModel):
    """A collection's documents, in id order."""

    collection: str
    documents: list[DocumentInfo]

    def text(self) -> str:
        """One line per document."""
        if not self.documents:
            return f"Collection {self.collection!r} holds no documents."
        return "\n".join(f"{d.id}: {d.title or '(untitled)'} ({d.chunks} chunks)" for d in self.documents)


class Loaded(BaseModel):
    """What a load did."""

    collection: str
    loaded: int
    unchanged: int
    chunks: int
    failed: dict[str, str] = {}  # document id -> why

    @classmethod
    def of(cls, collection: str, res: LoadResponse) -> Loaded:
        """The report of a document-load's last response."""
        return cls(collection=collection, loaded=res.loaded, unchanged=res.unchanged, chunks=res.chunks,
                   failed={f.id: f.error for f in res.failed})  # fmt: skip

    def text(self) -> str:
        """One line, then each failure."""
        head = f"Loaded {self.loaded} documents ({self.chunks} chunks) into {self.collection!r}"
        head += f"; {self.unchanged} unchanged" if self.unchanged else ""
        return "\n".join([head, *(f"failed {i}: {why}" for i, why in self.failed.items())])
