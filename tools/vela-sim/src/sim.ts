// VelaSim: a test double of go-vela/server's worker-facing HTTP API, plus the server's side of
// the Redis queue (signed RPUSH). See README.md for what it implements and what it does not.

import { randomBytes } from 'node:crypto';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import { type AddressInfo, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { type FaultRule, FaultTable, compilePathPattern } from './faults.ts';
import { type TokenClaims, type TokenType, mintJwt, verifyJwt } from './jwt.ts';
import { type QueueKeys, generateQueueKeys, queueKeysFromPrivate, signCombined } from './signing.ts';
import type { VelaBuild, VelaLog, VelaQueueItem, VelaRepo, VelaSecret, VelaService, VelaStep, VelaWorker } from './types.ts';

/** go-vela/server's queue/models.ItemVersion. */
export const ITEM_VERSION = 3;

/** Options of {@link VelaSim.start}. */
export interface VelaSimOptions {
  /** The shared secret (server VELA_SECRET = worker VELA_SERVER_SECRET). Default: random. Empty string: none configured. */
  secret?: string;
  /** HMAC key for minted JWTs (server VELA_SERVER_PRIVATE_KEY). Default: random. */
  tokenKey?: string;
  /** Queue private key in Vela's base64 64-byte form. Default: a fresh key pair. */
  queuePrivateKey?: string;
  /** Redis URL for pushes and `queue_address`. Default REDIS_URL or redis://127.0.0.1:6379. */
  queueAddr?: string;
  /** Lifetime of worker auth tokens in seconds (server default 20 min). */
  workerAuthTokenTtlSec?: number;
  /** Lifetime of registration tokens in seconds (server default 1 min). */
  registerTokenTtlSec?: number;
  /** Added to the repo timeout for build tokens, seconds (server default 5 min). */
  buildTokenBufferSec?: number;
  /** Port to listen on (default 0: any free port). Always 127.0.0.1. */
  port?: number;
  /** Lifetime of SCM install tokens in seconds (a GitHub App installation token lives 1 h). */
  installTokenTtlSec?: number;
}

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
  /** For log PUTs: size of the decoded `data`. */
  logDataBytes?: number | undefined;
  /** The injected fault, if any. */
  fault?: FaultRule['kind'] | undefined;
  /** A short human summary of the request body (first 200 characters; log data replaced by its size). */
  summary: string;
}

/** Arguments of {@link VelaSim.enqueueBuild}. */
export interface EnqueueBuildOptions {
  org: string;
  repo: string;
  /** Build number; default: the repo's next. */
  number?: number;
  /** The compiled pipeline (go-vela's pipeline.Build JSON): stored as the build's executable and planned into step and service records. */
  pipeline: Record<string, unknown>;
  /** Queue route (the Redis list key). Default: the first of `routes`, i.e. `vela`. */
  route?: string;
  /** Extra build fields (event, branch, …). */
  build?: Partial<VelaBuild>;
  /** Extra repo fields when the repo is created (timeout, trusted, …). */
  repoFields?: Partial<VelaRepo>;
  /** Item version to put in the queue item (default {@link ITEM_VERSION}). */
  itemVersion?: number;
  /** Do not push to Redis (only create build, executable and records). */
  noPush?: boolean;
}

/** What {@link VelaSim.enqueueBuild} created. */
export interface EnqueuedBuild {
  build: VelaBuild;
  item: VelaQueueItem;
  /** The exact bytes pushed (signature ‖ JSON). */
  signed: Buffer;
  route: string;
}

interface LogRow {
  id: number;
  build_id: number;
  repo_id: number;
  step_id?: number;
  service_id?: number;
  data: Buffer;
  created_at: number;
}

interface Caller {
  claims: TokenClaims;
  viaSecret: boolean;
}

class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

type Params = Record<string, string>;
type Reply = { status: number; body: unknown };
type Handler = (req: { caller: Caller; params: Params; body: unknown; query: URLSearchParams; headers: IncomingMessage['headers'] }) => Reply | Promise<Reply>;

/** An SCM install token the sim minted (server `cache/models/install_token.go`, kept per build). */
export interface InstallTokenRecord {
  token: string;
  buildId: number;
  expiration: number;
  repositories: string[];
  permissions: Record<string, string>;
}

interface Route {
  method: string;
  re: RegExp;
  keys: string[];
  handler: Handler;
}

const now = (): number => Math.floor(Date.now() / 1000);

/**
 * A Vela server test double on 127.0.0.1: worker registration and check-in, queue info, build
 * tokens, executables (deleted on read), builds, steps, services, logs (whole-log PUTs) and
 * secrets, with HS256 tokens checked on every route, a call log, fault injection, and
 * {@link VelaSim.enqueueBuild} which pushes Ed25519-signed items to a real Redis list.
 *
 * Gotcha: a test double, not a server. It keeps everything in memory, models only the routes and
 * checks the worker uses, and never talks to an SCM. Call `close()` (it also closes its Redis
 * connection).
 */
export class VelaSim {
  /** Base URL, e.g. `http://127.0.0.1:41234` (no trailing slash). */
  readonly url: string;
  /** The shared secret ('' when none is configured). */
  readonly secret: string;
  /** The queue keys (public key as served by `/api/v1/queue/info`). */
  readonly queueKeys: QueueKeys;
  /** The Redis URL pushes go to and `queue_address` reports. */
  readonly queueAddr: string;
  /** Every call, in order. */
  readonly calls: CallRecord[] = [];
  /** Stored workers by hostname (running builds as ids). */
  readonly workers = new Map<string, VelaWorker & { running_build_ids: number[] }>();
  /** Stored builds by id. */
  readonly builds = new Map<number, VelaBuild>();
  /** Stored secrets by `engine/type/org/name/key`. */
  readonly secrets = new Map<string, VelaSecret>();
  /** SCM install tokens the sim minted and has not evicted, by token. */
  readonly installTokens = new Map<string, InstallTokenRecord>();
  /** Every install token the sim minted, in order (evicted ones too). */
  readonly installTokenLog: InstallTokenRecord[] = [];

  readonly #server: Server;
  readonly #tokenKey: string;
  readonly #options: VelaSimOptions;
  readonly #faults = new FaultTable();
  readonly #routes: Route[] = [];
  readonly #sockets = new Set<Socket>();
  readonly #repos = new Map<string, VelaRepo>();
  readonly #executables = new Map<number, { id: number; build_id: number; data: string }>();
  readonly #steps = new Map<number, Map<number, VelaStep>>();
  readonly #services = new Map<number, Map<number, VelaService>>();
  readonly #logs = new Map<string, LogRow>();
  #redis: Redis | undefined;
  #ids = 0;
  #seq = 0;

  private constructor(server: Server, url: string, options: VelaSimOptions) {
    this.#server = server;
    this.url = url;
    this.#options = options;
    this.secret = options.secret ?? randomBytes(16).toString('hex');
    this.#tokenKey = options.tokenKey ?? randomBytes(32).toString('hex');
    this.queueKeys = options.queuePrivateKey ? queueKeysFromPrivate(options.queuePrivateKey) : generateQueueKeys();
    this.queueAddr = options.queueAddr ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
    this.#defineRoutes();
  }

  /** Starts a sim listening on 127.0.0.1. */
  static async start(options: VelaSimOptions = {}): Promise<VelaSim> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    const sim = new VelaSim(server, `http://127.0.0.1:${port}`, options);
    server.on('connection', (s: Socket) => {
      sim.#sockets.add(s);
      s.once('close', () => sim.#sockets.delete(s));
    });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => sim.#onRequest(req, res));
    return sim;
  }

  /** Stops listening, drops every connection (held ones too) and closes the Redis connection. */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const s of this.#sockets) s.destroy();
    this.#server.closeAllConnections();
    await closed;
    if (this.#redis) {
      this.#redis.disconnect();
      this.#redis = undefined;
    }
  }

  // ---------------------------------------------------------------- tokens

  /** Mints a token as the server would. `ttlSec` defaults per type. */
  mintToken(type: TokenType, sub: string, ttlSec: number, extra: { build_id?: number; repo?: string } = {}): string {
    const iat = now();
    return mintJwt(this.#tokenKey, { sub, token_type: type, iat, exp: iat + ttlSec, ...extra });
  }

  /** A registration token for `hostname`, as `POST /api/v1/admin/workers/{host}/register` returns. */
  registrationToken(hostname: string, ttlSec = this.#options.registerTokenTtlSec ?? 60): string {
    return this.mintToken('WorkerRegister', hostname, ttlSec);
  }

  /** The token the server sends to a worker's API (`sub: vela-server`, 1 min). */
  serverToWorkerToken(): string {
    return this.mintToken('WorkerAuth', 'vela-server', 60);
  }

  // ---------------------------------------------------------------- faults and calls

  /** Makes the next `times` calls matching `rule` fail. */
  fail(rule: FaultRule): void {
    this.#faults.add(rule);
  }

  /** Drops every pending fault. */
  clearFaults(): void {
    this.#faults.clear();
  }

  /** Calls whose method matches and whose path matches the pattern (see FaultRule.path). */
  callsTo(method: string, path: string | RegExp): CallRecord[] {
    const m = method.toUpperCase();
    const matches = compilePathPattern(path);
    return this.calls.filter((c) => c.method === m && matches(c.path));
  }

  // ---------------------------------------------------------------- state helpers for tests

  /**
   * Adds (or replaces) a secret, addressed as the worker fetches it, with the defaults the server
   * sets when a secret is created (S `api/secret/create.go`): `allow_events` push, tag and
   * deployment; `allow_command` and `allow_substitution` true, but both false for a shared secret
   * that does not set `allow_substitution`.
   */
  addSecret(engine: string, type: 'org' | 'repo' | 'shared', org: string, name: string, key: string, secret: VelaSecret): void {
    // A shared secret that does not say about substitution allows neither it nor commands.
    const sharedDefaults = type === 'shared' && secret.allow_substitution === undefined;
    this.secrets.set(`${engine}/${type}/${org}/${name}/${key}`, {
      type,
      org,
      name: key,
      allow_events: { push: { branch: true, tag: true, delete_branch: false, delete_tag: false }, deployment: { created: true } },
      ...secret,
      allow_command: sharedDefaults ? false : (secret.allow_command ?? true),
      allow_substitution: sharedDefaults ? false : (secret.allow_substitution ?? true),
    });
  }

  /** The build `org/repo#number`, if any. */
  findBuild(org: string, repo: string, number: number): VelaBuild | undefined {
    for (const b of this.builds.values()) if (b.repo?.org === org && b.repo.name === repo && b.number === number) return b;
    return undefined;
  }

  /** The steps of a build, by number. */
  stepsOf(buildId: number): VelaStep[] {
    return [...(this.#steps.get(buildId)?.values() ?? [])];
  }

  /** The services of a build, by number. */
  servicesOf(buildId: number): VelaService[] {
    return [...(this.#services.get(buildId)?.values() ?? [])];
  }

  /** The stored log bytes of a step (by number), or undefined. */
  stepLog(buildId: number, stepNumber: number): Buffer | undefined {
    const step = this.#steps.get(buildId)?.get(stepNumber);
    return step?.id === undefined ? undefined : this.#logs.get(`step:${step.id}`)?.data;
  }

  /** The stored log bytes of a service (by number), or undefined. */
  serviceLog(buildId: number, serviceNumber: number): Buffer | undefined {
    const svc = this.#services.get(buildId)?.get(serviceNumber);
    return svc?.id === undefined ? undefined : this.#logs.get(`service:${svc.id}`)?.data;
  }

  /** Whether the build's executable is still stored (it is deleted on the first read). */
  hasExecutable(buildId: number): boolean {
    return this.#executables.has(buildId);
  }

  /** The Redis connection the sim pushes with (created on first use). */
  redis(): Redis {
    this.#redis ??= new Redis(this.queueAddr, { lazyConnect: false, maxRetriesPerRequest: 3 });
    return this.#redis;
  }

  /** Signs `message` in NaCl combined format with the queue key. */
  sign(message: Buffer | string): Buffer {
    return signCombined(this.queueKeys.privateKey, Buffer.from(message));
  }

  /** RPUSHes raw bytes to a route (for tests of bad signatures and garbage). */
  async pushRaw(route: string, bytes: Buffer): Promise<void> {
    await this.redis().rpush(route, bytes);
  }

  /**
   * Creates a repo (if new) and a pending build, stores its executable, plans its step and
   * service records with empty logs (as the server does at compile time), and pushes the signed
   * queue item with RPUSH to the route.
   */
  async enqueueBuild(options: EnqueueBuildOptions): Promise<EnqueuedBuild> {
    const repo = this.#repo(options.org, options.repo, options.repoFields);
    const counter = ((repo.counter as number | undefined) ?? 0) + 1;
    const number = options.number ?? counter;
    repo.counter = Math.max(counter, number);
    const route = options.route ?? 'vela';
    const t = now();
    const build: VelaBuild = {
      id: this.#nextId(),
      number,
      event: 'push',
      status: 'pending',
      branch: 'main',
      ref: 'refs/heads/main',
      commit: randomBytes(20).toString('hex'),
      created: t,
      enqueued: t,
      route,
      ...options.build,
      repo: { ...repo },
    };
    this.builds.set(build.id!, build);
    // Server api/build/compile_publish.go: the executable carries the SCM token the worker hands the
    // containers (scm/github/repo.go GetNetrcPassword: an installation token with its expiry when the
    // repo has an installation id, else the repo owner's OAuth token with expiry 0).
    const scm = this.#netrcPassword(build, repo);
    const pipeline = {
      ...options.pipeline,
      id: options.pipeline.id ?? `${options.org}_${options.repo}_${number}`,
      token: scm.token,
      token_exp: scm.expiration,
    };
    this.#executables.set(build.id!, {
      id: this.#nextId(),
      build_id: build.id!,
      data: Buffer.from(JSON.stringify(pipeline)).toString('base64'),
    });
    this.#plan(build, pipeline);
    const item: VelaQueueItem = { build: { ...build }, item_version: options.itemVersion ?? ITEM_VERSION };
    const signed = this.sign(JSON.stringify(item));
    if (!options.noPush) await this.redis().rpush(route, signed);
    return { build, item, signed, route };
  }

  // ---------------------------------------------------------------- internals: model

  /** Server scm/github/repo.go GetNetrcPassword, as the sim models it. */
  #netrcPassword(build: VelaBuild, repo: VelaRepo): { token: string; expiration: number } {
    const installId = typeof repo.install_id === 'number' ? repo.install_id : 0;
    if (installId === 0) return { token: `gho_owner_${randomBytes(12).toString('hex')}`, expiration: 0 };
    return this.#mintInstallToken(build.id!, [repo.name ?? ''], { contents: 'read' });
  }

  /** Mints and caches an install token (server cache/redis/store_install.go StoreInstallToken). */
  #mintInstallToken(buildId: number, repositories: string[], permissions: Record<string, string>): InstallTokenRecord {
    const rec: InstallTokenRecord = {
      token: `ghs_${randomBytes(16).toString('hex')}`,
      buildId,
      expiration: now() + (this.#options.installTokenTtlSec ?? 3600),
      repositories,
      permissions,
    };
    this.installTokens.set(rec.token, rec);
    this.installTokenLog.push(rec);
    return rec;
  }

  #nextId(): number {
    this.#ids += 1;
    return this.#ids;
  }

  #repo(org: string, name: string, fields: Partial<VelaRepo> = {}): VelaRepo {
    const key = `${org}/${name}`;
    let repo = this.#repos.get(key);
    if (!repo) {
      repo = {
        id: this.#nextId(),
        owner: { id: 1, name: 'octocat', active: true },
        org,
        name,
        full_name: key,
        link: `https://github.example/${key}`,
        clone: `https://github.example/${key}.git`,
        branch: 'main',
        timeout: 30,
        visibility: 'public',
        private: false,
        trusted: false,
        active: true,
        pipeline_type: 'yaml',
        counter: 0,
        ...fields,
      };
      this.#repos.set(key, repo);
    }
    return repo;
  }

  #plan(build: VelaBuild, pipeline: Record<string, unknown>): void {
    const steps = new Map<number, VelaStep>();
    const services = new Map<number, VelaService>();
    const containers = (list: unknown): Array<Record<string, unknown>> =>
      Array.isArray(list) ? (list.filter((c) => typeof c === 'object' && c !== null) as Array<Record<string, unknown>>) : [];
    const planned: Array<{ c: Record<string, unknown>; stage?: string }> = [];
    for (const c of containers(pipeline.steps)) planned.push({ c });
    for (const s of containers(pipeline.stages)) {
      for (const c of containers(s.steps)) planned.push({ c, stage: typeof s.name === 'string' ? s.name : '' });
    }
    const t = now();
    planned.forEach(({ c, stage }, i) => {
      const number = typeof c.number === 'number' && c.number > 0 ? c.number : i + 1;
      const step: VelaStep = {
        id: this.#nextId(),
        build_id: build.id!,
        repo_id: build.repo!.id!,
        number,
        name: typeof c.name === 'string' ? c.name : `step-${number}`,
        image: typeof c.image === 'string' ? c.image : '',
        stage: stage ?? '',
        status: 'pending',
        created: t,
        report_as: typeof c.report_as === 'string' ? c.report_as : '',
      };
      steps.set(number, step);
      this.#logs.set(`step:${step.id}`, {
        id: this.#nextId(),
        build_id: build.id!,
        repo_id: build.repo!.id!,
        step_id: step.id!,
        data: Buffer.alloc(0),
        created_at: t,
      });
    });
    containers(pipeline.services).forEach((c, i) => {
      const number = typeof c.number === 'number' && c.number > 0 ? c.number : i + 1;
      const svc: VelaService = {
        id: this.#nextId(),
        build_id: build.id!,
        repo_id: build.repo!.id!,
        number,
        name: typeof c.name === 'string' ? c.name : `service-${number}`,
        image: typeof c.image === 'string' ? c.image : '',
        status: 'pending',
        created: t,
      };
      services.set(number, svc);
      this.#logs.set(`service:${svc.id}`, {
        id: this.#nextId(),
        build_id: build.id!,
        repo_id: build.repo!.id!,
        service_id: svc.id!,
        data: Buffer.alloc(0),
        created_at: t,
      });
    });
    this.#steps.set(build.id!, steps);
    this.#services.set(build.id!, services);
  }

  #workerJson(w: VelaWorker & { running_build_ids: number[] }): VelaWorker {
    const { running_build_ids, ...rest } = w;
    return { ...rest, running_builds: running_build_ids.map((id) => this.builds.get(id) ?? { id }) };
  }

  #logJson(row: LogRow): VelaLog {
    const { data, ...rest } = row;
    return { ...rest, data: data.toString('base64') };
  }

  // ---------------------------------------------------------------- internals: auth

  #authenticate(req: IncomingMessage): Caller {
    const header = req.headers.authorization ?? '';
    if (!header.startsWith('Bearer ')) throw new HttpError(401, 'unable to parse token: no bearer token in request');
    const token = header.slice('Bearer '.length).trim();
    if (this.secret !== '' && token === this.secret) {
      return { claims: { sub: 'vela-worker', token_type: 'ServerWorker', iat: 0, exp: 0 }, viaSecret: true };
    }
    const result = verifyJwt(this.#tokenKey, token);
    if (!result.ok) throw new HttpError(401, `unable to parse token: ${result.reason}`);
    return { claims: result.claims, viaSecret: false };
  }

  #requireType(caller: Caller, types: TokenType[]): void {
    if (!types.includes(caller.claims.token_type)) {
      throw new HttpError(401, `invalid token type: ${caller.claims.token_type} (want ${types.join(' or ')})`);
    }
  }

  /**
   * Build-scoped access: a build token for this very build. Server router/middleware/perm/perm.go
   * MustBuildAccess lets only a WorkerBuild token with a matching build_id (or a platform admin,
   * which the sim has none of) through; the shared secret maps to a ServerWorker claim
   * (claims.go Establish) and is refused.
   */
  #requireBuildAccess(caller: Caller, build: VelaBuild): void {
    if (caller.claims.token_type !== 'WorkerBuild' || caller.claims.build_id !== build.id) {
      throw new HttpError(401, 'invalid token: must provide matching worker build token');
    }
  }

  #build(params: Params): VelaBuild {
    const org = params.org!;
    const repo = params.repo!;
    if (!this.#repos.has(`${org}/${repo}`)) throw new HttpError(404, `unable to read repo ${org}/${repo}: record not found`);
    const n = Number(params.build);
    if (!Number.isInteger(n)) throw new HttpError(400, `invalid build parameter provided: ${params.build}`);
    const b = this.findBuild(org, repo, n);
    if (!b) throw new HttpError(404, `unable to read build ${org}/${repo}/${n}: record not found`);
    return b;
  }

  // ---------------------------------------------------------------- internals: routes

  #route(method: string, pattern: string, handler: Handler): void {
    const keys: string[] = [];
    // `:name` is one segment; a trailing `*name` is the rest of the path (gin's catch-all).
    const source = pattern.replace(/([:*])([a-z]+)/g, (_m, kind: string, k: string) => {
      keys.push(k);
      return kind === '*' ? '(.+)' : '([^/]+)';
    });
    this.#routes.push({ method, re: new RegExp(`^${source}$`), keys, handler });
  }

  #defineRoutes(): void {
    const any: TokenType[] = ['WorkerAuth', 'WorkerRegister', 'ServerWorker'];
    const B = '/api/v1/repos/:org/:repo/builds/:build';

    this.#route('GET', '/validate-token', ({ caller }) => {
      if (caller.claims.sub !== 'vela-server') throw new HttpError(401, 'token is not a valid server token');
      return { status: 200, body: 'valid server token' };
    });

    this.#route('GET', '/api/v1/queue/info', ({ caller }) => {
      this.#requireType(caller, ['WorkerRegister', 'ServerWorker']);
      return { status: 200, body: { queue_public_key: this.queueKeys.publicKeyBase64, queue_address: this.queueAddr } };
    });

    this.#route('GET', '/api/v1/workers/:host', ({ caller, params }) => {
      this.#requireType(caller, any);
      const w = this.workers.get(params.host!);
      if (!w) throw new HttpError(404, `unable to get worker ${params.host}: record not found`);
      return { status: 200, body: this.#workerJson(w) };
    });

    this.#route('POST', '/api/v1/workers', ({ caller, body }) => {
      this.#requireType(caller, ['WorkerRegister', 'ServerWorker']);
      const input = asObject(body) as VelaWorker;
      if (typeof input.hostname !== 'string' || input.hostname === '') throw new HttpError(400, 'unable to create worker: hostname is required');
      if (caller.claims.token_type !== 'ServerWorker' && caller.claims.sub !== input.hostname) {
        throw new HttpError(400, `unable to add worker; claims subject ${caller.claims.sub} does not match worker hostname ${input.hostname}`);
      }
      if (this.workers.has(input.hostname)) throw new HttpError(500, `unable to create worker: worker ${input.hostname} already exists`);
      const ids = (input.running_builds ?? []).map((b) => b.id).filter((id): id is number => typeof id === 'number');
      this.workers.set(input.hostname, {
        ...input,
        id: this.#nextId(),
        running_builds: undefined,
        running_build_ids: ids,
        last_checked_in: now(),
      });
      return { status: 201, body: { token: this.#workerToken(caller) } };
    });

    this.#route('POST', '/api/v1/workers/:host/refresh', ({ caller, params }) => {
      this.#requireType(caller, any);
      const w = this.workers.get(params.host!);
      if (!w) throw new HttpError(404, `unable to get worker ${params.host}: record not found`);
      if (caller.claims.token_type !== 'ServerWorker' && caller.claims.sub !== w.hostname) {
        throw new HttpError(400, `unable to refresh worker auth: claims subject ${caller.claims.sub} does not match worker hostname ${w.hostname}`);
      }
      w.last_checked_in = now();
      return { status: 200, body: { token: this.#workerToken(caller) } };
    });

    this.#route('PUT', '/api/v1/workers/:host', ({ caller, params, body }) => {
      this.#requireType(caller, any);
      const w = this.workers.get(params.host!);
      if (!w) throw new HttpError(404, `unable to get worker ${params.host}: record not found`);
      const input = asObject(body) as VelaWorker;
      if (typeof input.address === 'string' && input.address !== '') w.address = input.address;
      if (Array.isArray(input.routes) && input.routes.length > 0) w.routes = input.routes;
      if (typeof input.active === 'boolean') w.active = input.active;
      if (Array.isArray(input.running_builds)) {
        w.running_build_ids = input.running_builds.map((b) => b.id).filter((id): id is number => typeof id === 'number');
      }
      if (typeof input.status === 'string' && input.status !== '') w.status = input.status;
      for (const k of ['last_status_update_at', 'last_build_started_at', 'last_build_finished_at', 'last_checked_in'] as const) {
        const v = input[k];
        if (typeof v === 'number' && v > 0) w[k] = v;
      }
      return { status: 200, body: this.#workerJson(w) };
    });

    this.#route('GET', `${B}/token`, ({ caller, params }) => {
      this.#requireType(caller, ['WorkerAuth', 'ServerWorker']);
      const b = this.#build(params);
      if (b.status !== 'pending') throw new HttpError(409, `unable to mint build token: build ${b.repo?.full_name}/${b.number} is not in pending state`);
      const ttl = (b.repo?.timeout ?? 30) * 60 + (this.#options.buildTokenBufferSec ?? 300);
      return { status: 200, body: { token: this.mintToken('WorkerBuild', caller.claims.sub, ttl, { build_id: b.id!, repo: b.repo!.full_name! }) } };
    });

    this.#route('GET', `${B}/executable`, ({ caller, params }) => {
      const b = this.#build(params);
      this.#requireBuildAccess(caller, b);
      const e = this.#executables.get(b.id!);
      if (!e) throw new HttpError(500, `unable to pop build executable: record not found`);
      this.#executables.delete(b.id!);
      return { status: 200, body: e };
    });

    // Server api/build/refresh_install.go RefreshInstallToken (router/build.go: MustBuildAccess).
    this.#route('GET', `${B}/install_token`, ({ caller, params, headers }) => {
      const b = this.#build(params);
      this.#requireBuildAccess(caller, b);
      if (b.status !== 'running' && b.status !== 'pending')
        throw new HttpError(400, 'unable to generate install token for build not in running or pending status');
      const current = typeof headers.token === 'string' ? headers.token : '';
      if (current === '') throw new HttpError(401, 'unable to retrieve installation token from request header');
      const cached = this.installTokens.get(current);
      if (!cached) throw new HttpError(401, 'unable to get installation token from cache: redis: nil');
      this.installTokens.delete(current);
      const fresh = this.#mintInstallToken(b.id!, cached.repositories, cached.permissions);
      return { status: 200, body: { token: fresh.token, expiration: fresh.expiration } };
    });

    // Server api/build/post_install.go PostInstallToken (router/build.go: MustBuildAccess).
    this.#route('POST', `${B}/install_token`, ({ caller, params, body }) => {
      const b = this.#build(params);
      this.#requireBuildAccess(caller, b);
      if (!(typeof b.repo?.install_id === 'number' && b.repo.install_id !== 0))
        throw new HttpError(400, 'repository does not have an installation ID, cannot generate install token');
      if (b.status !== 'running') throw new HttpError(400, 'unable to generate install token for build not in running status');
      const input = asObject(body);
      const repositories = Array.isArray(input.repositories) ? input.repositories.filter((r): r is string => typeof r === 'string') : [];
      const permissions = input.permissions && typeof input.permissions === 'object' ? (input.permissions as Record<string, string>) : {};
      const t = this.#mintInstallToken(b.id!, repositories, permissions);
      return { status: 200, body: { token: t.token, expiration: t.expiration } };
    });

    // Server api/build/id_request_token.go GetIDRequestToken (router/build.go: MustBuildAccess).
    this.#route('GET', `${B}/id_request_token`, ({ caller, params, query }) => {
      const b = this.#build(params);
      this.#requireBuildAccess(caller, b);
      const image = query.get('image') ?? '';
      if (image === '') throw new HttpError(400, "no step 'image' provided in query parameters");
      const request = query.get('request') ?? '';
      if (request === '') throw new HttpError(400, "no 'request' provided in query parameters");
      const commands = query.get('commands') ?? '';
      if (commands !== '' && !['true', 'false', '1', '0', 't', 'f', 'TRUE', 'FALSE', 'True', 'False', 'T', 'F'].includes(commands)) {
        throw new HttpError(400, `unable to parse 'commands' query parameter as boolean ${commands}`);
      }
      const ttl = (b.repo?.timeout ?? 30) * 60 + (this.#options.buildTokenBufferSec ?? 300);
      return { status: 200, body: { token: this.mintToken('IDRequest', caller.claims.sub, ttl, { build_id: b.id!, repo: b.repo!.full_name! }) } };
    });

    // router/build.go: b.DELETE("/cancel", perm.MustWrite(), build.CancelBuild). The sim has no
    // users: the shared secret stands for an operator with write access.
    this.#route('DELETE', `${B}/cancel`, ({ caller, params }) => {
      if (!caller.viaSecret) throw new HttpError(401, `invalid token type: ${caller.claims.token_type} (want a user with write access)`);
      return this.#cancel(this.#build(params), 'vela-admin');
    });
    this.#route('GET', B, ({ caller, params }) => {
      const b = this.#build(params);
      this.#requireBuildAccess(caller, b);
      return { status: 200, body: b };
    });

    this.#route('PUT', B, ({ caller, params, body }) => {
      const b = this.#build(params);
      this.#requireBuildAccess(caller, b);
      const input = asObject(body) as VelaBuild;
      for (const k of ['status', 'error', 'title', 'message', 'host', 'runtime', 'distribution'] as const) {
        const v = input[k];
        if (typeof v === 'string' && v !== '') b[k] = v;
      }
      for (const k of ['enqueued', 'started', 'finished'] as const) {
        const v = input[k];
        if (typeof v === 'number' && v > 0) b[k] = v;
      }
      // Server api/build/update.go: a build in a final state loses its install tokens.
      if (!['running', 'pending', 'pending approval'].includes(b.status ?? '')) {
        for (const [t, rec] of this.installTokens) if (rec.buildId === b.id) this.installTokens.delete(t);
      }
      return { status: 200, body: b };
    });

    for (const kind of ['steps', 'services'] as const) {
      const table = kind === 'steps' ? this.#steps : this.#services;
      const label = kind === 'steps' ? 'step' : 'service';
      const find = (params: Params): { build: VelaBuild; rec: VelaStep } => {
        const build = this.#build(params);
        const n = Number(params.n);
        const rec = table.get(build.id!)?.get(n);
        if (!rec) throw new HttpError(404, `unable to read ${label} ${build.repo?.full_name}/${build.number}/${params.n}: record not found`);
        return { build, rec };
      };

      this.#route('GET', `${B}/${kind}/:n`, ({ caller, params }) => {
        const { build, rec } = find(params);
        this.#requireBuildAccess(caller, build);
        return { status: 200, body: rec };
      });

      this.#route('POST', `${B}/${kind}`, ({ caller, params, body }) => {
        const build = this.#build(params);
        this.#requireBuildAccess(caller, build);
        const input = asObject(body) as VelaStep;
        if (typeof input.number !== 'number' || input.number <= 0) throw new HttpError(400, `unable to create ${label}: number is required`);
        const rows = table.get(build.id!) ?? new Map<number, VelaStep>();
        table.set(build.id!, rows);
        const rec: VelaStep = { ...input, id: this.#nextId(), build_id: build.id!, repo_id: build.repo!.id!, created: now() };
        rows.set(input.number, rec);
        const logKey = `${label}:${rec.id}`;
        this.#logs.set(logKey, {
          id: this.#nextId(),
          build_id: build.id!,
          repo_id: build.repo!.id!,
          ...(label === 'step' ? { step_id: rec.id! } : { service_id: rec.id! }),
          data: Buffer.alloc(0),
          created_at: now(),
        });
        return { status: 201, body: rec };
      });

      this.#route('PUT', `${B}/${kind}/:n`, ({ caller, params, body }) => {
        const { build, rec } = find(params);
        this.#requireBuildAccess(caller, build);
        const input = asObject(body) as VelaStep;
        const strings = label === 'step' ? (['status', 'error', 'host', 'runtime', 'distribution'] as const) : (['status', 'error'] as const);
        for (const k of strings) {
          const v = input[k];
          if (typeof v === 'string' && v !== '') rec[k] = v;
        }
        if (typeof input.exit_code === 'number' && (label === 'service' || input.exit_code > 0)) rec.exit_code = input.exit_code;
        for (const k of ['started', 'finished'] as const) {
          const v = input[k];
          if (typeof v === 'number' && v > 0) rec[k] = v;
        }
        return { status: 200, body: rec };
      });

      this.#route('GET', `${B}/${kind}/:n/logs`, ({ caller, params }) => {
        const { build, rec } = find(params);
        this.#requireBuildAccess(caller, build);
        const row = this.#logs.get(`${label}:${rec.id}`);
        if (!row) throw new HttpError(404, `unable to get logs for ${label} ${params.n}: record not found`);
        return { status: 200, body: this.#logJson(row) };
      });

      this.#route('PUT', `${B}/${kind}/:n/logs`, ({ caller, params, body }) => {
        const { build, rec } = find(params);
        this.#requireBuildAccess(caller, build);
        const row = this.#logs.get(`${label}:${rec.id}`);
        if (!row) throw new HttpError(500, `unable to get logs for ${label} ${params.n}: record not found`);
        const input = asObject(body) as VelaLog;
        if (input.data !== undefined && typeof input.data !== 'string')
          throw new HttpError(400, `unable to decode JSON for ${label} ${params.n}: data is not a string`);
        const data = typeof input.data === 'string' ? Buffer.from(input.data, 'base64') : Buffer.alloc(0);
        if (data.length > 0) row.data = data;
        return { status: 200, body: null };
      });
    }

    // server router/secret.go: secrets.GET("/*secret", secret.GetSecret) under
    // /secrets/:engine/:type/:org/:name — a catch-all, so a secret's name may contain slashes.
    this.#route('GET', '/api/v1/secrets/:engine/:type/:org/:name/*key', ({ caller, params }) => {
      const path = `${params.engine}/${params.type}/${params.org}/${params.name}/${params.key}`;
      if (!['org', 'repo', 'shared'].includes(params.type!)) throw new HttpError(400, `invalid secret type: ${params.type}`);
      if (!caller.viaSecret && caller.claims.token_type !== 'WorkerBuild') {
        throw new HttpError(401, `invalid token type: ${caller.claims.token_type} (want WorkerBuild)`);
      }
      const s = this.secrets.get(path);
      if (!s) throw new HttpError(404, `unable to get secret ${path}: record not found`);
      if (caller.claims.token_type === 'WorkerBuild') {
        const [org, repo] = (caller.claims.repo ?? '/').split('/');
        if (params.type === 'org' && params.org !== org) throw new HttpError(401, `build token for ${caller.claims.repo} may not read org secret ${path}`);
        if (params.type === 'repo' && (params.org !== org || params.name !== repo))
          throw new HttpError(401, `build token for ${caller.claims.repo} may not read repo secret ${path}`);
        return { status: 200, body: s };
      }
      const { value: _value, ...sanitized } = s;
      return { status: 200, body: sanitized };
    });
  }

  /**
   * The server's cancel, api/build/cancel.go CancelBuild: a running build is cancelled on the
   * worker that runs it (CancelRunning: GET the worker's /api/v1/executors, then DELETE
   * /api/v1/executors/{id}/build/cancel with a server token) and the worker's answer is returned;
   * a running build no executor has is marked canceled as stale; a pending one is marked
   * canceled; any other status is a 400.
   */
  async #cancel(build: VelaBuild, user: string): Promise<Reply> {
    const entry = `${build.repo?.full_name ?? '?'}#${build.number}`;
    if (build.status === 'running') {
      const worker = build.host ? this.workers.get(build.host) : undefined;
      if (!worker?.address) throw new HttpError(500, `unable to cancel running build ${entry}: no worker for host ${build.host ?? ''}`);
      const auth = { authorization: `Bearer ${this.serverToWorkerToken()}` };
      let executors: Array<{ id?: number; build?: { id?: number } }>;
      try {
        const res = await fetch(`${worker.address}/api/v1/executors`, { headers: auth, signal: AbortSignal.timeout(30_000) });
        executors = (await res.json()) as typeof executors;
      } catch (e) {
        throw new HttpError(500, `unable to cancel running build ${entry}: ${e instanceof Error ? e.message : String(e)}`);
      }
      const executor = Array.isArray(executors) ? executors.find((x) => x.build?.id === build.id) : undefined;
      if (executor) {
        try {
          const res = await fetch(`${worker.address}/api/v1/executors/${executor.id}/build/cancel`, {
            method: 'DELETE',
            headers: auth,
            signal: AbortSignal.timeout(30_000),
          });
          return { status: 200, body: await res.json() };
        } catch (e) {
          throw new HttpError(500, `unable to cancel running build ${entry}: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
      build.error = `stale build was canceled by ${user}`;
      build.status = 'canceled';
      build.finished = Math.floor(Date.now() / 1000);
      return { status: 200, body: build };
    }
    if (build.status === 'pending' || build.status === 'pending approval') {
      build.error = `${build.status} build was canceled by ${user}`;
      build.status = 'canceled';
      build.finished = Math.floor(Date.now() / 1000);
      return { status: 200, body: build };
    }
    throw new HttpError(400, `found build ${entry} but its status was ${build.status}`);
  }

  #workerToken(caller: Caller): string {
    if (caller.claims.token_type === 'ServerWorker') return this.secret;
    return this.mintToken('WorkerAuth', caller.claims.sub, this.#options.workerAuthTokenTtlSec ?? 20 * 60);
  }

  // ---------------------------------------------------------------- internals: HTTP

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
    if (body && typeof body === 'object' && typeof (body as VelaLog).data === 'string' && path.endsWith('/logs')) {
      record.logDataBytes = Buffer.byteLength((body as { data: string }).data, 'base64');
    }

    const fault = this.#faults.take(method, path);
    if (fault && (fault.when ?? 'before') === 'before') {
      this.#answerFault(res, record, fault);
      return;
    }

    let status: number;
    let payload: unknown;
    const route = this.#routes.find((r) => r.method === method && r.re.test(path));
    if (!route) {
      // gin's NoRoute answer: plain text, not JSON.
      record.status = 404;
      if (fault) return this.#answerFault(res, record, fault);
      res.writeHead(404, { 'content-type': 'text/plain' }).end('404 page not found');
      return;
    }
    const match = route.re.exec(path)!;
    const params: Params = {};
    route.keys.forEach((k, i) => (params[k] = decodeURIComponent(match[i + 1]!)));
    try {
      const caller = this.#authenticate(req);
      record.tokenType = caller.claims.token_type;
      if (raw.length > 0 && body === undefined) throw new HttpError(400, 'unable to decode JSON: invalid character in request body');
      ({ status, body: payload } = await route.handler({ caller, params, body, query: url.searchParams, headers: req.headers }));
    } catch (e) {
      if (!(e instanceof HttpError)) throw e;
      status = e.status;
      payload = { error: e.message };
    }
    if (fault) {
      this.#answerFault(res, record, fault);
      return;
    }
    record.status = status;
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(payload));
  }

  #answerFault(res: ServerResponse, record: CallRecord, fault: FaultRule): void {
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
}

function asObject(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(400, 'unable to decode JSON: body is not an object');
  return body as Record<string, unknown>;
}

function summarize(body: unknown, raw: Buffer): string {
  if (raw.length === 0) return '';
  if (body && typeof body === 'object' && typeof (body as VelaLog).data === 'string') {
    const { data, ...rest } = body as VelaLog & Record<string, unknown>;
    return JSON.stringify({ ...rest, data: `<${Buffer.byteLength(data ?? '', 'base64')} bytes>` }).slice(0, 200);
  }
  return raw.toString('utf8').slice(0, 200);
}
