// Triples files read in the page, as `kgflow load triples` reads them (processors/ingest/readers.py):
// TSV `subject<TAB>relation<TAB>object` (each field an entity or relation with a deterministic IRI
// and the label `field.replace('_', ' ')`) and JSONL (plain strings read like a TSV line, or terms
// in TrustGraph's compact or kgflow's long form, passed on for the gateway to check). The triples
// go to the gateway's import socket in TrustGraph's compact form.
import type { Json } from "./api";

export const ENTITY_NS = "http://kgflow.org/e/";
export const RELATION_NS = "http://kgflow.org/r/";
export const RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label";
const FIELDS = ["subject", "relation", "object"];

/** Python's `urllib.parse.quote(s, safe="")`: encodeURIComponent leaves `!'()*` as they are. */
function quote(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
}

/** The IRI of a TSV field (readers.field_iri). */
export function fieldIri(field: string, ns: string = ENTITY_NS): string {
  return ns + quote(field.trim());
}

const iri = (i: string): Json => ({ t: "i", i });

/** The triples of one TSV line: a label for each field, then the edge (readers.tsv_triples). */
export function tsvTriples(s: string, r: string, o: string): Json[] {
  const labelled: [string, string][] = [
    [s, ENTITY_NS],
    [r, RELATION_NS],
    [o, ENTITY_NS],
  ];
  const out: Json[] = labelled.map(([f, ns]) => ({ s: iri(fieldIri(f, ns)), p: iri(RDFS_LABEL), o: { t: "l", v: f.trim().replace(/_/g, " ") } }));
  out.push({ s: iri(fieldIri(s)), p: iri(fieldIri(r, RELATION_NS)), o: iri(fieldIri(o)) });
  return out;
}

function tsvFields(line: string): [string, string, string] {
  let parts = line.split("\t");
  if (parts.length !== 3) parts = parts.filter((p) => p !== ""); // stray trailing tabs
  if (parts.length !== 3) throw new Error(`expected subject<TAB>relation<TAB>object, got ${parts.length} fields`);
  parts.forEach((value, i) => {
    if (!value.trim()) throw new Error(`the ${FIELDS[i]} field is empty`);
  });
  return [parts[0], parts[1], parts[2]];
}

function jsonlTriples(obj: unknown): Json[] {
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) throw new Error('expected an object like {"s": ..., "p": ..., "o": ...}');
  const t = obj as Json;
  if (["s", "p", "o"].every((k) => typeof t[k] === "string")) return tsvTriples(...tsvFields(`${t.s}\t${t.p}\t${t.o}`));
  return [{ s: t.s, p: t.p, o: t.o }];
}

/** Every triple of a `.tsv`/`.txt` or `.jsonl` file; an error names `FILE:LINE`. */
export function parseTriples(name: string, text: string): Json[] {
  const jsonl = name.toLowerCase().endsWith(".jsonl");
  if (!jsonl && !/\.(tsv|txt)$/i.test(name)) throw new Error(`${name}: the page reads .tsv, .txt and .jsonl (use \`kgflow load triples\` for N-Triples and Turtle)`);
  const out: Json[] = [];
  text.split("\n").forEach((raw, i) => {
    const line = raw.replace(/[\r\n]+$/, "");
    if (!line.trim()) return;
    try {
      out.push(...(jsonl ? jsonlTriples(JSON.parse(line)) : tsvTriples(...tsvFields(line))));
    } catch (e) {
      throw new Error(`${name}:${i + 1}: ${e instanceof Error ? e.message : e}`);
    }
  });
  return out;
}

/** Triples in frames of at most `size` (one import frame each). */
export function frames(triples: Json[], size = 1000): Json[][] {
  const out: Json[][] = [];
  for (let i = 0; i < triples.length; i += size) out.push(triples.slice(i, i + size));
  return out;
}
