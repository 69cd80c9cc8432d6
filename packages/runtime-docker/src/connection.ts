import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import Docker from 'dockerode';
import type { Dial } from './engine-stream.ts';
import type { EngineDescription } from './errors.ts';

// Taken as `require` takes them: an ES import of node:http reads all its exports, and its lazy
// WebSocket ones load undici (fetch), ~30 ms and ~14 MB for every process using this runtime.
const http = process.getBuiltinModule('node:http');
const https = process.getBuiltinModule('node:https');

/** Where the Docker engine is and how to talk to it. Without any, `DOCKER_HOST` decides, then `/var/run/docker.sock`. */
export interface DockerConnectionOptions {
  /** The engine's unix socket, e.g. `/var/run/docker.sock`. Wins over `host` and `DOCKER_HOST`. */
  socketPath?: string;
  /**
   * The engine's address as `DOCKER_HOST` spells it: `unix:///path`, `tcp://host:2375`,
   * `http://host:2375` or `https://host:2376`. Wins over `DOCKER_HOST`.
   */
  host?: string;
  /** TLS material for an `https://` (or `tcp://…:2376`) engine: PEM strings or buffers. */
  tls?: { ca?: string | Buffer; cert?: string | Buffer; key?: string | Buffer };
}

/** A dockerode client with the agent it uses and a description of the endpoint for messages. */
export interface EngineConnection {
  readonly docker: Docker;
  readonly engine: EngineDescription;
  /** Opens a connection of its own to the engine, for a long stream read outside dockerode (see getEngineStream). */
  readonly dial: Dial;
  /** The `Host` header for requests on {@link dial}'s connections. */
  readonly host: string;
  /** Releases the connection's sockets, {@link dial}'s included. */
  close(): void;
}

const DEFAULT_SOCKET = '/var/run/docker.sock';

/**
 * Builds the dockerode client for the options (or `DOCKER_HOST`, or the default socket).
 *
 * Gotcha: the client uses its own agent without keep-alive, so no idle socket outlives a call
 * (a build leaves nothing open) and {@link EngineConnection.close} really releases everything.
 * Throws a TypeError for an address it cannot parse.
 */
export function connect(options: DockerConnectionOptions, env: NodeJS.ProcessEnv = process.env): EngineConnection {
  let dockerOptions: Docker.DockerOptions;
  let engine: EngineDescription;
  if (options.socketPath) {
    dockerOptions = { socketPath: options.socketPath };
    engine = { endpoint: `unix://${options.socketPath}`, source: `the runtime's socketPath option (${options.socketPath})` };
  } else if (options.host) {
    dockerOptions = parseHost(options.host, options.tls);
    engine = { endpoint: options.host, source: `the runtime's host option (${options.host})` };
  } else if (env.DOCKER_HOST) {
    dockerOptions = parseHost(env.DOCKER_HOST, options.tls ?? tlsFromEnv(env));
    engine = { endpoint: env.DOCKER_HOST, source: `DOCKER_HOST=${env.DOCKER_HOST}` };
  } else {
    dockerOptions = { socketPath: DEFAULT_SOCKET };
    engine = { endpoint: `unix://${DEFAULT_SOCKET}`, source: 'DOCKER_HOST (unset, so the default unix:///var/run/docker.sock is used)' };
  }
  const agent = dockerOptions.protocol === 'https' ? new https.Agent({ keepAlive: false }) : new http.Agent({ keepAlive: false });
  const docker = new Docker({ ...dockerOptions, agent } as Docker.DockerOptions);
  const { dial, host } = dialer(dockerOptions);
  const open = new Set<Duplex>();
  const tracked: Dial = () => {
    const socket = dial();
    open.add(socket);
    socket.once('close', () => open.delete(socket));
    return socket;
  };
  const close = (): void => {
    agent.destroy();
    for (const socket of open) socket.destroy();
  };
  return { docker, engine, dial: tracked, host, close };
}

/** How to open a socket to the engine, the way dockerode's agent does for the same options. */
function dialer(options: Docker.DockerOptions): { dial: Dial; host: string } {
  const { socketPath, host = 'localhost', port } = options;
  if (socketPath) return { dial: () => net.connect({ path: socketPath }), host: 'docker' };
  const endpoint = { host, port: Number(port) };
  if (options.protocol !== 'https') return { dial: () => net.connect(endpoint), host: `${host}:${port}` };
  const secure = {
    ...endpoint,
    ...(net.isIP(host) ? {} : { servername: host }),
    ...(options.ca ? { ca: options.ca } : {}),
    ...(options.cert ? { cert: options.cert } : {}),
    ...(options.key ? { key: options.key } : {}),
  } as tls.ConnectionOptions;
  return { dial: () => tls.connect(secure), host: `${host}:${port}` };
}

function parseHost(address: string, tls: DockerConnectionOptions['tls']): Docker.DockerOptions {
  if (address.startsWith('unix://')) {
    const socketPath = address.slice('unix://'.length);
    if (!socketPath) throw new TypeError(`Docker host ${JSON.stringify(address)} names no socket path`);
    return { socketPath };
  }
  let url: URL;
  try {
    url = new URL(address.includes('://') ? address : `tcp://${address}`);
  } catch {
    throw new TypeError(`Docker host ${JSON.stringify(address)} is not an address like tcp://host:2375 or unix:///var/run/docker.sock`);
  }
  if (!['tcp:', 'http:', 'https:'].includes(url.protocol) || !url.hostname) {
    throw new TypeError(`Docker host ${JSON.stringify(address)} is not an address like tcp://host:2375 or unix:///var/run/docker.sock`);
  }
  const secure = url.protocol === 'https:' || url.port === '2376' || tls !== undefined;
  return {
    host: url.hostname,
    port: url.port || (secure ? '2376' : '2375'),
    protocol: secure ? 'https' : 'http',
    ...(tls?.ca ? { ca: tls.ca } : {}),
    ...(tls?.cert ? { cert: tls.cert } : {}),
    ...(tls?.key ? { key: tls.key } : {}),
  };
}

function tlsFromEnv(env: NodeJS.ProcessEnv): DockerConnectionOptions['tls'] {
  // As the docker CLI: DOCKER_CERT_PATH holds ca.pem, cert.pem and key.pem; DOCKER_TLS_VERIFY=1 means TLS.
  const dir = env.DOCKER_CERT_PATH;
  if (!dir) return env.DOCKER_TLS_VERIFY === '1' ? {} : undefined;
  const read = (file: string): Buffer | undefined => {
    try {
      return readFileSync(path.join(dir, file));
    } catch {
      return undefined;
    }
  };
  return { ca: read('ca.pem'), cert: read('cert.pem'), key: read('key.pem') };
}
