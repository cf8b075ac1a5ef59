// kgflow explorer: ask a question against a flow, service and collection; watch the answer stream;
// see the subgraph it came from, its citations and what it cost; load documents and triples; list
// collections, documents and communities. Everything goes through the gateway this page came from.
import { Gateway, type Json, probe, RemoteError } from "./api";
import { fetchChunks } from "./chunks";
import { byId, fill, fmt, h, messageOf } from "./dom";
import { answerOf, type ChunkView, EMPTY, type Evidence, evidenceOf } from "./evidence";
import { Explorer } from "./explore";
import { GraphView } from "./graph";
import { Library } from "./library";
import { Loader } from "./load";
import { showAnswer, showEvidence, showStats } from "./results";

const TOKEN_KEY = "kgflow-token"; // sessionStorage: gone when the tab closes, never in a URL

let gateway: Gateway | null = null;
let token = sessionStorage.getItem(TOKEN_KEY) ?? "";
let evidence: Evidence = EMPTY;

const gw = (): Gateway => {
  if (!gateway) throw new RemoteError("unavailable", "not connected");
  return gateway;
};
const flow = (): string => byId<HTMLSelectElement>("flow").value || "default";
const collection = (): string => byId<HTMLSelectElement>("collection").value || "default";
const status = (text: string, cls = ""): void => {
  const el = byId("status");
  el.textContent = text;
  el.className = cls;
};

const graph = new GraphView(byId("graph"), (id, label) => void explorer.tap(id, label));
const explorer = new Explorer(gw, flow, collection, graph);
const library = new Library({
  gw,
  flow,
  collection,
  select: (c) => {
    byId<HTMLSelectElement>("collection").value = c;
    void refreshLibrary();
  },
  draw: (nodes, edges, caption) => {
    graph.show(nodes, edges);
    byId("graph-caption").textContent = caption;
  },
});
new Loader(gw, flow, () => token, (c) => void refreshCollections(c));
// For tests and the browser console: the graph's state (`explorer.cy.nodes(".seed")`).
(window as unknown as Json).explorer = { cy: graph.cy };

/** Ask for a token until the gateway accepts one (the gateway has tokens configured). */
function askToken(message: string): Promise<string> {
  const dialog = byId<HTMLDialogElement>("token-dialog");
  byId("token-error").textContent = message;
  dialog.showModal();
  return new Promise((resolve) => {
    byId("token-form").onsubmit = (ev) => {
      ev.preventDefault();
      dialog.close();
      resolve(byId<HTMLInputElement>("token").value.trim());
    };
  });
}

/** Connect to the gateway (asking for a token while it answers 401); `state` is shown meanwhile. */
async function connect(state = "connecting…", cls = ""): Promise<void> {
  status(state, cls);
  for (;;) {
    let health = await probe(token);
    while (health.needsToken) {
      sessionStorage.removeItem(TOKEN_KEY); // a stored token the gateway no longer accepts is dropped
      token = await askToken(token ? "The gateway did not accept that token." : "This gateway needs a token.");
      health = await probe(token);
    }
    const g = new Gateway(token);
    try {
      await g.connect();
    } catch (e) {
      if (!(e instanceof RemoteError && e.type === "unauthorized")) throw e;
      token = await askToken("The gateway's socket did not accept that token."); // e.g. one bound to a workspace
      continue;
    }
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    g.onClose = reconnect;
    gateway = g;
    const flows = health.flows.length ? health.flows : ["default"];
    fill(byId("flow"), ...flows.map((f) => h("option", { value: f, selected: f === "default" }, f)));
    status(`connected as ${g.workspace}${token ? " (token)" : ""}`, "ok");
    await refreshCollections().catch((e) => status(messageOf(e), "error")); // connected all the same
    return;
  }
}

const RETRY_MS = [500, 1000, 2000, 5000]; // then every 5 s: a restarting gateway takes seconds

/** The socket closed under us: say so, and connect again (same token) until the gateway is back. */
function reconnect(): void {
  gateway = null;
  let attempt = 0;
  const again = (): void => {
    connect("disconnected: reconnecting…", "error").catch(() => setTimeout(again, RETRY_MS[Math.min(attempt++, RETRY_MS.length - 1)]));
  };
  setTimeout(again, RETRY_MS[0]);
}

async function refreshCollections(choose?: string): Promise<void> {
  const current = choose ?? collection();
  const names = await library.collections();
  if (choose && !names.includes(choose)) names.push(choose);
  fill(byId("collection"), ...names.map((c) => h("option", { value: c, selected: c === current }, c)));
  await library.show().catch((e) => status(messageOf(e), "error"));
}

async function refreshLibrary(): Promise<void> {
  await Promise.all([library.collections(), library.show()]).catch((e) => status(messageOf(e), "error"));
}

function step(text: string): void {
  const list = byId("progress");
  list.append(h("li", {}, text));
  list.scrollTop = list.scrollHeight;
}

/** A chunk by id: the answer's own, else fetched from the documents service. */
async function lookupChunk(id: string): Promise<ChunkView | null> {
  return evidence.chunks.find((c) => c.id === id) ?? (await fetchChunks(gw(), flow(), collection(), [id]))[0] ?? null;
}

function requestOf(service: string, query: string): Json {
  const noLlm = byId<HTMLInputElement>("no-llm").checked;
  const body: Json = { query, collection: collection(), no_llm: noLlm };
  if (service === "graph-rag" || service === "drift") body.streaming = true;
  if (service === "kg-query") body.mode = byId<HTMLSelectElement>("mode").value;
  return body;
}

function onFrame(service: string, answer: HTMLElement): (r: Json, complete: boolean) => void {
  return (r, complete) => {
    if (r.message_type === "explain") {
      evidence = evidenceOf(service, r);
      graph.show(evidence.nodes, evidence.edges);
      step(`retrieved ${evidence.nodes.filter((n) => n.seed).length} seeds and ${evidence.edges.length} facts`);
    } else if (r.message_type === "progress" && r.progress) {
      step(`${r.progress.progress_pct}% ${r.progress.phase.replace(/_/g, " ")}: ${r.progress.thought_summary}`);
    } else if (service === "graph-rag" && r.response) {
      answer.textContent += r.response; // graph-rag streams the answer in pieces
      if (!complete) step(`answer: ${answer.textContent!.length} characters`);
    }
  };
}

async function ask(ev: Event): Promise<void> {
  ev.preventDefault();
  const service = byId<HTMLSelectElement>("service").value;
  const query = byId<HTMLTextAreaElement>("question").value.trim();
  if (!query) return;
  const answer = byId("answer");
  const button = byId<HTMLButtonElement>("ask-button");
  fill(answer);
  fill(byId("progress"));
  answer.className = "streaming";
  button.disabled = true;
  evidence = EMPTY;
  step(`asking ${service} in ${flow()}/${collection()}`);
  const began = performance.now();
  try {
    const last = await gw().request(service, flow(), requestOf(service, query), onFrame(service, answer));
    evidence = evidenceOf(service, last);
    if (service !== "graph-rag") showAnswer(answer, answerOf(last), evidence, lookupChunk);
    graph.show(evidence.nodes, evidence.edges);
    byId("graph-caption").textContent = `${service}: ${evidence.nodes.filter((n) => n.seed).length} seeds, ${evidence.edges.length} relations — tap a node to expand it`;
    showEvidence(service, evidence, lookupChunk);
    const extra: Json = { page_wait_ms: fmt(performance.now() - began) };
    for (const k of ["model", "in_token", "out_token", "confidence"]) if (last[k] !== undefined) extra[k] = last[k];
    showStats(evidence.stats, extra);
    step("done");
    answer.className = "done";
  } catch (e) {
    answer.className = "error";
    answer.textContent = e instanceof RemoteError ? `${e.type}: ${e.message}` : messageOf(e);
    step("failed");
  } finally {
    button.disabled = false;
  }
}

function tabs(): void {
  for (const tab of document.querySelectorAll<HTMLButtonElement>("[role=tab]")) {
    tab.addEventListener("click", () => {
      for (const t of document.querySelectorAll<HTMLButtonElement>("[role=tab]")) {
        const on = t === tab;
        t.setAttribute("aria-selected", String(on));
        byId(t.getAttribute("aria-controls")!).hidden = !on;
      }
      if (tab.id === "tab-load-button") byId<HTMLInputElement>("load-collection").value ||= collection();
    });
  }
}

function wire(): void {
  tabs();
  byId("ask").addEventListener("submit", (ev) => void ask(ev));
  byId("service").addEventListener("change", () => {
    byId("mode-label").hidden = byId<HTMLSelectElement>("service").value !== "kg-query";
  });
  byId("collection").addEventListener("change", () => void refreshLibrary());
  byId("refresh").addEventListener("click", () => void refreshCollections());
  byId("chunk-close").addEventListener("click", () => byId<HTMLDialogElement>("chunk-dialog").close());
}

wire();
connect().catch((e) => {
  status(`not connected: ${messageOf(e)}`, "error");
  reconnect(); // e.g. the page was opened before the gateway was up
});
