// The sim's HTTP front: routing in the manner of gin (go-vela/server router/*.go), the call log,
// fault injection and the answers. What a route does lives in routes/*.ts.

import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import { type AddressInfo, type Socket } from 'node:net';
import { type FaultRule, FaultTable } from './faults.ts';
import { type TokenClaims, type TokenType } from './jwt.ts';
import type { VelaLog } from './types.ts';

/** One recorded API call, in arrival order. */
export interface CallRecord {
  seq: number;
  method: string;
  /** Path without the query string. */
  path: string;
  /** The query string, without `?`, or ''. */
  query: string;
  /** Answered status; 0 when the call got no answer (timeout or reset fault). */
  status: number;
  /** The token type of the bearer, when it verified. */
  tokenType?: TokenType | undefined;
  /** Size of the request body in bytes. */
  requestBytes: number;
  /** When the request's body had arrived (`performance.timeOrigin + performance.now()`, ms since the epoch, fractional). */
  at: number;
  /** For log PUTs: size of the decoded `data`. */
  logDataBytes?: number | undefined;
  /** The injected fault, if any. */
  fault?: FaultRule['kind'] | undefined;
  /** A short human summary of the request body (first 200 characters; log data replaced by its size). */
  summary: string;
  /**
   * The `status` a JSON object body carried (a build's, step's or worker's), when a string.
   * go-vela/worker sends whole records (sdk-go's Build.Update marshals the api.Build with its repo
   * first), so the status can lie past the summary's 200 characters.
   */
  bodyStatus?: string | undefined;
}

/** An error answer: `{"error": message}` with `status`, as the server's handlers write them. */
export class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** Who called: the verified bearer's claims, and whether the bearer was the shared secret. */
export interface Caller {
  claims: TokenClaims;
  viaSecret: boolean;
}

/** Path parameters by name (`:name` and the catch-all `*name`), URL-decoded. */
export type Params = Record<string, string>;
/** A handler's answer: status and JSON body. */
export type Reply = { status: number; body: unknown };
/** A route handler. Throws {@link HttpError} for error answers. */
type Handler = (req: { caller: Caller; params: Params; body: unknown; query: URLSearchParams; headers: IncomingMessage['headers'] }) => Reply | Promise<Reply>;

interface Route {
  method: string;
  re: RegExp;
  keys: string[];
  handler: Handler;
}

/** The route table. Patterns are anchored, so the order of registration does not matter. */
export class Router {
  readonly #routes: Route[] = [];

  /** Adds a route. `:name` is one segment; a trailing `*name` is the rest of the path (gin's catch-all). */
  route(method: string, pattern: string, handler: Handler): void {
    const keys: string[] = [];
    const source = pattern.replace(/([:*])([a-z]+)/g, (_m, kind: string, k: string) => {
      keys.push(k);
      return kind === '*' ? '(.+)' : '([^/]+)';
    });
    this.#routes.push({ method, re: new RegExp(`^${source}$`), keys, handler });
  }

  /** The route for a call and its decoded parameters, or undefined. */
  match(method: string, path: string): { handler: Handler; params: Params } | undefined {
    const route = this.#routes.find((r) => r.method === method && r.re.test(path));
    if (!route) return undefined;
    const match = route.re.exec(path)!;
    const params: Params = {};
    route.keys.forEach((k, i) => (params[k] = decodeURIComponent(match[i + 1]!)));
    return { handler: route.handler, params };
  }
}

/** The body as a JSON object, or a 400. */
export function asObject(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(400, 'unable to decode JSON: body is not an object');
  return body as Record<string, unknown>;
}

/** Listens on 127.0.0.1 (`port` 0: any free port) and resolves the server and its base URL. */
export async function listen(port: number): Promise<{ server: Server; url: string }> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const address = server.address() as AddressInfo;
  return { server, url: `http://127.0.0.1:${address.port}` };
}

/**
 * Serves a {@link Router} on a listening server: records every call, authenticates the bearer,
 * applies injected faults, and answers JSON (or gin's plain-text 404 for unknown routes).
 */
export class ApiFront {
  /** Every call, in order. */
  readonly calls: CallRecord[] = [];
  /** Pending injected faults. */
  readonly faults = new FaultTable();
  readonly #server: Server;
  readonly #router: Router;
  readonly #authenticate: (req: IncomingMessage) => Caller;
  readonly #sockets = new Set<Socket>();
  #seq = 0;

  constructor(server: Server, router: Router, authenticate: (req: IncomingMessage) => Caller) {
    this.#server = server;
    this.#router = router;
    this.#authenticate = authenticate;
    server.on('connection', (s: Socket) => {
      this.#sockets.add(s);
      s.once('close', () => this.#sockets.delete(s));
    });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => this.#onRequest(req, res));
  }

  /** Stops listening and drops every connection (held ones too). */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const s of this.#sockets) s.destroy();
    this.#server.closeAllConnections();
    await closed;
  }

  #onRequest(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', () => undefined);
    req.on('end', () => void this.#handle(req, res, Buffer.concat(chunks)));
  }

  async #handle(req: IncomingMessage, res: ServerResponse, raw: Buffer): Promise<void> {
    const method = (req.method ?? 'GET').toUpperCase();
    const url = new URL(req.url ?? '/', 'http://sim');
    const path = url.pathname;
    this.#seq += 1;
    const record: CallRecord = {
      seq: this.#seq,
      method,
      path,
      query: url.search.replace(/^\?/, ''),
      status: 0,
      requestBytes: raw.length,
      at: performance.timeOrigin + performance.now(),
      summary: '',
    };
    this.calls.push(record);
    let body: unknown;
    if (raw.length > 0) {
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = undefined;
      }
    }
    record.summary = summarize(body, raw);
    if (body && typeof body === 'object' && typeof (body as { status?: unknown }).status === 'string') record.bodyStatus = (body as { status: string }).status;
    if (body && typeof body === 'object' && typeof (body as VelaLog).data === 'string' && path.endsWith('/logs')) {
      record.logDataBytes = Buffer.byteLength((body as { data: string }).data, 'base64');
    }

    const fault = this.faults.take(method, path);
    if (fault && (fault.when ?? 'before') === 'before') {
      answerFault(res, record, fault);
      return;
    }

    let status: number;
    let payload: unknown;
    const route = this.#router.match(method, path);
    if (!route) {
      // gin's NoRoute answer: plain text, not JSON.
      record.status = 404;
      if (fault) return answerFault(res, record, fault);
      res.writeHead(404, { 'content-type': 'text/plain' }).end('404 page not found');
      return;
    }
    try {
      const caller = this.#authenticate(req);
      record.tokenType = caller.claims.token_type;
      if (raw.length > 0 && body === undefined) throw new HttpError(400, 'unable to decode JSON: invalid character in request body');
      ({ status, body: payload } = await route.handler({ caller, params: route.params, body, query: url.searchParams, headers: req.headers }));
    } catch (e) {
      if (!(e instanceof HttpError)) throw e;
      status = e.status;
      payload = { error: e.message };
    }
    if (fault) {
      answerFault(res, record, fault);
      return;
    }
    record.status = status;
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(payload));
  }
}

function answerFault(res: ServerResponse, record: CallRecord, fault: FaultRule): void {
  record.fault = fault.kind;
  switch (fault.kind) {
    case 'status':
      record.status = fault.status ?? 500;
      res.writeHead(record.status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify({ error: 'injected fault' }));
      return;
    case 'non-json':
      record.status = fault.status ?? 502;
      res.writeHead(record.status, { 'content-type': 'text/html' }).end('<html><body><h1>502 Bad Gateway</h1></body></html>');
      return;
    case 'reset':
      record.status = 0;
      res.socket?.destroy();
      return;
    case 'timeout':
      // Never answered; the socket is dropped when the client gives up or at close().
      record.status = 0;
      return;
  }
}

function summarize(body: unknown, raw: Buffer): string {
  if (raw.length === 0) return '';
  if (body && typeof body === 'object' && typeof (body as VelaLog).data === 'string') {
    const { data, ...rest } = body as VelaLog & Record<string, unknown>;
    return JSON.stringify({ ...rest, data: `<${Buffer.byteLength(data ?? '', 'base64')} bytes>` }).slice(0, 200);
  }
  return raw.toString('utf8').slice(0, 200);
}
