// The gateway, as the page talks to it: one multiplexed websocket (TrustGraph framing, see
// docs/clients.md) for every service, REST only for the probe (the flow list, whose 401 tells the
// page to ask for a token), and the triples import socket.

/** A JSON object as the gateway sends it. */
export type Json = Record<string, any>;

/** An error frame's `{type, message}`. */
export class RemoteError extends Error {
  constructor(
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

/** What the gateway says to the page's token (or to none). */
export interface Health {
  /** The gateway answered 401: it has tokens and the page's token is not one of them (or there is none). */
  needsToken: boolean;
  flows: string[];
}

/** Called with each frame of a streamed answer (the last one too). */
export type OnFrame = (response: Json, complete: boolean) => void;

interface Pending {
  onFrame?: OnFrame;
  resolve: (last: Json) => void;
  reject: (e: Error) => void;
}

function wsBase(): string {
  return (location.protocol === "https:" ? "wss://" : "ws://") + location.host;
}

/** List the flows over REST with the token (a Bearer header, never in the URL): a 401 means the
 * gateway wants a token the page does not have; an open gateway on loopback answers without one. */
export async function probe(token: string): Promise<Health> {
  const headers: HeadersInit = { "Content-Type": "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  const res = await fetch("/api/v1/flow", { method: "POST", headers, cache: "no-store", body: JSON.stringify({ operation: "list-flows" }) });
  if (res.status === 401) return { needsToken: true, flows: [] };
  const body: Json = await res.json().catch(() => ({}));
  if (!res.ok) throw new RemoteError(body.error?.type ?? "unavailable", body.error?.message ?? `the gateway answered ${res.status}`);
  return { needsToken: false, flows: body["flow-ids"] ?? [] };
}

/** The gateway's socket: authenticate once, then any number of concurrent requests. */
export class Gateway {
  workspace = "default";
  private ws: WebSocket | null = null;
  private pending = new Map<string, Pending>();
  private next = 1;

  /** Called once when an authenticated socket closes (the gateway restarted, the network dropped). */
  onClose: () => void = () => {};

  constructor(readonly token: string) {}

  /** Open the socket and send the auth frame; rejects with the gateway's reason when it refuses
   * (type `unauthorized`: the page asks for a token again). */
  connect(): Promise<void> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(`${wsBase()}/api/v1/socket`);
      let authed = false;
      ws.onopen = () => ws.send(JSON.stringify({ type: "auth", token: this.token }));
      ws.onmessage = (ev) => {
        const frame: Json = JSON.parse(String(ev.data));
        if (!authed) {
          if (frame.type === "auth-ok") {
            authed = true;
            this.workspace = frame.default_workspace ?? "default";
            this.ws = ws;
            resolve();
          } else {
            reject(new RemoteError("unauthorized", String(frame.error ?? "authentication failed")));
          }
          return;
        }
        this.onFrame(frame);
      };
      ws.onclose = () => {
        if (!authed) reject(new RemoteError("unavailable", "the gateway closed the socket"));
        this.ws = null;
        for (const p of this.pending.values()) p.reject(new RemoteError("unavailable", "the socket closed"));
        this.pending.clear();
        if (authed) this.onClose();
      };
    });
  }

  get connected(): boolean {
    return this.ws !== null;
  }

  private onFrame(frame: Json): void {
    const p = this.pending.get(String(frame.id));
    if (!p) return;
    if (frame.error) {
      this.pending.delete(String(frame.id));
      p.reject(new RemoteError(frame.error.type, frame.error.message));
      return;
    }
    p.onFrame?.(frame.response ?? {}, Boolean(frame.complete));
    if (frame.complete) {
      this.pending.delete(String(frame.id));
      p.resolve(frame.response ?? {});
    }
  }

  /** One request (a flow service when `flow` is set, else a workspace service); resolves with the
   * last frame, after handing every frame to `onFrame`. */
  request(service: string, flow: string | null, request: Json, onFrame?: OnFrame): Promise<Json> {
    const ws = this.ws;
    if (!ws) return Promise.reject(new RemoteError("unavailable", "not connected to the gateway"));
    const id = `p${this.next++}`;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { onFrame, resolve, reject });
      const frame: Json = { id, service, request };
      if (flow) frame.flow = flow;
      ws.send(JSON.stringify(frame));
    });
  }

  close(): void {
    this.ws?.close();
    this.ws = null;
  }
}

/** Progress of an import: triples acknowledged (durably stored) so far, of all sent. */
export type OnAck = (stored: number, total: number) => void;

/** Send `frames` of compact triples to the import socket of `flow` and wait until every triple is
 * acknowledged (a refused frame rejects). A browser cannot set headers on a websocket, so the token
 * travels as `?token=`, which this endpoint alone accepts (TrustGraph's bulk client sends it there). */
export function importTriples(
  token: string,
  flow: string,
  collection: string,
  frames: Json[][],
  onAck: OnAck,
): Promise<number> {
  const total = frames.reduce((n, f) => n + f.length, 0);
  const query = token ? `?token=${encodeURIComponent(token)}` : "";
  const ws = new WebSocket(`${wsBase()}/api/v1/flow/${encodeURIComponent(flow)}/import/triples${query}`);
  let stored = 0;
  return new Promise((resolve, reject) => {
    ws.onopen = () => {
      frames.forEach((triples, i) => {
        ws.send(JSON.stringify({ metadata: { id: `page-${i}`, collection, metadata: [] }, triples }));
      });
      if (total === 0) ws.close();
    };
    ws.onmessage = (ev) => {
      const reply: Json = JSON.parse(String(ev.data));
      if (reply.error) {
        ws.close();
        reject(new RemoteError(reply.error.type, reply.error.message));
      } else if (reply.ack) {
        stored += reply.ack.triples;
        onAck(stored, total);
        if (stored >= total) ws.close();
      }
    };
    ws.onclose = () => (stored >= total ? resolve(stored) : reject(new RemoteError("unavailable", "import closed")));
  });
}
