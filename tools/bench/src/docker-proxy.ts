/**
 * A recording proxy in front of the Docker engine's unix socket, for start-up benchmarks: a
 * process given `DOCKER_HOST=unix://<proxy.socket>` talks to the real engine through it, and the
 * proxy notes when each request arrived and when the engine's response headers came back. From
 * that it tells when a container's `start` call first reached the engine and how much of the
 * time before it the engine itself was busy answering (the union of request intervals), so a
 * benchmark can report the client's own start-up time with engine time excluded.
 *
 * Streaming responses (logs, wait) count as busy only until their headers arrive: the engine has
 * answered then, and what follows is the container running, not the engine serving a call.
 */
import { request, createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** One request the proxy forwarded: method, path, and when it arrived and was answered (performance.now()). */
export interface ProxiedCall {
  method: string;
  path: string;
  arrived: number;
  answered?: number;
}

/** The recording proxy; `close()` removes its socket. */
export interface DockerProxy {
  /** `unix:///…/docker.sock` to hand the client as DOCKER_HOST. */
  readonly dockerHost: string;
  /** Every request so far, in arrival order. */
  readonly calls: readonly ProxiedCall[];
  /** Resolves with the first `POST /containers/{id}/start` call once it arrives. */
  firstStart(): Promise<ProxiedCall>;
  /** Forgets the calls recorded so far (between runs). */
  reset(): void;
  close(): Promise<void>;
}

const START = /^\/(?:v[\d.]+\/)?containers\/[^/]+\/start(?:\?|$)/;

/** Starts a proxy to the engine socket `engineSocket` (default DOCKER_HOST's unix path or /var/run/docker.sock). */
export async function startDockerProxy(engineSocket = defaultEngineSocket()): Promise<DockerProxy> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-docker-proxy-'));
  const socket = path.join(dir, 'docker.sock');
  let calls: ProxiedCall[] = [];
  let waiters: Array<(call: ProxiedCall) => void> = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const call: ProxiedCall = { method: req.method ?? 'GET', path: req.url ?? '/', arrived: performance.now() };
    calls.push(call);
    if (call.method === 'POST' && START.test(call.path)) {
      for (const resolve of waiters) resolve(call);
      waiters = [];
    }
    // The request body (small JSON on these paths) is read whole and sent with the request, one
    // connection per call: streaming it into a kept-alive socket the engine closed meanwhile, or
    // after the engine answered, failed with EPIPE under load.
    const body: Buffer[] = [];
    req.on('data', (b: Buffer) => body.push(b));
    req.on('end', () => {
      const upstream = request({ socketPath: engineSocket, agent: false, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        call.answered = performance.now();
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        // Headers go out now, as the engine sent them: a client may wait for them (a `wait` call
        // is subscribed before `start`) while the body is still to come.
        res.flushHeaders();
        answer.pipe(res);
      });
      upstream.on('error', (error) => {
        if (call.answered !== undefined) return; // answered already: the engine closed its side
        call.answered = performance.now();
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`bench docker proxy: ${error.message}`);
      });
      res.on('close', () => upstream.destroy());
      upstream.end(Buffer.concat(body));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, resolve);
  });
  return {
    dockerHost: `unix://${socket}`,
    get calls() {
      return calls;
    },
    firstStart() {
      const seen = calls.find((c) => c.method === 'POST' && START.test(c.path));
      return seen ? Promise.resolve(seen) : new Promise((resolve) => waiters.push(resolve));
    },
    reset() {
      calls = [];
      waiters = [];
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Milliseconds the engine was busy answering calls that arrived before `until`: the union of
 * their [arrived, answered] intervals, each cut at `until` (overlapping calls count once).
 */
export function engineBusyBefore(calls: readonly ProxiedCall[], until: number): number {
  const intervals = calls
    .filter((c) => c.arrived < until)
    .map((c) => [c.arrived, Math.min(c.answered ?? until, until)] as const)
    .sort((a, b) => a[0] - b[0]);
  let busy = 0;
  let end = -Infinity;
  for (const [from, to] of intervals) {
    if (to <= end) continue;
    busy += to - Math.max(from, end);
    end = to;
  }
  return busy;
}

function defaultEngineSocket(): string {
  const host = process.env.DOCKER_HOST;
  if (host?.startsWith('unix://')) return host.slice('unix://'.length);
  if (host) throw new Error(`the start-up benchmark proxies a unix socket; DOCKER_HOST=${host} is not one`);
  return '/var/run/docker.sock';
}
