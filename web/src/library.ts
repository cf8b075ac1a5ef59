// The Collections tab: the workspace's collections with their counts, a collection's documents and
// its communities by level (size, chunks, profile, the lazy summary on demand, drawn as a graph).
import type { Gateway, Json } from "./api";
import { chunkItem, fetchChunks } from "./chunks";
import { byId, fill, fmt, h, messageOf } from "./dom";
import { type GraphEdge, type GraphNode, iriLabel } from "./evidence";

export interface LibraryHost {
  gw(): Gateway;
  flow(): string;
  collection(): string;
  /** Choose a collection (the header's select follows). */
  select(collection: string): void;
  /** Draw a subgraph in the graph panel. */
  draw(nodes: GraphNode[], edges: GraphEdge[], caption: string): void;
}

export class Library {
  constructor(private host: LibraryHost) {
    byId("community-level").addEventListener("change", () => void this.communities());
  }

  private request(service: string, request: Json): Promise<Json> {
    return this.host.gw().request(service, this.host.flow(), request);
  }

  /** The collections (also fills the header's select); returns their names. */
  async collections(): Promise<string[]> {
    const res = await this.request("documents", { operation: "list-collections" });
    const rows = (res.collections ?? []).map((c: Json) =>
      h(
        "tr",
        { class: c.collection === this.host.collection() ? "current" : "", onclick: () => this.host.select(c.collection) },
        h("td", {}, h("button", { type: "button", class: "link" }, c.collection)),
        ...["documents", "chunks", "entities", "triples", "communities"].map((k) => h("td", { class: "num" }, fmt(c[k] ?? 0))),
      ),
    );
    fill(byId("collections"), ...rows);
    return (res.collections ?? []).map((c: Json) => c.collection);
  }

  /** The current collection's documents and communities. */
  async show(): Promise<void> {
    await Promise.all([this.documents(), this.communities()]);
  }

  private async documents(): Promise<void> {
    const res = await this.request("documents", { operation: "list-documents", collection: this.host.collection(), limit: 500 });
    const docs: Json[] = res.documents ?? [];
    fill(
      byId("documents-list"),
      ...(docs.length ? docs.map((d) => h("li", {}, h("strong", {}, d.title || d.id), h("span", { class: "muted" }, ` ${d.id} · ${d.chunks} chunks`))) : [h("li", { class: "muted" }, "no documents")]),
    );
  }

  private async communities(): Promise<void> {
    const level = byId<HTMLSelectElement>("community-level").value;
    const req: Json = { operation: "list", collection: this.host.collection(), limit: 200 };
    if (level !== "") req.level = Number(level);
    const res = await this.request("communities", req);
    const list: Json[] = res.communities ?? [];
    const rows = list.map((c) =>
      h(
        "tr",
        { onclick: () => void this.community(c) },
        h("td", { class: "num" }, c.level),
        h("td", { class: "num" }, c.size),
        h("td", { class: "num" }, c.chunks),
        h("td", {}, h("button", { type: "button", class: "link" }, (c.top_entity_labels ?? []).slice(0, 4).join(", ") || c.id)),
      ),
    );
    fill(byId("communities"), ...(rows.length ? rows : [h("tr", {}, h("td", { colspan: 4, class: "muted" }, "no communities (load documents first)"))]));
    if (level === "") {
      const levels = [...new Set(list.map((c) => c.level as number))].sort((a, b) => a - b);
      fill(byId("community-level"), h("option", { value: "" }, "all levels"), ...levels.map((lv) => h("option", { value: lv }, `level ${lv}`)));
    }
  }

  /** A community's profile; its summary on demand; its top entities drawn with their relations. */
  private async community(c: Json): Promise<void> {
    const summary = h("p", { class: "summary" }, c.summary ?? "No summary yet: the profile stands in until a query (or the button) asks for one.");
    const summarize = h("button", { type: "button" }, "Summarize");
    summarize.addEventListener("click", async () => {
      summary.textContent = "summarizing…";
      try {
        const res = await this.request("communities", { operation: "summarize", collection: this.host.collection(), ids: [c.id] });
        summary.textContent = res.communities?.[0]?.summary ?? "(no summary)";
      } catch (e) {
        summary.textContent = messageOf(e);
      }
    });
    const drawButton = h("button", { type: "button" }, "Draw in graph");
    drawButton.addEventListener("click", () => void this.draw(c));
    const collection = this.host.collection();
    const chunkList = h(
      "ul",
      { class: "chunks" },
      ...(c.top_chunks ?? []).map((id: string, i: number) =>
        chunkItem(`representative chunk ${i + 1}`, "", async () => (await fetchChunks(this.host.gw(), this.host.flow(), collection, [id]))[0] ?? null),
      ),
    );
    fill(
      byId("community"),
      h("h3", {}, `Community ${c.id}`),
      h("p", { class: "muted" }, `level ${c.level} · ${c.size} entities · ${c.chunks} chunks${c.parent ? ` · parent ${c.parent}` : ""}${c.children?.length ? ` · ${c.children.length} sub-communities` : ""}${c.stale ? " · stale" : ""}`),
      h("p", {}, h("strong", {}, "Top entities: "), (c.top_entity_labels ?? []).join(", ")),
      summary,
      h("div", { class: "row" }, summarize, drawButton),
      chunkList,
    );
  }

  private async draw(c: Json): Promise<void> {
    const ids: string[] = c.top_entities ?? [];
    const labels: string[] = c.top_entity_labels ?? [];
    const nodes: GraphNode[] = ids.map((id, i) => ({ id, label: labels[i] ?? id, seed: false }));
    const edges: GraphEdge[] = [];
    if (ids.length) {
      const res = await this.request("documents", { operation: "relations", collection: this.host.collection(), entities: ids, limit: 100 });
      for (const r of res.relations ?? []) edges.push({ source: r.s, target: r.o, predicate: r.p, label: r.p_label || iriLabel(r.p), weight: r.weight || undefined });
    }
    this.host.draw(nodes, edges, `community ${c.id}: its top entities and the relations among them`);
  }
}
