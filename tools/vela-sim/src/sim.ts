// VelaSim: a test double of go-vela/server's worker-facing HTTP API, plus the server's side of
// the Redis queue (signed RPUSH). See README.md for what it implements and what it does not.
// This file wires the parts together and holds the test hooks; the routes live in routes/*.ts,
// the HTTP front in http.ts, tokens and permission checks in auth.ts, the records in state.ts
// and the queue in queue.ts.

import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { Redis } from 'ioredis';
import { Tokens } from './auth.ts';
import type { SimContext, VelaSimOptions } from './context.ts';
import { compilePathPattern, type FaultRule } from './faults.ts';
import { ApiFront, type CallRecord, Router, listen } from './http.ts';
import type { TokenType } from './jwt.ts';
import { type EnqueueBuildOptions, type EnqueuedBuild, QueuePublisher, enqueueBuild } from './queue.ts';
import { buildRoutes } from './routes/builds.ts';
import { recordRoutes } from './routes/records.ts';
import { scmRoutes } from './routes/scm.ts';
import { secretRoutes, withCreateDefaults } from './routes/secrets.ts';
import { workerRoutes } from './routes/workers.ts';
import { type QueueKeys, generateQueueKeys, queueKeysFromPrivate } from './signing.ts';
import { type InstallTokenRecord, SimState, type StoredWorker } from './state.ts';
import type { VelaBuild, VelaSecret, VelaService, VelaStep } from './types.ts';

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
  readonly calls: CallRecord[];
  /** Stored workers by hostname (running builds as ids). */
  readonly workers: Map<string, StoredWorker>;
  /** Stored builds by id. */
  readonly builds: Map<number, VelaBuild>;
  /** Stored secrets by `engine/type/org/name/key`. */
  readonly secrets: Map<string, VelaSecret>;
  /** SCM install tokens the sim minted and has not evicted, by token. */
  readonly installTokens: Map<string, InstallTokenRecord>;
  /** Every install token the sim minted, in order (evicted ones too). */
  readonly installTokenLog: InstallTokenRecord[];

  readonly #options: VelaSimOptions;
  readonly #tokens: Tokens;
  readonly #state = new SimState();
  readonly #ctx: SimContext;
  readonly #front: ApiFront;
  readonly #publisher: QueuePublisher;

  private constructor(listening: { server: Server; url: string }, options: VelaSimOptions) {
    this.url = listening.url;
    this.#options = options;
    this.secret = options.secret ?? randomBytes(16).toString('hex');
    this.#tokens = new Tokens(options.tokenKey ?? randomBytes(32).toString('hex'), this.secret);
    this.queueKeys = options.queuePrivateKey ? queueKeysFromPrivate(options.queuePrivateKey) : generateQueueKeys();
    this.queueAddr = options.queueAddr ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
    this.#publisher = new QueuePublisher(this.queueKeys, this.queueAddr);
    this.workers = this.#state.workers;
    this.builds = this.#state.builds;
    this.secrets = this.#state.secrets;
    this.installTokens = this.#state.installTokens;
    this.installTokenLog = this.#state.installTokenLog;
    this.#ctx = { state: this.#state, tokens: this.#tokens, options, secret: this.secret, queueKeys: this.queueKeys, queueAddr: this.queueAddr };
    const router = new Router();
    workerRoutes(router, this.#ctx);
    buildRoutes(router, this.#ctx);
    scmRoutes(router, this.#ctx);
    recordRoutes(router, this.#ctx);
    secretRoutes(router, this.#ctx);
    this.#front = new ApiFront(listening.server, router, (req) => this.#tokens.authenticate(req));
    this.calls = this.#front.calls;
  }

  /** Starts a sim listening on 127.0.0.1. */
  static async start(options: VelaSimOptions = {}): Promise<VelaSim> {
    return new VelaSim(await listen(options.port ?? 0), options);
  }

  /** Stops listening, drops every connection (held ones too) and closes the Redis connection. */
  async close(): Promise<void> {
    await this.#front.close();
    this.#publisher.close();
  }

  // ---------------------------------------------------------------- tokens

  /** Mints a token as the server would. `ttlSec` defaults per type. */
  mintToken(type: TokenType, sub: string, ttlSec: number, extra: { build_id?: number; repo?: string } = {}): string {
    return this.#tokens.mint(type, sub, ttlSec, extra);
  }

  /** A registration token for `hostname`, as `POST /api/v1/admin/workers/{host}/register` returns. */
  registrationToken(hostname: string, ttlSec = this.#options.registerTokenTtlSec ?? 60): string {
    return this.mintToken('WorkerRegister', hostname, ttlSec);
  }

  /** The token the server sends to a worker's API (`sub: vela-server`, 1 min). */
  serverToWorkerToken(): string {
    return this.#tokens.serverToWorker();
  }

  // ---------------------------------------------------------------- faults and calls

  /** Makes the next `times` calls matching `rule` fail. */
  fail(rule: FaultRule): void {
    this.#front.faults.add(rule);
  }

  /** Drops every pending fault. */
  clearFaults(): void {
    this.#front.faults.clear();
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
    this.secrets.set(`${engine}/${type}/${org}/${name}/${key}`, withCreateDefaults(type, org, key, secret));
  }

  /** The build `org/repo#number`, if any. */
  findBuild(org: string, repo: string, number: number): VelaBuild | undefined {
    return this.#state.findBuild(org, repo, number);
  }

  /** The steps of a build, by number. */
  stepsOf(buildId: number): VelaStep[] {
    return [...(this.#state.steps.get(buildId)?.values() ?? [])];
  }

  /** The services of a build, by number. */
  servicesOf(buildId: number): VelaService[] {
    return [...(this.#state.services.get(buildId)?.values() ?? [])];
  }

  /** The stored log bytes of a step (by number), or undefined. */
  stepLog(buildId: number, stepNumber: number): Buffer | undefined {
    return this.#state.log('step', this.#state.steps.get(buildId)?.get(stepNumber)?.id)?.data;
  }

  /** The stored log bytes of a service (by number), or undefined. */
  serviceLog(buildId: number, serviceNumber: number): Buffer | undefined {
    return this.#state.log('service', this.#state.services.get(buildId)?.get(serviceNumber)?.id)?.data;
  }

  /** Whether the build's executable is still stored (it is deleted on the first read). */
  hasExecutable(buildId: number): boolean {
    return this.#state.executables.has(buildId);
  }

  // ---------------------------------------------------------------- queue

  /** The Redis connection the sim pushes with (created on first use). */
  redis(): Redis {
    return this.#publisher.redis();
  }

  /** Signs `message` in NaCl combined format with the queue key. */
  sign(message: Buffer | string): Buffer {
    return this.#publisher.sign(message);
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
    return enqueueBuild(this.#ctx, this.#publisher, options);
  }
}
