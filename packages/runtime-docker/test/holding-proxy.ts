import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { engineSocketPath } from './proxy.ts';

/**
 * A unix-socket proxy to the Docker engine that holds requests whose request line matches a
 * pattern, and forwards them when released — even when the client gave up meanwhile. It plays an
 * engine that received a create request, and finishes it after the client aborted: what dockerd
 * does with a `POST /networks/create` whose caller was cancelled.
 */
export class HoldingProxy {
  readonly path: string;
  readonly #dir: string;
  readonly #sockets = new Set<net.Socket>();
  readonly #held: Array<{ upstream: net.Socket; data: Buffer[]; answered: Promise<void> }> = [];
  #pattern: RegExp | undefined;
  #server: net.Server | undefined;
  #onHeld: (() => void) | undefined;

  constructor() {
    this.#dir = mkdtempSync(path.join(os.tmpdir(), 'berth-holding-proxy-'));
    this.path = path.join(this.#dir, 'docker.sock');
  }

  /** Holds requests whose first line matches `pattern` from now on. */
  hold(pattern: RegExp): void {
    this.#pattern = pattern;
  }

  /** Resolves once a request is held. */
  held(): Promise<void> {
    if (this.#held.length > 0) return Promise.resolve();
    return new Promise((resolve) => (this.#onHeld = resolve));
  }

  /** Forwards the held requests to the engine; resolves once the engine answered each. */
  async release(): Promise<void> {
    this.#pattern = undefined;
    const held = this.#held.splice(0);
    for (const h of held) for (const chunk of h.data) h.upstream.write(chunk);
    await Promise.all(held.map((h) => h.answered));
  }

  async open(): Promise<void> {
    const server = net.createServer((client) => {
      const upstream = net.connect(engineSocketPath());
      for (const socket of [client, upstream]) {
        this.#sockets.add(socket);
        socket.once('close', () => this.#sockets.delete(socket));
        socket.on('error', () => socket.destroy());
      }
      let holding: { upstream: net.Socket; data: Buffer[]; answered: Promise<void> } | undefined;
      client.on('data', (chunk: Buffer) => {
        const line = chunk.subarray(0, Math.max(0, chunk.indexOf('\r\n'))).toString('latin1');
        if (holding === undefined && this.#pattern?.test(line) === true) {
          const answered = new Promise<void>((resolve) => {
            upstream.once('data', () => resolve());
            upstream.once('close', () => resolve());
          });
          holding = { upstream, data: [], answered };
          this.#held.push(holding);
          this.#onHeld?.();
        }
        if (holding !== undefined && this.#held.includes(holding)) holding.data.push(chunk);
        else upstream.write(chunk);
      });
      upstream.on('data', (chunk: Buffer) => {
        if (!client.destroyed) client.write(chunk);
      });
      // The client going away does not stop the engine from finishing a held request.
      client.once('close', () => {
        if (holding === undefined) upstream.destroy();
        else void holding.answered.then(() => upstream.destroy());
      });
      upstream.once('close', () => client.destroy());
    });
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.path, () => resolve());
    });
  }

  async dispose(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    const closed = server ? new Promise<void>((resolve) => server.close(() => resolve())) : Promise.resolve();
    for (const socket of this.#sockets) socket.destroy();
    await closed;
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
