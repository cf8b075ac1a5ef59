"""Load triples from files into the stores, embedding entity and relation labels in batches."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Literal
from urllib.parse import quote, unquote

from processors.models.embeddings.model import Embedder
from processors.stores.factory import Stores
from schemas.terms import RDFS_LABEL, Term, Triple

Format = Literal["nt", "ttl", "tsv", "jsonl"]
ENTITY_NS = "http://kgflow.org/e/"
RELATION_NS = "http://kgflow.org/r/"
BATCH = 2000


def field_iri(field: str, ns: str = ENTITY_NS) -> str:
    """Deterministic IRI of a TSV field."""
    return ns + quote(field.strip(), safe="")


def field_label(field: str) -> str:
    """The label of a TSV field (underscores read as spaces)."""
    return field.strip().replace("_", " ")


def iri_label(iri: str) -> str:
    """A readable fallback label from an IRI's last segment."""
    tail = iri.rstrip("/#").rsplit("#", 1)[-1].rsplit("/", 1)[-1]
    return unquote(tail).replace("_", " ") or iri


def guess_format(path: Path) -> Format:
    """Format from the file extension (.nt, .ttl, .tsv/.txt, .jsonl)."""
    ext = path.suffix.lower().lstrip(".")
    return {"nt": "nt", "ttl": "ttl", "tsv": "tsv", "txt": "tsv", "jsonl": "jsonl"}.get(ext, "tsv")  # type: ignore[return-value]


def _tsv(lines: Iterable[str]) -> Iterator[Triple]:
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\n\r")
        if not line.strip():
            continue
        parts = line.split("\t")
        parts = [p for p in parts if p != ""] if len(parts) != 3 else parts
        if len(parts) != 3:
            raise ValueError(f"line {n}: expected subject<TAB>relation<TAB>object, got {len(parts)} fields")
        s, r, o = parts
        for f, ns in ((s, ENTITY_NS), (r, RELATION_NS), (o, ENTITY_NS)):
            yield Triple(s=Term.iri(field_iri(f, ns)), p=Term.iri(RDFS_LABEL), o=Term.literal(field_label(f)))
        yield Triple(s=Term.iri(field_iri(s)), p=Term.iri(field_iri(r, RELATION_NS)), o=Term.iri(field_iri(o)))


def _jsonl(lines: Iterable[str]) -> Iterator[Triple]:
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if all(isinstance(obj.get(k), str) for k in "spo"):
                yield from _tsv([f"{obj['s']}\t{obj['p']}\t{obj['o']}"])
            else:
                yield Triple.model_validate(obj)
        except (ValueError, AttributeError) as e:
            raise ValueError(f"line {n}: {e}") from e


def _rdf(path: Path, fmt: Format) -> Iterator[Triple]:
    import rdflib

    g = rdflib.Graph()
    g.parse(str(path), format="nt" if fmt == "nt" else "turtle")
    for s, p, o in g:
        if isinstance(o, rdflib.Literal):
            obj = Term.literal(str(o), str(o.datatype) if o.datatype else None, o.language)
        else:
            obj = Term.iri(str(o))
        yield Triple(s=Term.iri(str(s)), p=Term.iri(str(p)), o=obj)


def read_triples(path: Path, fmt: Format | None = None) -> Iterator[Triple]:
    """Triples of a file (TSV fields become entities with deterministic IRIs and labels)."""
    fmt = fmt or guess_format(path)
    if fmt in ("nt", "ttl"):
        return _rdf(path, fmt)
    reader = _tsv if fmt == "tsv" else _jsonl
    return reader(path.open(encoding="utf-8"))


async def load_triples(
    stores: Stores,
    embedder: Embedder,
    user: str,
    collection: str,
    triples: Iterable[Triple],
    progress: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Store triples in batches, then embed every entity and relation label once."""
    labels: dict[str, str] = {}
    entities: set[str] = set()
    predicates: set[str] = set()
    batch: list[Triple] = []
    stored = 0

    async def flush() -> None:
        nonlocal stored
        stored += await stores.triples.add_triples(user, collection, batch)
        if progress:
            progress(len(batch))
        batch.clear()

    for t in triples:
        batch.append(t)
        if t.p.value == RDFS_LABEL and not t.o.is_iri:
            labels[t.s.value] = t.o.value
        else:
            entities.add(t.s.value)
            predicates.add(t.p.value)
            if t.o.is_iri:
                entities.add(t.o.value)
        if len(batch) >= BATCH:
            await flush()
    if batch:
        await flush()
    for kind, iris in (("entity", sorted(entities)), ("predicate", sorted(predicates - entities))):
        for i in range(0, len(iris), BATCH):
            chunk = iris[i : i + BATCH]
            texts = [labels.get(iri) or iri_label(iri) for iri in chunk]
            vecs = await embedder.embed(texts)
            await stores.entities.upsert(user, collection, list(zip(chunk, texts, vecs, strict=True)), kind)  # type: ignore[arg-type]
    return {"triples": stored, "entities": len(entities), "relations": len(predicates)}
