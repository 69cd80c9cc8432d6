/**
 * How the Vela client sends a request: a small subset of `fetch` (which satisfies it, so tests
 * may pass one), and {@link httpTransport}, the default, on node:http and node:https.
 *
 * Why not the global `fetch`: it is undici, which Node loads on first use, ~9 MB of resident
 * memory and ~30 ms for an idle worker that only ever makes small JSON calls (tools/bench startup).
 */

/** One request: what the client sends. */
export interface TransportRequest {
  method: string;
  headers: Record<string, string>;
  body?: string;
  /** Aborts the request and the reading of its answer. */
  signal: AbortSignal;
}

/** One answer: its status and whole body. */
export interface TransportResponse {
  status: number;
  ok: boolean;
  text(): Promise<string>;
}

/** Sends a request; rejects when no answer came (refused, reset, aborted). */
export type Transport = (url: string, request: TransportRequest) => Promise<TransportResponse>;

const http = process.getBuiltinModule('node:http');

// Connections are kept for the next call, as fetch does; an idle kept socket does not hold the
// process open (Node's agent unrefs it).
const plain = { request: http.request, agent: new http.Agent({ keepAlive: true }) };
// node:https (and with it node:tls) is loaded for the first https:// call: a worker whose Vela
// server is plain HTTP never sets up OpenSSL's TLS side (~3 MB; apps/worker/bin/bundle.js).
let secure: typeof plain | undefined;
const secureTransport = (): typeof plain => {
  if (!secure) {
    const https = process.getBuiltinModule('node:https');
    secure = { request: https.request, agent: new https.Agent({ keepAlive: true }) };
  }
  return secure;
};

/**
 * The default transport: node:http or node:https by the URL's scheme, connections kept alive,
 * the body read whole as UTF-8 once the answer's headers came. TLS trusts Node's CA store, with
 * NODE_EXTRA_CA_CERTS (as fetch).
 */
export const httpTransport: Transport = (url, { method, headers, body, signal }) =>
  new Promise((resolve, reject) => {
    const target = new URL(url);
    const { request, agent } = target.protocol === 'https:' ? secureTransport() : plain;
    if (signal.aborted) {
      reject(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason)));
      return;
    }
    const req = request(target, { method, headers, agent, signal }, (res) => {
      const chunks: Buffer[] = [];
      const body = new Promise<string>((done, fail) => {
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.once('end', () => done(Buffer.concat(chunks).toString('utf8')));
        res.once('error', fail);
        res.once('aborted', () => fail(new Error('the connection closed before the whole answer came')));
      });
      // A body that is never read must not be reported as an unhandled rejection.
      body.catch(() => undefined);
      const status = res.statusCode ?? 0;
      resolve({ status, ok: status >= 200 && status < 300, text: () => body });
    });
    req.once('error', reject);
    req.end(body);
  });
