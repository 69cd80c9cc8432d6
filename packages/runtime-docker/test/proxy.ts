import { mkdtempSync, rmSync } from 'node:fs';
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

  constructor(target = engineSocketPath()) {
    this.#target = target;
    this.#dir = mkdtempSync(path.join(os.tmpdir(), 'berth-engine-proxy-'));
    this.path = path.join(this.#dir, 'docker.sock');
  }

  /** Starts accepting connections, each piped to the engine. */
  async open(): Promise<void> {
    const server = net.createServer((client) => {
      const upstream = net.connect(this.#target);
      for (const socket of [client, upstream]) {
        this.#sockets.add(socket);
        socket.once('close', () => this.#sockets.delete(socket));
        socket.on('error', () => socket.destroy());
      }
      client.pipe(upstream).pipe(client);
      client.once('close', () => upstream.destroy());
      upstream.once('close', () => client.destroy());
    });
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.path, () => resolve());
    });
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

/** The engine's unix socket: DOCKER_HOST when it is a unix:// address, else /var/run/docker.sock. */
export function engineSocketPath(): string {
  const host = process.env.DOCKER_HOST;
  return host?.startsWith('unix://') ? host.slice('unix://'.length) : '/var/run/docker.sock';
}
