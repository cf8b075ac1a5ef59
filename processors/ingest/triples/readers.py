"""Triples from files: N-Triples, Turtle, TSV and JSONL. Every error names FILE:LINE where there is one.

TSV: `subject<TAB>relation<TAB>object`, each field an entity (or relation) with a deterministic IRI
and the label `field.replace('_', ' ')`. JSONL: one triple per line, either plain strings
(`{"s": "marie_curie", "p": "spouse", "o": "pierre_curie"}`, read as a TSV line) or terms in
TrustGraph's compact form (`{"t": "i", "i": IRI}`, `{"t": "l", "v": text, "dt"?, "ln"?}`) or
kgflow's long form (`{"type": "iri", "value": IRI}`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from processors.algorithms.iris import ENTITY_NS, RELATION_NS, field_iri, field_label
from schemas.terms import RDFS_LABEL, Term, Triple, triple_from_json

Format = Literal["nt", "ttl", "tsv", "jsonl"]
FIELDS = ("subject", "relation", "object")


def guess_format(path: Path) -> Format:
    """Format from the file extension (.nt, .ttl, .tsv/.txt, .jsonl)."""
    ext = path.suffix.lower().lstrip(".")
    return {"nt": "nt", "ttl": "ttl", "tsv": "tsv", "txt": "tsv", "jsonl": "jsonl"}.get(ext, "tsv")  # type: ignore[return-value]


def tsv_triples(s: str, r: str, o: str) -> list[Triple]:
    """The triples of one TSV line: a label for each field, then the edge."""
    out = [
        Triple(s=Term.iri(field_iri(f, ns)), p=Term.iri(RDFS_LABEL), o=Term.literal(field_label(f)))
        for f, ns in ((s, ENTITY_NS), (r, RELATION_NS), (o, ENTITY_NS))
    ]
    out.append(Triple(s=Term.iri(field_iri(s)), p=Term.iri(field_iri(r, RELATION_NS)), o=Term.iri(field_iri(o))))
    return out


def _tsv_fields(line: str) -> tuple[str, str, str]:
    parts = line.split("\t")
    parts = [p for p in parts if p != ""] if len(parts) != 3 else parts  # tolerate stray trailing tabs
    if len(parts) != 3:
        raise ValueError(f"expected subject<TAB>relation<TAB>object, got {len(parts)} fields")
    for name, value in zip(FIELDS, parts, strict=True):
        if not value.strip():
            raise ValueError(f"the {name} field is empty")
    return parts[0], parts[1], parts[2]


def _once(triples: Iterable[Triple], labelled: set[str]) -> Iterator[Triple]:
    """The triples of a line, less label triples an earlier line of the file gave (a field named on
    many lines is labelled once: progress and counts are of distinct triples)."""
    for t in triples:
        if t.p.value == RDFS_LABEL and t.s.value in labelled:
            continue
        if t.p.value == RDFS_LABEL:
            labelled.add(t.s.value)
        yield t


def _tsv(lines: Iterable[str], where: str) -> Iterator[Triple]:
    labelled: set[str] = set()
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\n\r")
        if not line.strip():
            continue
        try:
            fields = _tsv_fields(line)
        except ValueError as e:
            raise ValueError(f"{where}:{n}: {e}") from None
        yield from _once(tsv_triples(*fields), labelled)


def _jsonl_line(obj: Any) -> list[Triple]:
    if not isinstance(obj, dict):
        raise ValueError('expected an object like {"s": ..., "p": ..., "o": ...}')
    if all(isinstance(obj.get(k), str) for k in "spo"):
        return tsv_triples(*_tsv_fields(f"{obj['s']}\t{obj['p']}\t{obj['o']}"))
    return [triple_from_json(obj, "triple")]


def _jsonl(lines: Iterable[str], where: str) -> Iterator[Triple]:
    labelled: set[str] = set()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            found = _jsonl_line(json.loads(line))
        except RecursionError:
            raise ValueError(f"{where}:{n}: JSON nested too deeply") from None
        except ValueError as e:
            raise ValueError(f"{where}:{n}: {e}") from None
        yield from _once(found, labelled) if len(found) > 1 else found  # a plain line labels its fields


def _rdf_error(path: Path, e: Exception) -> ValueError:
    """An rdflib parse error as one line with FILE:LINE where rdflib or the file tells it."""
    lines = getattr(e, "lines", None)
    if isinstance(lines, int):  # Turtle (notation3.BadSyntax): 0-based line and the reason
        return ValueError(f"{path}:{lines + 1}: bad Turtle syntax ({getattr(e, '_why', e)})")
    text = str(e)
    if text.startswith("Invalid line: "):  # N-Triples names the line's text: find its number
        bad = text[len("Invalid line: ") :].strip()
        with path.open(encoding="utf-8", errors="replace") as f:
            n = next((i for i, ln in enumerate(f, 1) if ln.strip() == bad), None)
        return ValueError(f"{path}:{n}: invalid N-Triples line: {bad[:200]}" if n else f"{path}: {text[:300]}")
    return ValueError(f"{path}: {type(e).__name__}: {text.splitlines()[0][:300] if text else ''}")


def _rdf(path: Path, fmt: Format) -> Iterator[Triple]:
    import rdflib

    g = rdflib.Graph()
    try:
        g.parse(str(path), format="nt" if fmt == "nt" else "turtle")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except Exception as e:  # rdflib raises its own, SyntaxError subclasses, or plain Exception
        raise _rdf_error(path, e) from None
    for s, p, o in g:
        if isinstance(o, rdflib.Literal):
            obj = Term.literal(str(o), str(o.datatype) if o.datatype else None, o.language)
        else:
            obj = Term.iri(str(o))
        yield Triple(s=Term.iri(str(s)), p=Term.iri(str(p)), o=obj)


def _lines(path: Path) -> Iterator[str]:
    try:
        with path.open(encoding="utf-8") as f:
            yield from f
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def read_triples(path: Path, fmt: Format | None = None) -> Iterator[Triple]:
    """Triples of a file (TSV fields become entities with deterministic IRIs and labels); a
    directory or missing file is a clear error before anything is read."""
    if path.is_dir():
        raise ValueError(f"{path} is a directory; give a file of triples (.nt, .ttl, .tsv, .jsonl)")
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    fmt = fmt or guess_format(path)
    if fmt in ("nt", "ttl"):
        return _rdf(path, fmt)
    return (_tsv if fmt == "tsv" else _jsonl)(_lines(path), str(path))
