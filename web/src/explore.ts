// A tapped node: one hop of its neighbourhood from the `triples` service (both directions, labels
// fetched for what is new), and the chunks that mention it from the `documents` service's links.
import type { Gateway, Json } from "./api";
import { chunkItem, fetchChunks } from "./chunks";
import { byId, fill, h, messageOf } from "./dom";
import { type GraphEdge, type GraphNode, iriLabel } from "./evidence";
import type { GraphView } from "./graph";
import { RDFS_LABEL } from "./triples";

const HOP_LIMIT = 40; // edges read per direction
const NEW_NODES = 25; // neighbours added per tap, so one hub does not bury the picture

const iri = (i: string): Json => ({ t: "i", i });

export class Explorer {
  constructor(
    private gw: () => Gateway,
    private flow: () => string,
    private collection: () => string,
    private graph: GraphView,
  ) {}

  private triples(pattern: Json, limit: number): Promise<Json[]> {
    return this.gw()
      .request("triples", this.flow(), { ...pattern, collection: this.collection(), limit })
      .then((r) => r.response ?? []);
  }

  /** Labels of IRIs, one small pattern query each, sent together on the one socket. */
  private async labels(iris: string[]): Promise<Map<string, string>> {
    const found = await Promise.all(iris.map((i) => this.triples({ s: iri(i), p: iri(RDFS_LABEL) }, 1).catch(() => [])));
    const out = new Map<string, string>();
    found.forEach((ts, n) => ts[0]?.o?.v && out.set(iris[n], ts[0].o.v));
    return out;
  }

  /** Expand `id` one hop in the graph and show what mentions it. */
  async tap(id: string, label: string): Promise<void> {
    const panel = byId("entity");
    const status = h("p", { class: "muted" }, "expanding one hop…");
    const chunks = h("ul", { class: "chunks" }, h("li", { class: "muted" }, "looking for chunks that mention it…"));
    fill(panel, h("h3", {}, label), h("p", {}, h("code", {}, id)), status, h("h4", {}, "Mentioned in"), chunks);
    await Promise.all([this.hop(id, status), this.mentions(id, chunks)]);
  }

  private async hop(id: string, status: HTMLElement): Promise<void> {
    try {
      const [out, inward] = await Promise.all([this.triples({ s: iri(id) }, HOP_LIMIT), this.triples({ o: iri(id) }, HOP_LIMIT)]);
      const edges: GraphEdge[] = [];
      const neighbours: string[] = [];
      for (const t of [...out, ...inward]) {
        if (t.p?.i === RDFS_LABEL || t.s?.t !== "i" || t.o?.t !== "i") continue; // labels and literals are not drawn
        const other = t.s.i === id ? t.o.i : t.s.i;
        if (!this.graph.node(other) && !neighbours.includes(other)) {
          if (neighbours.length >= NEW_NODES) continue;
          neighbours.push(other);
        }
        edges.push({ source: t.s.i, target: t.o.i, predicate: t.p.i, label: iriLabel(t.p.i) });
      }
      const nodes: GraphNode[] = neighbours.map((n) => ({ id: n, label: iriLabel(n), seed: false }));
      const added = this.graph.expand(nodes, edges);
      status.textContent = `one hop: ${edges.length} edges, ${added} new neighbours`;
      const predicates = [...new Set(edges.map((e) => e.predicate))];
      const labels = await this.labels([...neighbours, ...predicates]);
      this.graph.relabel(labels);
      for (const e of this.graph.cy.edges(".hop")) {
        const p = labels.get(e.data("predicate"));
        if (p) e.data("text", p);
      }
    } catch (e) {
      status.textContent = `expanding failed: ${messageOf(e)}`;
    }
  }

  private async mentions(id: string, list: HTMLElement): Promise<void> {
    try {
      const res = await this.gw().request("documents", this.flow(), { operation: "links", collection: this.collection(), entities: [id], per_entity: 8 });
      const ids: string[] = [...new Set<string>((res.links?.mentions ?? []).map((m: Json) => m.chunk_id))];
      const found = await fetchChunks(this.gw(), this.flow(), this.collection(), ids);
      fill(
        list,
        ...(found.length
          ? found.map((c) => chunkItem(c.title || c.documentId, `chunk ${(c.ordinal ?? 0) + 1}`, async () => c))
          : [h("li", { class: "muted" }, "no chunk mentions it (triples loaded without documents)")]),
      );
    } catch (e) {
      fill(list, h("li", { class: "error" }, messageOf(e)));
    }
  }
}
