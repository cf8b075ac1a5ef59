// Chunks: fetched by id from the documents service, and shown in a dialog with their document and
// the cited span marked.
import type { Gateway, Json } from "./api";
import { byId, fill, h } from "./dom";
import type { ChunkView } from "./evidence";

/** Chunks by id (`documents` service, `get`), in the order asked. */
export async function fetchChunks(gw: Gateway, flow: string, collection: string, ids: string[]): Promise<ChunkView[]> {
  if (!ids.length) return [];
  const res = await gw.request("documents", flow, { operation: "get", collection, chunk_ids: ids });
  const byChunk = new Map<string, Json>((res.chunks ?? []).map((c: Json) => [c.id, c]));
  return ids
    .map((id) => byChunk.get(id))
    .filter((c): c is Json => c !== undefined)
    .map((c) => ({
      id: c.id,
      documentId: c.document_id,
      title: c.title ?? "",
      text: c.text ?? "",
      ordinal: c.ordinal,
      page: c.page ?? undefined,
      section: c.section ?? "",
    }));
}

/** Where in its file a chunk is: its page (PDF page, slide) or section, as a citation names it. */
export function placeOf(chunk: ChunkView): string {
  return chunk.page ? `p. ${chunk.page}` : chunk.section ?? "";
}

function marked(text: string, span: string): (Node | string)[] {
  const at = span ? text.indexOf(span) : -1;
  if (at < 0) return [text];
  return [text.slice(0, at), h("mark", {}, span), text.slice(at + span.length)];
}

/** Open the chunk dialog: the chunk's text (the cited span marked), the document it is from and
 * where in the file (page or section). */
export function openChunk(chunk: ChunkView, span = ""): void {
  fill(byId("chunk-title"), chunk.title || chunk.documentId);
  const place = placeOf(chunk);
  const where = (place ? ` · ${place}` : "") + (chunk.ordinal === undefined ? "" : ` · chunk ${chunk.ordinal + 1}`);
  fill(byId("chunk-meta"), "document ", h("code", {}, chunk.documentId), where, " · ", h("code", {}, chunk.id));
  fill(byId("chunk-text"), ...marked(chunk.text, span));
  const dialog = byId<HTMLDialogElement>("chunk-dialog");
  if (!dialog.open) dialog.showModal();
}

/** A list item that opens a chunk (`load` fetches it when only its id is known). */
export function chunkItem(label: string, detail: string, load: () => Promise<ChunkView | null>, span = ""): HTMLLIElement {
  const button = h("button", { type: "button", class: "link" }, label);
  const item = h("li", {}, button, detail ? h("span", { class: "muted" }, ` ${detail}`) : null);
  button.addEventListener("click", async () => {
    const chunk = await load();
    if (chunk) openChunk(chunk, span);
    else item.append(h("span", { class: "error" }, " (chunk not found)"));
  });
  return item;
}
