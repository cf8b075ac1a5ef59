"""Seeded power-law graphs for the benchmark, loaded through the real loader and cached.

Degrees follow a Chung-Lu power law (endpoint weight ∝ rank^(-1/(gamma-1))), so a few hubs
carry thousands of edges while most entities have a handful. Labels look like names
("Karo Velmin", "Port Dessa", "Talin Institute") and relations like relations ("born in"),
so the embedder and the lexical matcher have something to work with. Questions are
two-hop walks: "what is the <r2> of the <r1> of <entity>?" with the walk's end as answer.

A generated graph is keyed by its parameters and a code version (this file, the store
schemas, the embedding model); the loaded store is cached under `bench/.cache/` so only
the first run pays for embedding every label.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import textwrap
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from bench.harness.results import CACHE
from processors.algorithms.iris import ENTITY_NS, RELATION_NS, field_iri
from processors.ingest.triples.loader import LoadReport
from processors.stores.settings import StoreSettings
from schemas.terms import RDFS_LABEL, Term, Triple

CACHE_DIR = CACHE  # loaded graphs, keyed by their spec
USER = "bench"

RELATIONS = (
    "born in", "works for", "spouse", "parent of", "child of", "sibling of", "located in", "capital of",
    "member of", "founded by", "founder of", "leader of", "studied at", "teaches at", "author of",
    "written by", "directed by", "produced by", "composed by", "performed by", "part of", "has part",
    "neighbour of", "friend of", "mentor of", "student of", "employer of", "owner of", "owned by",
    "headquartered in", "died in", "lives in", "citizen of", "speaks", "religion", "genre", "instrument",
    "award received", "nominated for", "influenced by", "successor of", "predecessor of", "ally of",
    "rival of", "twin town of", "river through", "named after", "language of", "currency of", "occupation",
)  # fmt: skip
_ONSETS = ("b", "br", "c", "d", "dr", "f", "g", "gr", "h", "j", "k", "kr", "l", "m", "n", "p", "r", "s", "st",
           "t", "tr", "v", "w", "z", "th", "sh", "ch", "")  # fmt: skip
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ou", "y")
_CODAS = ("", "", "n", "r", "l", "s", "th", "m", "x", "nd", "rk")
_KINDS = ("{a} {b}", "{a} {b}", "{a} {b}", "port {a}", "{a} institute", "{a} river", "mount {a}", "{a} {b}son")


@dataclass(frozen=True)
class GraphSpec:
    """Parameters of a generated graph (all of them go into the cache key)."""

    name: str
    triples: int
    edges_per_entity: float = 16.7  # triples / entities; the same for every size → same degree law
    relations: int = 50
    gamma: float = 2.5  # degree exponent P(k) ∝ k^-gamma
    seed: int = 7
    questions: int = 200

    @property
    def entities(self) -> int:
        """Number of entities."""
        return max(20, round(self.triples / self.edges_per_entity))

    @property
    def collection(self) -> str:
        """The collection the graph is loaded into."""
        return self.name


@dataclass
class Question:
    """A generated question with its gold answer and the walk that produced it."""

    question: str
    answer: str
    path: list[str]
    relations: list[str] = field(default_factory=list)


@dataclass
class Graph:
    """Generated entity labels, relation labels and edges (as index triples)."""

    spec: GraphSpec
    entity_labels: list[str]
    relation_labels: list[str]
    edges: np.ndarray  # (n, 3) int64: subject, relation, object

    def entity_iri(self, i: int) -> str:
        """IRI of entity `i` (the loader's TSV convention)."""
        return field_iri(self.entity_labels[i].replace(" ", "_"), ENTITY_NS)

    def relation_iri(self, i: int) -> str:
        """IRI of relation `i`."""
        return field_iri(self.relation_labels[i].replace(" ", "_"), RELATION_NS)

    def triples(self) -> Iterator[Triple]:
        """Label triples of every entity and relation, then every edge."""
        ents = [Term.iri(self.entity_iri(i)) for i in range(len(self.entity_labels))]
        rels = [Term.iri(self.relation_iri(i)) for i in range(len(self.relation_labels))]
        label = Term.iri(RDFS_LABEL)
        for terms, labels in ((ents, self.entity_labels), (rels, self.relation_labels)):
            for t, text in zip(terms, labels, strict=True):
                yield Triple(s=t, p=label, o=Term.literal(text))
        for s, p, o in self.edges.tolist():
            yield Triple(s=ents[s], p=rels[p], o=ents[o])


def _names(rng: np.random.Generator, n: int) -> list[str]:
    """`n` distinct name-like labels."""

    def word(syllables: int) -> str:
        parts = [_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))] for _ in range(syllables)]
        return "".join(parts) + _CODAS[rng.integers(len(_CODAS))]

    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        kind = _KINDS[rng.integers(len(_KINDS))]
        label = kind.format(a=word(int(rng.integers(1, 4))), b=word(int(rng.integers(2, 4)))).title()
        if label not in seen and len(label) > 3:
            seen.add(label)
            out.append(label)
    return out


def generate(spec: GraphSpec) -> Graph:
    """The graph `spec` describes; the same spec always gives the same graph."""
    rng = np.random.default_rng(spec.seed)
    n, r = spec.entities, min(spec.relations, len(RELATIONS))
    labels = _names(rng, n)
    weights = np.arange(1, n + 1, dtype=np.float64) ** (-1.0 / (spec.gamma - 1.0))
    weights = weights[rng.permutation(n)]  # hubs anywhere, not at index 0
    weights /= weights.sum()
    rel_w = np.arange(1, r + 1, dtype=np.float64) ** -0.8  # some relations much more common
    rel_w /= rel_w.sum()
    keys = np.zeros(0, dtype=np.int64)
    while len(keys) < spec.triples:
        need = int((spec.triples - len(keys)) * 1.3) + 64
        s = rng.choice(n, need, p=weights)
        o = rng.choice(n, need, p=weights)
        p = rng.choice(r, need, p=rel_w)
        ok = s != o
        new = (s[ok] * r + p[ok]) * n + o[ok]
        _, first = np.unique(np.concatenate([keys, new]), return_index=True)
        keys = np.concatenate([keys, new])[np.sort(first)]  # keep first-seen order: deterministic
    keys = keys[: spec.triples]
    edges = np.stack([keys // (r * n), (keys // n) % r, keys % n], axis=1)
    return Graph(spec, labels, list(RELATIONS[:r]), edges)


def questions(graph: Graph, count: int | None = None, starts_from: np.ndarray | None = None) -> list[Question]:
    """Two-hop questions along outgoing edges, from start entities drawn uniformly (from
    `starts_from` when given)."""
    spec = graph.spec
    rng = np.random.default_rng(spec.seed + (1 if starts_from is None else 2))
    order = np.argsort(graph.edges[:, 0], kind="stable")
    by_s = graph.edges[order]
    starts = np.searchsorted(by_s[:, 0], np.arange(spec.entities + 1))
    pool = np.arange(spec.entities) if starts_from is None else starts_from
    out: list[Question] = []
    tries = 0
    while len(out) < (count or spec.questions) and tries < 100 * (count or spec.questions):
        tries += 1
        e0 = int(pool[rng.integers(len(pool))])
        path = [e0]
        rels: list[int] = []
        for _ in range(2):
            lo, hi = starts[path[-1]], starts[path[-1] + 1]
            if lo == hi:
                break
            _, rel, nxt = by_s[int(rng.integers(lo, hi))].tolist()
            rels.append(rel)
            path.append(nxt)
        if len(rels) < 2:
            continue
        r1, r2 = (graph.relation_labels[i] for i in rels)
        q = f"what is the {r2} of the {r1} of {graph.entity_labels[e0]}?"
        out.append(Question(q, graph.entity_labels[path[-1]], [graph.entity_labels[i] for i in path], [r1, r2]))
    return out


def hub_questions(graph: Graph, count: int | None = None) -> list[Question]:
    """Two-hop questions that start at a hub (the 1% of entities with the most out-edges): the
    first hop must find the question's relation among the hub's hundreds to thousands of edges."""
    degree = np.bincount(graph.edges[:, 0], minlength=graph.spec.entities)
    hubs = np.argsort(-degree, kind="stable")[: max(1, graph.spec.entities // 100)]
    return questions(graph, count, starts_from=hubs)


def _code_shape(fn: object) -> str:
    """What `fn` computes: its syntax tree without formatting, comments or docstrings."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))  # type: ignore[arg-type]
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        docstring = isinstance(body, list) and body and isinstance(body[0], ast.Expr)
        if docstring and isinstance(body[0].value, ast.Constant):  # type: ignore[index]
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined, index]
    return ast.dump(tree)


def cache_key(spec: GraphSpec) -> str:
    """Parameters + code version (the generating code, the store schemas, the embedding model);
    editing formatting, comments or docstrings keeps the key."""
    from processors.models.embeddings.model import OnnxMiniLM
    from processors.stores.local import entity_index as local_index
    from processors.stores.sqlite import triples as sqlite_triples

    h = hashlib.sha256(json.dumps(asdict(spec), sort_keys=True).encode())
    for fn in (generate, _names, questions, hub_questions, Graph.triples, Graph.entity_iri, Graph.relation_iri):
        h.update(_code_shape(fn).encode())
    h.update(repr((RELATIONS, _ONSETS, _VOWELS, _CODAS, _KINDS, ENTITY_NS, RELATION_NS)).encode())
    for part in (sqlite_triples.SCHEMA, local_index.SCHEMA, OnnxMiniLM.model):
        h.update(part.encode())
    return h.hexdigest()[:16]


async def ensure_loaded(spec: GraphSpec, cache_dir: Path = CACHE_DIR, log=print) -> tuple[Path, dict]:  # type: ignore[no-untyped-def, type-arg]
    """The store home holding `spec`'s graph, loaded through the real loader on first use.

    Returns (home, info) where info records the load time and counts of the cold load.
    """
    home = cache_dir / f"{spec.name}-{cache_key(spec)}"
    marker = home / "loaded.json"
    if marker.exists():
        return home, json.loads(marker.read_text())
    import shutil

    if home.exists():
        shutil.rmtree(home)  # a half-finished load
    t0 = time.perf_counter()
    graph = generate(spec)
    qs, hub_qs = questions(graph), hub_questions(graph)
    gen_s = time.perf_counter() - t0
    log(f"[bench] {spec.name}: generated {len(graph.edges)} edges over {spec.entities} entities in {gen_s:.1f}s")
    t1 = time.perf_counter()
    counts = await load_in_process(StoreSettings(home=home), spec.collection, graph.triples())
    load_s = time.perf_counter() - t1
    degrees = np.bincount(np.concatenate([graph.edges[:, 0], graph.edges[:, 2]]), minlength=spec.entities)
    info = {
        "spec": asdict(spec),
        "generate_s": round(gen_s, 1),
        "load_s": round(load_s, 1),
        "counts": asdict(counts),
        "max_degree": int(degrees.max()),
        "median_degree": float(np.median(degrees)),
        "p99_degree": float(np.percentile(degrees, 99)),
    }
    (home / "questions.json").write_text(json.dumps([asdict(q) for q in qs]))
    (home / "hub_questions.json").write_text(json.dumps([asdict(q) for q in hub_qs]))
    marker.write_text(json.dumps(info))
    log(f"[bench] {spec.name}: loaded {counts} in {load_s:.1f}s (cached at {home})")
    return home, info


async def load_in_process(settings: StoreSettings, collection: str, triples: Iterable[Triple]) -> LoadReport:
    """Load as `kgflow load triples` does on the embedded default: through the triples-store
    service of flow `default`, every processor in this process."""
    from processors.base.client import RequestResponseClient
    from processors.commands.system import embedded
    from processors.commands.transports import LOAD_TIMEOUT_S, FlowLoadSteps
    from processors.ingest.triples.loader import run_load
    from schemas.services import TRIPLES_STORE

    async with embedded(settings) as system:
        client = RequestResponseClient.for_service(system.bus, TRIPLES_STORE, "default", LOAD_TIMEOUT_S)
        try:
            return await run_load(FlowLoadSteps(client, USER, collection), triples)
        finally:
            await client.stop()


def load_questions(home: Path, name: str = "questions") -> list[Question]:
    """The questions saved beside a loaded graph (`questions` or `hub_questions`)."""
    return [Question(**q) for q in json.loads((home / f"{name}.json").read_text())]
