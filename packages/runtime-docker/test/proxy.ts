import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/**
 * A unix-socket proxy to the Docker engine that a test can cut (every connection reset, the socket
 * gone: what a runtime sees when dockerd dies) and reopen (dockerd is back).
 */
export class EngineProxy {
  readonly path: string;
  readonly #dir: string;
  readonly #target: string;
  readonly #sockets = new Set<net.Socket>();
  #server: net.Server | undefined;

  /** Requests answered `505 HTTP Version Not Supported` because they were HTTP/1.0 (see `refuseHttp10`). */
  refused = 0;
  readonly #refuseHttp10: boolean;

  /**
   * With `refuseHttp10`, it plays a proxy in front of the engine that takes only HTTP/1.1: a
   * connection whose first request is HTTP/1.0 gets a 505 and is closed.
   */
  constructor(target = engineSocketPath(), { refuseHttp10 = false } = {}) {
    this.#target = target;
    this.#refuseHttp10 = refuseHttp10;
    this.#dir = mkdtempSync(path.join(os.tmpdir(), 'berth-engine-proxy-'));
    this.path = path.join(this.#dir, 'docker.sock');
  }

  /** The request line of each connection's first request (the runtime opens one connection per request). */
  readonly requests: string[] = [];
  /** Client connections by their first request line, for {@link cutWhere}. */
  readonly #lines = new Map<net.Socket, string>();

  readonly #answers: Array<{ pattern: RegExp; status: number; body: unknown }> = [];

  /**
   * Answers the next request whose request line matches `pattern` itself, with `status` and `body`
   * as JSON (the engine never sees it): an engine answer a test cannot provoke at will.
   */
  answerOnce(pattern: RegExp, status: number, body: unknown): void {
    this.#answers.push({ pattern, status, body });
  }

  readonly #withheld: Array<Withheld & { pattern: RegExp }> = [];

  /**
   * From now on, the engine's answers to requests whose request line matches `pattern` get their
   * head through and their body held back until {@link releaseAnswers}: an engine slow to answer
   * (the wait endpoint answers its head at once and its body at the container's end).
   */
  withholdAnswers(pattern: RegExp): void {
    this.#withheld.push({ pattern, released: false, waiting: [] });
  }

  /** Lets every held-back answer body through, and those to come. */
  releaseAnswers(): void {
    for (const held of this.#withheld.splice(0)) {
      held.released = true;
      for (const release of held.waiting.splice(0)) release();
    }
  }

  /** How many connections whose first request line matches `pattern` are open. */
  openWhere(pattern: RegExp): number {
    return [...this.#lines.values()].filter((line) => pattern.test(line)).length;
  }

  /** Starts accepting connections, each piped to the engine. */
  async open(): Promise<void> {
    // Half-open as a unix socket to dockerd is: a client that ends its side (the held start's
    // release closes the attach's stdin) still reads the engine's answer (the step's output).
    const server = net.createServer({ allowHalfOpen: true }, (client) => {
      client.once('data', (first: Buffer) => {
        const line = first.subarray(0, first.indexOf('\r\n')).toString('latin1');
        this.requests.push(line);
        this.#lines.set(client, line);
        client.once('close', () => this.#lines.delete(client));
        if (this.#refuseHttp10 && line.endsWith('HTTP/1.0')) {
          this.refused++;
          client.end('HTTP/1.1 505 HTTP Version Not Supported\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
          return;
        }
        const canned = this.#answers.findIndex((a) => a.pattern.test(line));
        if (canned >= 0) {
          const [answer] = this.#answers.splice(canned, 1);
          answerWhole(client, first, answer!.status, answer!.body);
          return;
        }
        const withheld = this.#withheld.find((w) => w.pattern.test(line));
        this.#pipe(client, first, withheld);
      });
      client.on('error', () => client.destroy());
    });
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.path, () => resolve());
    });
  }

  /**
   * Pipes a client to a new connection to the engine, `first` (bytes already read from it) first.
   * With `withheld`, the answer's body waits after its head until it is released.
   */
  #pipe(client: net.Socket, first?: Buffer, withheld?: Withheld): void {
    const upstream = net.connect({ path: this.#target, allowHalfOpen: true });
    for (const socket of [client, upstream]) {
      this.#sockets.add(socket);
      socket.once('close', () => this.#sockets.delete(socket));
      socket.on('error', () => socket.destroy());
    }
    if (first !== undefined) upstream.write(first);
    client.pipe(upstream);
    if (withheld) withholdBody(upstream, client, withheld);
    else upstream.pipe(client);
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  }

  /** Resets the open connections whose first request line matches `pattern`; resolves how many. */
  cutWhere(pattern: RegExp): number {
    let cut = 0;
    for (const [client, line] of this.#lines) {
      if (!pattern.test(line)) continue;
      client.destroy();
      cut++;
    }
    return cut;
  }

  /**
   * Stops listening (the socket file goes away) and keeps the open connections: what dockerd does
   * as it shuts down, before it stops its containers (moby cmd/dockerd/daemon.go, the signal trap's
   * `cli.stop`: api/server `HTTPServer.Close` closes the listener only).
   */
  async stopListening(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    // Not waiting for close's callback: it comes only once every open connection has ended.
    server?.close();
    for (let i = 0; i < 100 && existsSync(this.path); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  }

  /** Resets every open connection and stops listening (the socket file goes away). */
  async cut(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    const closed = server ? new Promise<void>((resolve) => server.close(() => resolve())) : Promise.resolve();
    // Unix sockets have no RST: destroying them is what a dying dockerd does to its clients.
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
    await closed;
  }

  /** Cuts and removes the socket's directory. */
  async dispose(): Promise<void> {
    await this.cut();
    rmSync(this.#dir, { recursive: true, force: true });
  }
}

/** Answers whose body is held back (EngineProxy.withholdAnswers) until released. */
interface Withheld {
  released: boolean;
  readonly waiting: Array<() => void>;
}

/** Passes `upstream`'s answer head to `client` and holds the rest until `withheld` is released. */
function withholdBody(upstream: net.Socket, client: net.Socket, withheld: Withheld): void {
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    upstream.off('data', onData);
    upstream.pause();
    client.write(head.subarray(0, end + 4));
    const rest = head.subarray(end + 4);
    const release = (): void => {
      if (rest.length > 0) client.write(rest);
      upstream.pipe(client);
      upstream.resume();
    };
    if (withheld.released) release();
    else withheld.waiting.push(release);
  };
  upstream.on('data', onData);
}

/** Reads the whole request (its headers and its Content-Length or chunked body), then answers it and closes. */
function answerWhole(client: net.Socket, first: Buffer, status: number, body: unknown): void {
  let received = first;
  const complete = (): boolean => {
    const end = received.indexOf('\r\n\r\n');
    if (end < 0) return false;
    const headers = received.subarray(0, end).toString('latin1');
    const length = /^content-length:\s*(\d+)/im.exec(headers);
    if (length) return received.length - end - 4 >= Number(length[1]);
    if (/^transfer-encoding:\s*chunked/im.test(headers)) return received.subarray(end + 4).includes('0\r\n\r\n');
    return true;
  };
  const answer = (): void => {
    const json = JSON.stringify(body);
    client.end(`HTTP/1.1 ${status} Canned\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\nConnection: close\r\n\r\n${json}`);
  };
  if (complete()) {
    answer();
    return;
  }
  const onData = (chunk: Buffer): void => {
    received = Buffer.concat([received, chunk]);
    if (!complete()) return;
    client.off('data', onData);
    answer();
  };
  client.on('data', onData);
}

/** The engine's unix socket: DOCKER_HOST when it is a unix:// address, else /var/run/docker.sock. */
export function engineSocketPath(): string {
  const host = process.env.DOCKER_HOST;
  return host?.startsWith('unix://') ? host.slice('unix://'.length) : '/var/run/docker.sock';
}
