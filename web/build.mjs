// Build the explorer into the Python package: `node build.mjs [OUTDIR]` (default
// ../processors/gateway/static). The output is committed, so neither `pip install` nor the gateway
// needs Node; tests/web/test_bundle.py rebuilds into a temporary folder and compares. The page's
// skeleton, static/index.html, is not built: it is written there, once.
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] ?? join(here, "..", "processors", "gateway", "static"));
mkdirSync(out, { recursive: true });

await build({
  entryPoints: [join(here, "src", "main.ts")],
  outfile: join(out, "explorer.js"),
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: true,
  legalComments: "eof", // cytoscape's licence notice stays in the bundle
  logLevel: "warning",
});
await build({
  entryPoints: [join(here, "src", "style.css")],
  outfile: join(out, "explorer.css"),
  bundle: true,
  minify: true,
  logLevel: "warning",
});
