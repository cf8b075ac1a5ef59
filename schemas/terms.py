"""RDF terms and triples as they travel on the wire."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"


class Term(BaseModel):
    """An IRI or a literal (with optional datatype or language tag)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["iri", "literal"] = "iri"
    value: str = Field(max_length=65536)
    datatype: str | None = None
    language: str | None = None

    @model_validator(mode="after")
    def _literal_only_fields(self) -> Term:
        if self.type == "iri" and (self.datatype or self.language):
            raise ValueError("datatype/language apply to literals only")
        if self.type == "iri" and not self.value:
            raise ValueError("an IRI may not be empty")
        return self

    @classmethod
    def iri(cls, value: str) -> Term:
        """An IRI term."""
        return cls(type="iri", value=value)

    @classmethod
    def literal(cls, value: str, datatype: str | None = None, language: str | None = None) -> Term:
        """A literal term."""
        return cls(type="literal", value=value, datatype=datatype, language=language)

    @property
    def is_iri(self) -> bool:
        """True for IRIs."""
        return self.type == "iri"


class Triple(BaseModel):
    """A subject-predicate-object statement."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    s: Term
    p: Term
    o: Term


class LabelledTriple(BaseModel):
    """A triple with the labels a reader sees, as graph-rag returns it."""

    s: str
    p: str
    o: str
    s_id: str
    p_id: str
    o_id: str
    score: float | None = None


def term_to_json(t: Term) -> dict[str, Any]:
    """A term in TrustGraph's compact form: `{"t": "i", "i": IRI}` or `{"t": "l", "v", "dt"?, "ln"?}`."""
    if t.is_iri:
        return {"t": "i", "i": t.value}
    d: dict[str, Any] = {"t": "l", "v": t.value}
    if t.datatype:
        d["dt"] = t.datatype
    if t.language:
        d["ln"] = t.language
    return d


def term_from_json(d: Any, field: str) -> Term:
    """A term from JSON in any form kgflow reads: TrustGraph's compact `{"t": "i", "i": IRI}` /
    `{"t": "l", "v": text, "dt"?, "ln"?}`, or the long `{"type": "iri"|"literal", "value" (or "iri"),
    "datatype"?, "language"?}`. A ValueError names `field` and what is wrong."""
    if not isinstance(d, dict):
        raise ValueError(f"{field}: expected a term object like {{'t': 'i', 'i': IRI}}")
    kind = d.get("t", d.get("type"))
    try:
        if kind in ("i", "iri"):
            value = d.get("i", d.get("iri", d.get("value")))
            if not isinstance(value, str):
                raise ValueError(f"{field}.i: an IRI string is required")
            return Term.iri(value)
        if kind in ("l", "literal"):
            value = d.get("v", d.get("value"))
            if not isinstance(value, str):
                raise ValueError(f"{field}.v: a literal string is required")
            return Term.literal(value, d.get("dt", d.get("datatype")), d.get("ln", d.get("language")))
    except ValidationError as e:
        err = e.errors()[0]
        raise ValueError(f"{field}.{'.'.join(map(str, err['loc'])) or 'v'}: {err['msg']}") from None
    raise ValueError(f"{field}.t: unsupported term type {kind!r} (IRIs 'i', literals 'l')")


def triple_from_json(d: Any, field: str = "triple") -> Triple:
    """A triple whose `s`, `p`, `o` are terms in any form `term_from_json` reads."""
    if not isinstance(d, dict):
        raise ValueError(f"{field}: expected a JSON object")
    return Triple(s=term_from_json(d.get("s"), f"{field}.s"), p=term_from_json(d.get("p"), f"{field}.p"),
                  o=term_from_json(d.get("o"), f"{field}.o"))  # fmt: skip
