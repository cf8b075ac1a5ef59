// The Load tab: documents through the gateway's `text-load` service (one request per document, with
// kgflow's progress frames) — PDF, Word, PowerPoint and web pages as their bytes through
// `document-load`, which reads them on the gateway — then a rebuild of the collection's
// communities, as `kgflow load documents` does; a file the gateway refuses is named with the reason
// and the others load. Triples files go through the import socket, with progress from its
// acknowledgements.
import { type Gateway, type Json, importTriples } from "./api";
import { byId, h, messageOf } from "./dom";
import { frames, parseTriples, RDFS_LABEL } from "./triples";

interface Doc {
  id: string;
  title: string;
  text: string;
  bytes?: Uint8Array; // a PDF, DOCX, PPTX or HTML file, read by the gateway
  kind?: string; // its content type
}

/** Files the gateway reads from their bytes (processors/ingest/documents/formats/). */
const FILE_FORMATS = /\.(pdf|docx|pptx|html?|xhtml)$/i;

/** The documents of a file, as processors/ingest/documents/files.py reads them (JSONL: one a line;
 * text: id = file name, title = a markdown file's first `# ` heading, else the file name). */
function documentsOf(name: string, text: string): Doc[] {
  if (name.toLowerCase().endsWith(".jsonl")) {
    return text
      .split("\n")
      .filter((l) => l.trim())
      .map((line, i) => {
        const d = JSON.parse(line);
        if (typeof d?.id !== "string" || typeof d?.text !== "string") throw new Error(`${name}:${i + 1}: a document needs "id" and "text"`);
        return { id: d.id, title: d.title ?? "", text: d.text };
      });
  }
  const first = text.trimStart().split("\n", 1)[0];
  const heading = /\.(md|markdown)$/i.test(name) && first.startsWith("# ") ? first.slice(2).trim() : "";
  return [{ id: name, title: heading || name, text }];
}

function base64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

/** Wires the Load tab; `done` is called after a load changed a collection. */
export class Loader {
  private bar = byId<HTMLProgressElement>("load-progress");
  private log = byId<HTMLOListElement>("load-log");

  constructor(
    private gw: () => Gateway,
    private flow: () => string,
    private token: () => string,
    private done: (collection: string) => void,
  ) {
    byId("load-documents").addEventListener("click", () => void this.run(this.documents.bind(this), "doc-files"));
    byId("load-triples").addEventListener("click", () => void this.run(this.triples.bind(this), "triples-file"));
  }

  private note(text: string, cls = ""): void {
    this.log.append(h("li", { class: cls }, text));
    this.log.scrollTop = this.log.scrollHeight;
  }

  private progress(value: number, max: number): void {
    this.bar.max = Math.max(max, 1);
    this.bar.value = value;
  }

  private async run(job: (files: File[], collection: string) => Promise<void>, inputId: string): Promise<void> {
    const files = [...(byId<HTMLInputElement>(inputId).files ?? [])];
    const collection = byId<HTMLInputElement>("load-collection").value.trim();
    if (!files.length || !collection) {
      this.note("choose a file and a collection first", "error");
      return;
    }
    byId("load-state").textContent = "loading…";
    try {
      await job(files, collection);
      byId("load-state").textContent = "done";
      this.done(collection);
    } catch (e) {
      byId("load-state").textContent = "failed";
      this.note(messageOf(e), "error");
    }
  }

  private async documents(files: File[], collection: string): Promise<void> {
    const docs: Doc[] = [];
    for (const f of files) {
      if (FILE_FORMATS.test(f.name)) docs.push({ id: f.name, title: "", text: "", bytes: new Uint8Array(await f.arrayBuffer()), kind: f.type });
      else docs.push(...documentsOf(f.name, await f.text()));
    }
    let loaded = 0;
    let chunks = 0;
    let refused = 0;
    for (const [i, d] of docs.entries()) {
      this.progress(i, docs.length);
      let service = "text-load";
      let request: Json = { id: d.id, collection, streaming: true };
      if (d.bytes) {
        service = "document-load"; // the file's own title, pages and headings come from the gateway
        request = { ...request, data: base64(d.bytes), kind: d.kind ?? "" };
      } else {
        const metadata = [{ s: { t: "i", i: d.id }, p: { t: "i", i: RDFS_LABEL }, o: { t: "l", v: d.title } }];
        request = { ...request, text: base64(new TextEncoder().encode(d.text)), charset: "utf-8", metadata };
      }
      try {
        const report = await this.gw().request(service, this.flow(), request, (r: Json, complete) => {
          if (!complete) byId("load-state").textContent = `${d.id}: ${r.stage} ${r.done}`;
        });
        loaded += report.loaded;
        chunks += report.chunks;
        this.note(`${d.id}: ${report.loaded ? `${report.chunks} chunks` : "unchanged"}`);
      } catch (e) {
        refused += 1;
        this.note(`${d.id}: not loaded: ${messageOf(e)}`, "error");
      }
    }
    this.progress(docs.length, docs.length);
    const skipped = refused ? `, ${refused} not loaded` : "";
    this.note(`loaded ${loaded} of ${docs.length} documents (${chunks} chunks${skipped}) into ${collection}`);
    if (loaded) {
      byId("load-state").textContent = "building communities…";
      const built = await this.gw().request("community-build", this.flow(), { operation: "build", collection });
      const levels = Object.entries(built.levels ?? {}).map(([lv, n]) => `level ${lv}: ${n}`);
      this.note(`communities rebuilt (${levels.join(", ") || "none"})`);
    }
  }

  private async triples(files: File[], collection: string): Promise<void> {
    for (const f of files) {
      const triples = parseTriples(f.name, await f.text());
      this.note(`${f.name}: ${triples.length} triples read`);
      this.progress(0, triples.length);
      const stored = await importTriples(this.token(), this.flow(), collection, frames(triples), (n, total) => {
        this.progress(n, total);
        byId("load-state").textContent = `${n} of ${total} triples stored`;
      });
      this.note(`${f.name}: ${stored} triples stored in ${collection}`);
    }
  }
}
