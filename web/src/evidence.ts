// What each retrieval service returns, in one shape the page draws: the subgraph (seeds marked),
// the chunks and citations, the documents, and the cost. graph-rag speaks TrustGraph's format with
// kgflow's extras (`entities`, `triples`, `stats`); lazy-rag, kg-query and drift speak kgflow's
// schemas (`entities` with `seed`, `relationships`, `chunks`, `citations`).
import type { Json } from "./api";

export interface GraphNode {
  id: string;
  label: string;
  seed: boolean;
  score?: number;
  /** A seed the question names (graph-rag's `lexical`), or one of the best seeds: drawn with a ring. */
  top?: boolean;
}

export interface GraphEdge {
  source: string;
  target: string;
  label: string;
  predicate: string;
  /** Relevance to the question (0-1), when the service scored the edge. */
  score?: number;
  /** Support (e.g. the chunks two concepts co-occur in), when the edge has no score. */
  weight?: number;
}

export interface ChunkView {
  id: string;
  documentId: string;
  title: string;
  text: string;
  ordinal?: number;
  score?: number;
  /** The PDF page or slide the chunk is on, when its file has pages. */
  page?: number;
  /** The heading the chunk falls under, when its file has headings. */
  section?: string;
}

export interface CitationView {
  chunkId: string;
  span: string;
  documentId: string;
  documentName: string;
}

export interface Evidence {
  nodes: GraphNode[];
  edges: GraphEdge[];
  chunks: ChunkView[];
  citations: CitationView[];
  documents: { id: string; title: string; score?: number }[];
  stats: Json | null;
  warnings: string[];
}

export const EMPTY: Evidence = { nodes: [], edges: [], chunks: [], citations: [], documents: [], stats: null, warnings: [] };

/** The readable tail of an IRI (kgflow's TSV IRIs end in the field, percent-encoded). */
export function iriLabel(iri: string): string {
  const tail = iri.replace(/[/#]+$/, "").split("#").pop()!.split("/").pop()!;
  try {
    return decodeURIComponent(tail).replace(/_/g, " ") || iri;
  } catch {
    return tail || iri;
  }
}

const TOP_SEEDS = 3; // seeds drawn with a ring besides those the question names

class Builder {
  private nodes = new Map<string, GraphNode>();
  private edges = new Map<string, GraphEdge>();

  node(id: string, label: string | null | undefined, seed = false, score?: number): void {
    const known = this.nodes.get(id);
    if (known) {
      known.seed ||= seed;
      if (score !== undefined) known.score = Math.max(known.score ?? score, score);
      if (label && known.label === iriLabel(id)) known.label = label;
      return;
    }
    this.nodes.set(id, { id, label: label || iriLabel(id), seed, score });
  }

  edge(source: string, predicate: string, target: string, label: string | null | undefined, score?: number, weight?: number): void {
    this.edges.set(`${source}\u0000${predicate}\u0000${target}`, {
      source,
      target,
      predicate,
      label: label || iriLabel(predicate),
      score: score ?? undefined,
      weight: weight ?? undefined,
    });
  }

  /** The subgraph. Seeds that no edge reaches are left out unless they are among the best
   * (a small graph's seeds can be all of its entities); the best seeds are marked `top`. */
  build(lexical: Set<string> = new Set()): Pick<Evidence, "nodes" | "edges"> {
    const seeds = [...this.nodes.values()].filter((n) => n.seed).sort((a, b) => (b.score ?? 0) - (a.score ?? 0));
    const best = new Set([...seeds.slice(0, TOP_SEEDS).map((n) => n.id), ...lexical]);
    const linked = new Set([...this.edges.values()].flatMap((e) => [e.source, e.target]));
    const nodes = [...this.nodes.values()]
      .filter((n) => linked.has(n.id) || best.has(n.id))
      .map((n) => (n.seed && best.has(n.id) ? { ...n, top: true } : n));
    return { nodes, edges: [...this.edges.values()] };
  }
}

function chunks(list: Json[] | undefined): ChunkView[] {
  return (list ?? []).map((c) => ({
    id: c.id,
    documentId: c.document_id ?? "",
    title: c.title ?? "",
    text: c.text ?? "",
    ordinal: c.ordinal,
    score: c.score ?? undefined,
    page: c.page ?? undefined,
    section: c.section ?? "",
  }));
}

function citation(c: Json | string): CitationView {
  if (typeof c === "string") return { chunkId: c, span: "", documentId: "", documentName: "" };
  return { chunkId: c.chunk_id, span: c.span ?? "", documentId: c.document_id ?? "", documentName: c.document_name ?? "" };
}

function warnings(res: Json): string[] {
  return (res.warnings ?? []).map((w: Json) => w.message ?? String(w));
}

/** graph-rag: `entities` are the candidates its entity search scored; the seeds are those traversal started
 * from (`anchor`); the subgraph is `triples` (labelled, with relevance scores). */
function graphRag(res: Json): Evidence {
  const b = new Builder();
  const lexical = new Set<string>();
  for (const e of res.entities ?? []) {
    if (!e.anchor) continue; // a candidate, not a seed: drawn only if a retrieved fact reaches it
    b.node(e.id, e.label, true, e.score);
    if (e.lexical) lexical.add(e.id);
  }
  for (const t of res.triples ?? []) {
    const target = t.o_id || `literal:${t.o}`;
    b.node(t.s_id, t.s);
    b.node(target, t.o);
    b.edge(t.s_id, t.p_id, target, t.p, t.score ?? undefined);
  }
  const documents = (res.sources ?? []).map((s: Json) => ({ id: s.uri, title: s.title ?? iriLabel(s.uri) }));
  return { ...EMPTY, ...b.build(lexical), documents, stats: res.stats ?? null, warnings: warnings(res) };
}

/** lazy-rag, kg-query, drift: `entities` (with `seed`), `relationships`, `chunks`, `citations`. */
function kgflow(res: Json): Evidence {
  const b = new Builder();
  for (const e of res.entities ?? []) b.node(e.id, e.label, Boolean(e.seed), e.score);
  for (const r of res.relationships ?? []) {
    b.node(r.s, r.s_label);
    b.node(r.o, r.o_label);
    b.edge(r.s, r.p, r.o, r.p_label, r.score ?? undefined, r.weight || undefined);
  }
  const cited: CitationView[] = (res.citations ?? []).map(citation);
  for (const fact of res.key_facts ?? []) for (const c of fact.citations ?? []) cited.push(citation(c));
  const seen = new Set<string>();
  const unique = cited.filter((c) => !seen.has(c.chunkId + c.span) && seen.add(c.chunkId + c.span));
  const documents = (res.documents ?? res.references ?? []).map((d: Json) => ({ id: d.id, title: d.title || d.id, score: d.score }));
  return { ...b.build(), chunks: chunks(res.chunks), citations: unique, documents, stats: res.stats ?? null, warnings: warnings(res) };
}

/** The evidence of a service's answer (graph-rag: its `explain` frame or its last frame). */
export function evidenceOf(service: string, res: Json): Evidence {
  return service === "graph-rag" ? graphRag(res) : kgflow(res);
}

/** The answer text of a service's final frame. */
export function answerOf(res: Json): string {
  return res.final_answer || res.response || "";
}
