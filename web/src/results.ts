// The answer's panels: citations and chunks (each opens its text), source documents, warnings, and
// what the query cost (store round trips, model calls, tokens, ms per stage, label cache hits).
import type { Json } from "./api";
import { chunkItem, openChunk, placeOf } from "./chunks";
import { byId, fill, fmt, h } from "./dom";
import type { ChunkView, Evidence } from "./evidence";
import { markdown } from "./markdown";

/** Looks a chunk up by id: among the answer's chunks first, else from the documents service. */
export type ChunkLookup = (id: string) => Promise<ChunkView | null>;

function statsRows(stats: Json): HTMLTableRowElement[] {
  const rows: HTMLTableRowElement[] = [];
  for (const [key, value] of Object.entries(stats)) {
    if (key === "stage_ms" || value === null || typeof value === "object") continue;
    rows.push(h("tr", {}, h("th", {}, key.replace(/_/g, " ")), h("td", { class: "num" }, fmt(value))));
  }
  const stages = Object.entries((stats.stage_ms ?? {}) as Record<string, number>);
  const longest = Math.max(1, ...stages.map(([, ms]) => ms));
  for (const [stage, ms] of stages) {
    const bar = h("span", { class: "bar", style: `width:${Math.max(2, (100 * ms) / longest).toFixed(0)}%` });
    rows.push(h("tr", { class: "stage" }, h("th", {}, `${stage.replace(/_/g, " ")} ms`), h("td", { class: "num" }, fmt(ms), bar)));
  }
  return rows;
}

/** Show the cost of a query (`extra` adds rows, e.g. the time the page waited). */
export function showStats(stats: Json | null, extra: Json = {}): void {
  fill(byId("stats"), ...statsRows({ ...(stats ?? {}), ...extra }));
}

/** Show the final answer, its Markdown rendered (as elements, never as HTML: see markdown.ts); a `[chunk id]`
 * it names (lazy-rag and kg-query cite that way; with no model, `[chunk id, p. 3]`) opens that chunk. */
export function showAnswer(el: HTMLElement, text: string, ev: Evidence, lookup: ChunkLookup): void {
  const known = new Set(ev.chunks.map((c) => c.id));
  const citations = (plain: string): (Node | string)[] => {
    // split() with two groups: text, chunk id, its ", page or section" (or undefined), text, ...
    const parts = plain.split(/\[([0-9A-Za-z_-]{6,64})(, [^[\]\n]{1,200})?\]/);
    const out: (Node | string)[] = [];
    for (let i = 0; i < parts.length; i += 3) {
      out.push(parts[i]);
      if (i + 1 >= parts.length) break;
      const id = parts[i + 1];
      const label = `[${id}${parts[i + 2] ?? ""}]`;
      if (!known.has(id)) {
        out.push(label);
        continue;
      }
      const cite = h("button", { type: "button", class: "link cite", dataset: { chunk: id } }, label);
      cite.addEventListener("click", async () => {
        const chunk = await lookup(id);
        if (chunk) openChunk(chunk);
      });
      out.push(cite);
    }
    return out;
  };
  fill(el, ...markdown(text, citations));
}

/** Show an answer's evidence: citations, chunks, documents (graph-rag: its source entities) and warnings. */
export function showEvidence(service: string, ev: Evidence, lookup: ChunkLookup): void {
  byId("documents-heading").textContent = service === "graph-rag" ? "Sources (entities)" : "Documents";
  const cite = ev.citations.map((c, i) =>
    chunkItem(`[${i + 1}] ${c.documentName || c.documentId || c.chunkId}`, c.span ? `“${c.span.slice(0, 120)}”` : "", () => lookup(c.chunkId), c.span),
  );
  fill(byId("citations"), ...(cite.length ? cite : [h("li", { class: "muted" }, "no citations (they come with a model's answer)")]));
  const chunks = ev.chunks.map((c, i) =>
    chunkItem(
      `${i + 1}. ${c.title || c.documentId}`,
      [placeOf(c), c.score === undefined ? "" : `score ${fmt(c.score)}`].filter(Boolean).join(" · "),
      async () => c,
    ),
  );
  fill(byId("chunks"), ...(chunks.length ? chunks : [h("li", { class: "muted" }, "no chunks")]));
  const docs = ev.documents.map((d) => h("li", {}, h("strong", {}, d.title), h("span", { class: "muted" }, ` ${d.id}${d.score === undefined ? "" : ` · ${fmt(d.score)}`}`)));
  fill(byId("documents"), ...(docs.length ? docs : [h("li", { class: "muted" }, "none")]));
  fill(byId("warnings"), ...ev.warnings.map((w) => h("li", {}, w)));
}
