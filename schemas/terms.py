"""RDF terms and triples as they travel on the wire."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

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
