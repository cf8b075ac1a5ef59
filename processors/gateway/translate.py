"""The one place where the gateway's kebab-case JSON (TrustGraph names) meets kgflow's schemas.

Requests from clients become kgflow models (validated, errors name the client's field);
kgflow responses become the JSON TrustGraph clients read. Fields kgflow adds beyond
TrustGraph's (graph-rag `entities`, `triples`, `stats`) ride along: TrustGraph clients
ignore unknown fields, kgflow's own client reads them back.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from schemas.base import Notice, Response
from schemas.embeddings import EmbeddingsRequest, EmbeddingsResponse
from schemas.flows import Blueprint, FlowRequest, FlowResponse
from schemas.graph_embeddings import GraphEmbeddingsRequest, GraphEmbeddingsResponse
from schemas.graph_rag import GraphRagRequest, GraphRagResponse, GraphRagStats, SeedEntity
from schemas.services import GRAPH_RAG, Service
from schemas.terms import LabelledTriple, Term, Triple, term_from_json, term_to_json, triple_from_json
from schemas.text_completion import TextCompletionRequest, TextCompletionResponse
from schemas.triples import PatternQuery

M = TypeVar("M", bound=BaseModel)
_ID = re.compile(r'"id"\s*:\s*"([^"\\]{1,200})"')
DEFAULT_COLLECTION = "default"
DEFAULT_WORKSPACE = "default"

GRAPH_RAG_FIELDS = ("query", "collection", *GRAPH_RAG.param_names(), "streaming", "no-llm", "scope")


class BadRequest(ValueError):
    """A client request that does not translate; the message names the client's field."""

    type = "bad-request"


class NotSupported(ValueError):
    """A TrustGraph service or operation kgflow does not have: refused at once (`not-supported`); the message
    says "not supported by kgflow"."""

    type = "not-supported"


def _kebab(name: str) -> str:
    return name.replace("_", "-")


def _snake(name: str) -> str:
    return name.replace("-", "_")


def _field_error(e: ValidationError, prefix: str = "") -> BadRequest:
    parts = []
    for err in e.errors()[:5]:
        loc = ".".join(_kebab(str(x)) for x in err["loc"])
        parts.append(f"{prefix}{loc or '<root>'}: {err['msg']}")
    return BadRequest("invalid request: " + "; ".join(parts))


def validate_as(model: type[M], data: dict[str, Any], prefix: str = "") -> M:
    """`data` as a `model`; a BadRequest naming the client's fields (after `prefix`) otherwise."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise _field_error(e, prefix) from None


def _pick(wire: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """Known fields (kebab or snake spelling), by their kgflow (snake) names; nulls dropped."""
    out: dict[str, Any] = {}
    for key, value in wire.items():
        name = _kebab(key)
        if name in fields and value is not None:
            out[_snake(name)] = value
    return out


def collection_of(wire: dict[str, Any]) -> object:
    """The request's collection: `default` when it names none; anything else as given, for the
    schema to check (an empty or blank name is refused, never read as `default`)."""
    value = wire.get("collection")
    return DEFAULT_COLLECTION if value is None else value


def require_object(wire: object, what: str = "request") -> dict[str, Any]:
    """`wire` if it is a JSON object; a BadRequest otherwise."""
    if not isinstance(wire, dict):
        raise BadRequest(f"invalid request: {what}: expected a JSON object")
    return wire


# --- terms -----------------------------------------------------------------------
def loads(text: str | bytes, field: str = "") -> Any:
    """Parse a client's JSON (`field`: the field that held it as text); anything unreadable
    (malformed, nested too deeply, not UTF-8) is a BadRequest."""
    where = f"{field}: " if field else ""
    try:
        return json.loads(text)
    except RecursionError:
        raise BadRequest(f"invalid request: {where}JSON nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise BadRequest(f"invalid request: {where}malformed JSON: {e}") from None


def frame_id(text: str) -> str | None:
    """The `id` of a frame that will not be parsed (too big, malformed), if it is near the start."""
    m = _ID.search(text[:2000])
    return m.group(1) if m else None


term_to_wire = term_to_json


def term_from_wire(d: object, field: str) -> Term:
    """A compact (or long-form) TrustGraph term as a kgflow term."""
    try:
        return term_from_json(d, field)
    except ValueError as e:
        raise BadRequest(f"invalid request: {e}") from None


def triple_to_wire(t: Triple) -> dict[str, Any]:
    """A triple with compact terms."""
    return {"s": term_to_wire(t.s), "p": term_to_wire(t.p), "o": term_to_wire(t.o)}


def triple_from_wire(d: object, field: str) -> Triple:
    """A wire triple as a kgflow triple."""
    try:
        return triple_from_json(d, field)
    except ValueError as e:
        raise BadRequest(f"invalid request: {e}") from None


# --- graph-rag ---------------------------------------------------------------------
def graph_rag_request(wire: object, user: str) -> GraphRagRequest:
    """A TrustGraph graph-rag request (TrustGraph-only knobs are ignored) for `user`."""
    data = _pick(require_object(wire), GRAPH_RAG_FIELDS)
    data.setdefault("collection", DEFAULT_COLLECTION)
    return validate_as(GraphRagRequest, {**data, "user": user})


def graph_rag_request_to_wire(req: GraphRagRequest) -> dict[str, Any]:
    """What kgflow's own client sends (the user travels as the workspace)."""
    data = req.model_dump(exclude={"user", "schema_version"}, exclude_none=True)
    return {_kebab(k): v for k, v in data.items()}


def _sources_to_wire(res: GraphRagResponse) -> list[dict[str, str]]:
    labels = {t.s_id: t.s for t in res.triples} | {t.o_id: t.o for t in res.triples if t.o_id}
    return [{"uri": s, "title": labels[s]} if labels.get(s) else {"uri": s} for s in res.sources]


def _warning_lines(res: GraphRagResponse) -> str:
    """The unknown-collection warnings as text: TrustGraph's clients show only the answer text (and
    `tg-invoke-graph-rag -C nope` would otherwise print an empty answer with no hint why)."""
    return "".join(f"\n\nWarning: {w.message}" for w in res.warnings if w.type == "unknown-collection")


def graph_rag_response_to_wire(res: GraphRagResponse) -> dict[str, Any]:
    """A graph-rag frame as TrustGraph clients read it, plus kgflow's evidence fields."""
    d: dict[str, Any] = {
        "response": res.response + _warning_lines(res),
        "message_type": res.message_type,
        "end_of_stream": res.end_of_stream,
        "end_of_session": res.end_of_session,
    }
    for name in ("model", "in_token", "out_token"):
        if getattr(res, name) is not None:
            d[name] = getattr(res, name)
    if res.sources:
        d["sources"] = _sources_to_wire(res)
    if res.entities:
        d["entities"] = [e.model_dump() for e in res.entities]
    if res.triples:
        d["triples"] = [t.model_dump() for t in res.triples]
    if res.stats is not None:
        d["stats"] = res.stats.model_dump()
    if res.warnings:
        d["warnings"] = [w.model_dump() for w in res.warnings]
    return d


def graph_rag_response_from_wire(d: dict[str, Any]) -> GraphRagResponse:
    """A gateway graph-rag frame back as a kgflow response (kgflow's own client)."""
    sources = [s.get("uri", "") if isinstance(s, dict) else str(s) for s in d.get("sources") or []]
    res = GraphRagResponse(
        response=d.get("response") or "",
        message_type=d.get("message_type") or "answer",
        end_of_stream=bool(d.get("end_of_stream", True)),
        end_of_session=bool(d.get("end_of_session", True)),
        sources=sources,
        entities=[SeedEntity.model_validate(e) for e in d.get("entities") or []],
        triples=[LabelledTriple.model_validate(t) for t in d.get("triples") or []],
        stats=GraphRagStats.model_validate(d["stats"]) if d.get("stats") else None,
        model=d.get("model"),
        in_token=d.get("in_token"),
        out_token=d.get("out_token"),
        warnings=[Notice.model_validate(w) for w in d.get("warnings") or []],
    )
    res.response = res.response.removesuffix(_warning_lines(res))  # kgflow's client has them as warnings
    return res


# --- kgflow's own services (no TrustGraph counterpart) -------------------------------------
def kgflow_request(service: Service, wire: object, user: str) -> BaseModel:
    """A request of a kgflow service: its JSON with kebab- or snake-case names, for `user` (the
    `workspace` a REST body names has been resolved to `user` already)."""
    data = {_snake(k): v for k, v in require_object(wire).items() if v is not None and k not in ("user", "workspace")}
    model = service.request
    if "collection" in getattr(model, "model_fields", {}):
        data.setdefault("collection", DEFAULT_COLLECTION)
    try:
        parsed = model.model_validate({**data, "user": user})
    except ValidationError as e:
        raise _field_error(e) from None
    return getattr(parsed, "root", parsed)


def kgflow_request_to_wire(req: BaseModel) -> dict[str, Any]:
    """What kgflow's own client sends for a kgflow service (the user travels as the workspace)."""
    data = req.model_dump(mode="json", exclude={"user", "schema_version"}, exclude_none=True)
    return {_kebab(k): v for k, v in data.items()}


def kgflow_response_to_wire(res: Response) -> dict[str, Any]:
    """A kgflow service's response as the gateway sends it (kgflow's own field names)."""
    return res.model_dump(mode="json", exclude={"schema_version", "error"}, exclude_none=True)


# --- triples query -------------------------------------------------------------------
@dataclass(frozen=True)
class TriplesQuery:
    """A translated triples query and how to deliver it."""

    query: PatternQuery
    streaming: bool = False
    batch_size: int = 20
    graph: str | None = None


def triples_request(wire: object, user: str) -> TriplesQuery:
    """A TrustGraph triples query (`s`/`p`/`o` compact terms, `g`, `limit`, `streaming`, `batch-size`)."""
    wire = require_object(wire)
    data: dict[str, Any] = {"user": user, "collection": collection_of(wire)}
    for pos in ("s", "p", "o"):
        if wire.get(pos) is not None:
            data[pos] = term_from_wire(wire[pos], pos)
    if wire.get("limit") is not None:
        data["limit"] = wire["limit"]
    query = validate_as(PatternQuery, data)
    batch = wire.get("batch-size", wire.get("batch_size", 20))
    if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= 100000:
        raise BadRequest("invalid request: batch-size: expected an integer between 1 and 100000")
    graph = wire.get("g")
    if graph is not None and not isinstance(graph, str):
        raise BadRequest("invalid request: g: expected a graph IRI string")
    return TriplesQuery(query, bool(wire.get("streaming", False)), batch, graph or None)


def triples_batch_to_wire(triples: list[Triple], is_final: bool | None = None) -> dict[str, Any]:
    """One batch of a triples answer (`is_final` only when streaming)."""
    d: dict[str, Any] = {"response": [triple_to_wire(t) for t in triples]}
    if is_final is not None:
        d["is_final"] = is_final
    return d


# --- embeddings, graph-embeddings, text-completion ---------------------------------------
def embeddings_request(wire: object) -> EmbeddingsRequest:
    """`{"texts": [...]}`."""
    return validate_as(EmbeddingsRequest, _pick(require_object(wire), ("texts",)))


def embeddings_response_to_wire(res: EmbeddingsResponse) -> dict[str, Any]:
    """`{"vectors": [[...], ...]}`."""
    return {"vectors": res.vectors}


def graph_embeddings_request(wire: object, user: str) -> GraphEmbeddingsRequest:
    """`{"vector", "limit", "collection"}` (kgflow also takes an optional `text` for label matches)."""
    data = _pick(require_object(wire), ("vector", "limit", "collection", "text"))
    data.setdefault("collection", DEFAULT_COLLECTION)
    return validate_as(GraphEmbeddingsRequest, {**data, "user": user})


def graph_embeddings_response_to_wire(res: GraphEmbeddingsResponse) -> dict[str, Any]:
    """`{"entities": [{"entity": term, "score"}]}` plus kgflow's `label` / `lexical`."""
    out = []
    for m in res.entities:
        e: dict[str, Any] = {"entity": term_to_wire(m.entity), "score": m.score, "lexical": m.lexical}
        if m.label is not None:
            e["label"] = m.label
        out.append(e)
    return {"entities": out}


def text_completion_request(wire: object) -> TextCompletionRequest:
    """`{"system", "prompt", "streaming"}` (plus kgflow's `max-tokens`, `temperature`)."""
    fields = ("system", "prompt", "streaming", "max-tokens", "temperature")
    return validate_as(TextCompletionRequest, _pick(require_object(wire), fields))


def text_completion_response_to_wire(res: TextCompletionResponse) -> dict[str, Any]:
    """`{"response", "end_of_stream", "model"?, "in_token"?, "out_token"?}` plus `configured`."""
    d: dict[str, Any] = {"response": res.response, "end_of_stream": res.end_of_stream, "configured": res.configured}
    for name in ("model", "in_token", "out_token"):
        if getattr(res, name) is not None:
            d[name] = getattr(res, name)
    return d


# --- flow management ----------------------------------------------------------------------


def blueprint_from_wire(name: object, definition: object) -> Blueprint:
    """A `blueprint-definition` (JSON text or object) named `blueprint-name` as a kgflow blueprint.

    Parameters may be plain values or `{"default": value, ...}` descriptions (as get-blueprint shows them).
    """
    if isinstance(definition, str):
        definition = loads(definition, "blueprint-definition")
    definition = dict(require_object(definition, "blueprint-definition"))
    params = definition.get("parameters") or {}
    if isinstance(params, dict):
        definition["parameters"] = {
            k: v["default"] if isinstance(v, dict) and "default" in v else v for k, v in params.items()
        }
    definition["name"] = name if name is not None else definition.get("name")
    return validate_as(Blueprint, definition, "blueprint-definition.")


def blueprint_to_wire(bp: Blueprint) -> dict[str, Any]:
    """A kgflow blueprint as a `blueprint-definition` object (parameters described TrustGraph-style)."""
    return {
        "description": bp.description,
        "processors": {n: b.model_dump() for n, b in bp.processors.items()},
        "parameters": {k: {"default": v, "description": k} for k, v in bp.parameters.items()},
    }


def flow_request(wire: object) -> FlowRequest:
    """A TrustGraph flow-service request (`operation`, `blueprint-name`, `blueprint-definition`, `flow-id`, ...)."""
    wire = require_object(wire)
    data = _pick(wire, ("operation", "blueprint-name", "flow-id", "description", "parameters"))
    if "operation" not in data:
        raise BadRequest("invalid request: operation: Field required")
    if data["operation"] == "put-blueprint":
        definition = wire.get("blueprint-definition", wire.get("blueprint_definition"))
        if definition is None:
            raise BadRequest("invalid request: blueprint-definition: Field required")
        data["blueprint"] = blueprint_from_wire(data.get("blueprint_name"), definition)
    return validate_as(FlowRequest, data)


def flow_response_to_wire(op: str, res: FlowResponse) -> dict[str, Any]:
    """A flow-service answer under TrustGraph's names (definitions as JSON text, as TrustGraph sends them).
    Secret parameters (`llm-api-key`, ...) are never sent: their values read `<redacted>`."""
    if op == "list-blueprints":
        return {"blueprint-names": res.blueprint_names or []}
    if op == "get-blueprint" and res.blueprint is not None:
        return {"blueprint-definition": json.dumps(blueprint_to_wire(res.blueprint.redacted()))}
    if op == "list-flows":
        return {"flow-ids": res.flow_ids or []}
    if op in ("get-flow", "start-flow") and res.flow is not None:
        flow = {
            "blueprint-name": res.flow.blueprint,
            "description": res.flow.description,
            "parameters": res.flow.redacted().parameters,
            "interfaces": {},
        }
        return {"flow": json.dumps(flow)}
    if op == "get-config" and res.config is not None:
        return {"config": res.config.redacted().model_dump()}
    return {}


# --- bulk import ------------------------------------------------------------------------------
def import_frame(wire: object) -> tuple[str, list[Triple]]:
    """A triples-import frame `{"metadata": {"collection", ...}, "triples": [...]}` as (collection, triples)."""
    wire = require_object(wire, "frame")
    meta = wire.get("metadata") or {}
    if not isinstance(meta, dict):
        raise BadRequest("invalid request: metadata: expected an object")
    collection = collection_of(meta)
    if not isinstance(collection, str) or not collection.strip() or len(collection) > 256:
        raise BadRequest("invalid request: metadata.collection: expected a collection name")
    triples = wire.get("triples")
    if not isinstance(triples, list):
        raise BadRequest("invalid request: triples: expected a list")
    return collection, [triple_from_wire(t, f"triples[{i}]") for i, t in enumerate(triples)]
