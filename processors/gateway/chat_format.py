"""What the chat routes (chat.py) say to kgflow and show the user: model names, requests, footnotes.

A chat model name picks the service, its mode and optionally the collection:

    kgflow/SERVICE[:MODE][@COLLECTION]      e.g. kgflow/lazy-rag, kgflow/kg-query:mix@papers

SERVICE is graph-rag, lazy-rag, drift or kg-query; MODE is kg-query's (local, global, hybrid, mix, naive;
default: the flow's). Without `@COLLECTION` the collection is the `X-Kgflow-Collection` header's, else
`default`. A trailing `:latest` (which Ollama clients add to untagged names) is ignored.

An answer cites its passages as `[1]`, `[2]` (kgflow's services cite chunk ids; they are renumbered) and
ends with a "Sources" list, so any chat UI shows where it comes from; the same sources travel as
structured fields (`sources`: objects, `citations`: one string per footnote).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from schemas.drift import DriftRequest
from schemas.graph_rag import GraphRagRequest
from schemas.kg_query import KgQueryRequest, Mode
from schemas.lazy_rag import LazyRagRequest
from schemas.services import DRIFT, GRAPH_RAG, KG_QUERY, LAZY_RAG, Service

PREFIX = "kgflow/"
COLLECTION_HEADER = "X-Kgflow-Collection"
FLOW_HEADER = "X-Kgflow-Flow"
WORKSPACE_HEADER = "X-Kgflow-Workspace"
DEFAULT_COLLECTION = "default"
SERVICES: dict[str, Service] = {s.name: s for s in (LAZY_RAG, KG_QUERY, GRAPH_RAG, DRIFT)}
MODES: dict[str, tuple[str, ...]] = {KG_QUERY.name: get_args(Mode)}
MAX_SOURCES = 8  # footnotes listed under an answer
EXCERPT_CHARS = 160
_BRACKETS = re.compile(r"\[([^\[\]\n]{1,400})\]")


class ChatModelError(ValueError):
    """A model name kgflow does not serve (the message lists what it serves)."""


@dataclass(frozen=True)
class ChatTarget:
    """The service, mode and collection a chat model name (and headers) pick."""

    model: str
    service: str
    mode: str | None
    collection: str


def model_names(collections: list[str] = []) -> list[str]:  # noqa: B006 - never mutated
    """Every model name served: each service (and kg-query mode), then each again per collection."""
    bare = [f"{PREFIX}{s}" for s in SERVICES] + [f"{PREFIX}{s}:{m}" for s, modes in MODES.items() for m in modes]
    return bare + [f"{name}@{c}" for c in collections for name in bare]


def parse_model(name: Any, header_collection: str | None = None) -> ChatTarget:
    """The target of a model name, `kgflow/SERVICE[:MODE][:TAG][@COLLECTION]` (a tag, e.g. Ollama's
    `:latest`, names no version: every tag is the same service); a ChatModelError for any other name."""
    if not isinstance(name, str) or not name.startswith(PREFIX):
        raise ChatModelError(f"model {name!r} is not served by kgflow; use one of: {', '.join(model_names())}")
    rest = name[len(PREFIX) :].removesuffix(":latest")  # Ollama clients append the default tag to any name
    base, at, collection = rest.partition("@")
    service, *suffixes = base.split(":")
    if service not in SERVICES:
        raise ChatModelError(f"model {name!r}: unknown service {service!r} (services: {', '.join(SERVICES)})")
    modes = MODES.get(service, ())
    # a service with modes reads its first suffix as the mode (so a mistyped mode is refused, not a tag)
    mode = suffixes.pop(0) if modes and suffixes and suffixes[0] != "latest" else None
    if (mode is not None and mode not in modes) or len(suffixes) > 1:
        listed = ", ".join(modes) or "none"
        raise ChatModelError(f"model {name!r}: expected {PREFIX}{service}[:MODE][:TAG] (modes: {listed})")
    if at and not collection:
        raise ChatModelError(f"model {name!r}: a collection name must follow '@'")
    return ChatTarget(name, service, mode or None, collection or header_collection or DEFAULT_COLLECTION)


def build_request(target: ChatTarget, query: str, user: str, streaming: bool) -> BaseModel:
    """The kgflow request that answers `query` for `user` (ValueError naming the bad field)."""
    scope = {"query": query, "user": user, "collection": target.collection}
    try:
        if target.service == GRAPH_RAG.name:
            return GraphRagRequest(**scope, streaming=streaming)
        if target.service == DRIFT.name:
            return DriftRequest(**scope, streaming=streaming)
        if target.service == KG_QUERY.name:
            return KgQueryRequest(**scope, mode=target.mode)
        return LazyRagRequest(**scope)
    except ValidationError as e:
        err = e.errors()[0]
        raise ValueError(f"{'.'.join(map(str, err['loc'])) or 'request'}: {err['msg']}") from None


@dataclass(frozen=True)
class Source:
    """One footnote: a passage (chunk) of a document, or a graph fact (graph-rag)."""

    title: str
    text: str = ""
    document_id: str = ""
    chunk_id: str = ""
    score: float | None = None
    page: int | None = None  # the PDF page or slide the passage is on
    section: str = ""  # the heading it falls under

    def line(self, n: int) -> str:
        """The footnote as the answer text shows it: title (document id, page or section): excerpt."""
        named = [self.document_id] if self.document_id and self.document_id != self.title else []
        if self.page or self.section not in ("", self.title):  # a document's first heading is its title
            named.append(f"p. {self.page}" if self.page else self.section)
        where = f" ({', '.join(named)})" if named else ""
        excerpt = " ".join(self.text.split())
        if len(excerpt) > EXCERPT_CHARS:
            excerpt = excerpt[:EXCERPT_CHARS].rsplit(" ", 1)[0] + "…"
        return f"[{n}] {self.title}{where}" + (f": {excerpt}" if excerpt else "")

    def to_wire(self, n: int) -> dict[str, Any]:
        """The footnote as a structured field."""
        d: dict[str, Any] = {"index": n, "title": self.title}
        for name in ("document_id", "chunk_id", "text", "page", "section"):
            if getattr(self, name):
                d[name] = getattr(self, name)
        if self.score is not None:
            d["score"] = self.score
        return d


def sources_of(res: Any) -> list[Source]:
    """The passages (or, for graph-rag, the facts) an answer rests on, most relevant first."""
    chunks = getattr(res, "chunks", None) or []
    if chunks:
        return [
            Source(c.title or c.document_id, c.text, c.document_id, c.id, c.score, c.page, c.section) for c in chunks
        ]
    triples = sorted(getattr(res, "triples", None) or [], key=lambda t: -(t.score or 0.0))  # best first
    return [Source(f"{t.s} — {t.p} — {t.o}", score=t.score) for t in triples]


def with_footnotes(text: str, sources: list[Source]) -> tuple[str, list[Source]]:
    """`text` with its `[chunk id]` citations (also `[chunk id, p. 3]`, as a no-model answer cites:
    the footnote names the page) renumbered `[1]`, `[2]`, and the sources to list: those cited, in
    order of first citation; for an answer that cites none, the MAX_SOURCES most relevant."""
    by_chunk = {s.chunk_id: s for s in sources if s.chunk_id}
    listed: list[Source] = []

    def number(m: re.Match[str]) -> str:
        parts = [part.strip() for part in m.group(1).split(",")]
        ids = parts if all(i in by_chunk for i in parts) else parts[:1]
        if ids[0] not in by_chunk:
            return m.group(0)
        out = []
        for i in ids:
            if by_chunk[i] not in listed:
                listed.append(by_chunk[i])
            out.append(f"[{listed.index(by_chunk[i]) + 1}]")
        return "".join(out)

    text = _BRACKETS.sub(number, text)
    if listed:  # an answer that cites lists what it cites
        return text, listed
    for s in sources:
        if len(listed) >= MAX_SOURCES:
            break
        if s not in listed:
            listed.append(s)
    return text, listed


def sources_block(sources: list[Source]) -> str:
    """The "Sources" list appended to an answer (empty when there are none)."""
    if not sources:
        return ""
    return "\n\nSources:\n" + "\n".join(s.line(n) for n, s in enumerate(sources, 1))


def sources_fields(sources: list[Source]) -> dict[str, Any]:
    """The structured fields carrying the footnotes: `sources` (objects) and `citations` (strings)."""
    return {
        "sources": [s.to_wire(n) for n, s in enumerate(sources, 1)],
        "citations": [s.line(n) for n, s in enumerate(sources, 1)],
    }


def last_user_message(messages: Any) -> str:
    """The question of a chat: the text of its last user message (a ValueError when there is none)."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages: expected a non-empty list of {role, content}")
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):  # OpenAI content parts: keep the text ones
                content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            if isinstance(content, str) and content.strip():
                return content.strip()
    raise ValueError("messages: no user message with text")
