/**
 * The Vela worker daemon (`berth start`): listens (the worker's HTTP API), creates the runtime,
 * and composes its parts: the registrar (registration, check-ins, worker record), the reaper
 * (what a crashed run left, failing builds), the slot runner (pop, claim, run) and the drain.
 */
import { type CancelFunc, type Context, background, isContextError, sleep, withCancel, withTimeout } from '@berth/context';
import { isFinal, RuntimeEventRouter } from '@berth/executor';
import { isRuntimeError, type Runtime, type RuntimeDescriptor } from '@berth/runtime';
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { loadRuntime } from '../plugins/load.ts';
import { instrumentRuntime, type RuntimeSettings } from '../runtimes.ts';
import { WorkerCredentials } from '../vela/auth.ts';
import { type RetryOptions, VelaClient } from '../vela/client.ts';
import type { StartConfig } from '../vela/config.ts';
import type { VelaBuild } from '../vela/models.ts';
import { type ApiServer, type ApiTls, createApi } from './api.ts';
import type { DaemonCore, Readiness, SlotEntry, WorkerApiHost } from './types.ts';
import { Reaper } from './reaper.ts';
import { Registrar } from './registrar.ts';
import { MemorySettler } from './memory.ts';
import { SlotRunner } from './slot-runner.ts';
import { Drain } from './drain.ts';
import { DaemonMetrics } from './metrics.ts';
import { RunningBuildsFile } from './state.ts';
import { errText } from './util.ts';

export { STALE_BUILD_MESSAGE } from './slot-runner.ts';

/** Options of {@link Daemon.start}. */
export interface DaemonOptions {
  /** The Vela configuration (flags and VELA_* variables). */
  config: StartConfig;
  logger: Logger;
  /** The worker's version (`/version`, the init log). */
  version: string;
  /** How long running builds may go on after SIGTERM before they are cancelled (default 10 min). */
  drainGraceMs?: number;
  /** SIGTERM to SIGKILL for containers of a cancelled build (default 10 s). */
  stopGraceMs?: number;
  /** Bound of destroying one build (default 2 min). */
  cleanupTimeoutMs?: number;
  /** Where the API listens; default `0.0.0.0` and the worker address's port. */
  listen?: { host?: string; port?: number };
  /** Directory of the running-builds file (see {@link RunningBuildsFile}); undefined: memory only. */
  stateDir?: string | undefined;
  /** Per-attempt timeout of Vela server calls (default 15 s). */
  serverTimeoutMs?: number;
  /** Retry settings of Vela server calls. */
  retry?: RetryOptions;
  /** The runtime plugin; default: chosen from `config.runtime`. */
  runtime?: RuntimeDescriptor;
  /** Extra runtime plugin settings (e.g. the Kubernetes pause image). */
  runtimeSettings?: RuntimeSettings;
  /** Wait after a failed pop or claim before the next one (default 5 s). */
  errorBackoffMs?: number;
}

/**
 * The daemon. `Daemon.start` listens, connects the runtime, registers, reaps and starts the build
 * slots; `shutdown()` drains (first call) or forces (second call); `done` settles when everything
 * is closed.
 *
 * Gotchas: the worker id (every runtime label, the reap key) is the hostname of the worker
 * address, so two daemons on one machine need different addresses. A build is never dropped
 * between pop and claim: when draining, a popped item goes back to the head of its route.
 */
export class Daemon implements WorkerApiHost {
  readonly config: StartConfig;
  readonly metrics = new DaemonMetrics();
  readonly credentials: WorkerCredentials;
  readonly log: Logger;
  readonly version: string;
  readonly #o: DaemonOptions;
  readonly #root: Context;
  readonly #cancelRoot: CancelFunc;
  /** Cancelled when draining starts: stops pops and the wait for registration. */
  readonly #claimCtx: Context;
  readonly #cancelClaims: CancelFunc;
  readonly #client: VelaClient;
  readonly #events = new RuntimeEventRouter();
  readonly #state: RunningBuildsFile;
  /** Slot → its current build. Pruned when the build ends. */
  readonly slots = new Map<number, SlotEntry>();
  #api: ApiServer | undefined;
  #apiUrl = '';
  #runtime: Runtime | undefined;
  /** What the parts share (see {@link DaemonCore}). */
  readonly #core: DaemonCore;
  readonly #registrar: Registrar;
  readonly #reaper: Reaper;
  readonly #slots: SlotRunner;
  readonly #settler: MemorySettler;
  readonly #drain: Drain;
  #draining = false;
  #stopping: Promise<void> | undefined;
  readonly #done: Promise<void>;
  #resolveDone!: () => void;
  #started = false;

  private constructor(options: DaemonOptions) {
    this.#o = options;
    this.config = options.config;
    this.log = options.logger;
    this.version = options.version;
    this.metrics.describe({ version: options.version, buildLimit: this.config.build.limit });
    this.credentials = new WorkerCredentials({ hostname: this.config.worker.hostname, secret: this.config.server.secret });
    [this.#root, this.#cancelRoot] = withCancel(background());
    [this.#claimCtx, this.#cancelClaims] = withCancel(this.#root);
    this.#client = new VelaClient({
      address: this.config.server.addr,
      token: '',
      timeoutMs: options.serverTimeoutMs ?? 15_000,
      ...(options.retry ? { retry: options.retry } : {}),
      userAgent: `berth-worker/${options.version} (vela-sdk-go compatible)`,
      logger: { warn: (obj, msg) => this.log.warn(obj, msg) },
      transport: this.metrics.countingTransport(),
    });
    this.#state = new RunningBuildsFile(options.stateDir, this.config.worker.hostname);
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the core's getters read the daemon's private state
    const self = this;
    this.#core = {
      config: this.config,
      log: this.log,
      version: this.version,
      metrics: this.metrics,
      credentials: this.credentials,
      client: this.#client,
      workerId: this.config.worker.hostname,
      root: this.#root,
      claimCtx: this.#claimCtx,
      slots: this.slots,
      state: this.#state,
      errorBackoffMs: options.errorBackoffMs ?? 5_000,
      get runtime() {
        return self.#runtime;
      },
      get draining() {
        return self.#draining;
      },
      get forced() {
        return self.#drain.forced;
      },
    };
    this.#registrar = new Registrar(this.#core);
    this.#reaper = new Reaper(this.#core, this.#registrar);
    this.#settler = new MemorySettler(this.log, () => this.slots.size === 0 && !this.#draining);
    this.#slots = new SlotRunner(this.#core, {
      registrar: this.#registrar,
      reaper: this.#reaper,
      events: this.#events,
      cleanupTimeoutMs: options.cleanupTimeoutMs,
      onIdle: () => this.#settler.soon(),
    });
    this.#drain = new Drain(this.#core, {
      registrar: this.#registrar,
      slots: this.#slots,
      graceMs: options.drainGraceMs ?? 600_000,
      cancelRoot: this.#cancelRoot,
      closeApi: async () => {
        await this.#api?.close();
      },
      onClosed: () => {
        this.#settler.stop();
        this.#resolveDone();
      },
    });
    this.#done = new Promise((r) => (this.#resolveDone = r));
  }

  /**
   * Starts the daemon: the HTTP API first (so `/register` and `/health` answer at once), then the
   * runtime, registration, reaping and the build slots, in the background. Rejects only when the
   * API cannot listen or the runtime configuration is invalid.
   */
  static async start(options: DaemonOptions): Promise<Daemon> {
    const d = new Daemon(options);
    await d.#listen();
    try {
      await d.#createRuntime();
    } catch (e) {
      await d.#api?.close();
      d.#cancelRoot();
      throw e;
    }
    d.#started = true;
    void d.#lifecycle();
    return d;
  }

  /** The API's base URL (`http://127.0.0.1:PORT` when listening on every address). */
  get url(): string {
    return this.#apiUrl;
  }

  /** The worker id (labels, reaping): the hostname of the worker address. */
  get workerId(): string {
    return this.config.worker.hostname;
  }

  /** The runtime (once created). */
  get runtime(): Runtime | undefined {
    return this.#runtime;
  }

  /** True once a check-in succeeded, and until one fails. */
  get registered(): boolean {
    return this.#registrar.registered;
  }

  /** True once `shutdown()` was called. */
  get draining(): boolean {
    return this.#draining;
  }

  /** Settles when the daemon has stopped and closed everything. */
  get done(): Promise<void> {
    return this.#done;
  }

  // ---------------------------------------------------------------- lifecycle

  async #listen(): Promise<void> {
    const https = new URL(this.config.worker.addr).protocol === 'https:';
    this.#api = createApi(this, https ? { tls: this.#tls() } : {});
    const host = this.#o.listen?.host ?? '0.0.0.0';
    // Without an explicit port in the worker address, listen on 8080 (the URL's default would be 80).
    const port = this.#o.listen?.port ?? (new URL(this.config.worker.addr).port === '' ? 8080 : this.config.worker.port);
    await this.#api.listen({ host, port });
    const addr = this.#api.server.address();
    const actualPort = typeof addr === 'object' && addr !== null ? addr.port : port;
    this.#apiUrl = `${https ? 'https' : 'http'}://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${actualPort}`;
    this.log.info({ url: this.#apiUrl }, 'worker API listening');
  }

  /** The certificate and key of an https worker address, read now so a bad path fails the start. */
  #tls(): ApiTls {
    const { cert, certKey, tlsMinVersion } = this.config.server;
    if (!cert || !certKey)
      throw new Error(
        'unable to run with TLS: the worker address is https but no certificate is set (set server.cert and server.cert-key, VELA_SERVER_CERT and VELA_SERVER_CERT_KEY)',
      );
    const read = (file: string, what: string): Buffer => {
      try {
        return readFileSync(file);
      } catch (e) {
        throw new Error(`expecting ${what} at ${file}, got ${errText(e)} (check server.${what === 'certificate file' ? 'cert' : 'cert-key'})`, { cause: e });
      }
    };
    return { cert: read(cert, 'certificate file'), key: read(certKey, 'certificate key'), minVersion: tlsMinVersion };
  }

  async #createRuntime(): Promise<void> {
    // The same loader as `berth exec --runtime` and `start --runtime-plugin`: the built-in plugin's
    // module is imported only now, so a Docker worker never loads the Kubernetes client.
    const { runtime: r } = this.config;
    const descriptor =
      this.#o.runtime ??
      (
        await loadRuntime(r.driver, {
          cwd: process.cwd(),
          builtinSettings: {
            kubeconfig: r.config,
            namespace: r.namespace,
            podsTemplateName: r.podsTemplateName,
            podsTemplateFile: r.podsTemplateFile,
            dropCapabilities: r.dropCapabilities.length > 0 ? r.dropCapabilities : undefined,
            ...this.#o.runtimeSettings,
          },
        })
      ).descriptor;
    for (let attempt = 1; ; attempt++) {
      const [ctx, cancel] = withTimeout(this.#root, 30_000);
      try {
        const runtime = await descriptor.create(ctx, {
          workerId: this.workerId,
          privilegedImages: this.config.runtime.privilegedImages,
          volumes: this.config.runtime.volumes,
          stopGraceMs: this.#o.stopGraceMs ?? 10_000,
          onEvent: this.#events.onEvent,
        });
        this.#runtime = instrumentRuntime(runtime, (code, method) => {
          this.metrics.runtimeErrors.inc({ code });
          this.log.debug({ code, method }, 'runtime call failed');
        });
        const tracker = (runtime as { podTracker?: { stats(): { restarts: number } } }).podTracker;
        if (tracker && typeof tracker.stats === 'function') this.metrics.watchRestartsFrom(() => tracker.stats().restarts);
        this.log.info({ runtime: descriptor.name, version: descriptor.version }, 'runtime ready');
        return;
      } catch (e) {
        if (isRuntimeError(e) && e.code !== 'Unavailable' && e.code !== 'DeadlineExceeded') throw e;
        if (attempt >= 3) throw e;
        this.log.warn({ attempt, err: e }, 'the runtime is not reachable yet; retrying');
        await sleep(this.#root, 2_000 * attempt);
      } finally {
        cancel();
      }
    }
  }

  async #lifecycle(): Promise<void> {
    try {
      await this.#registrar.register(this.#claimCtx);
      await this.#reaper.reap(this.#claimCtx);
      this.#slots.start();
      // Started: what loading left in V8's young generation is given back while nothing runs.
      this.#settler.soon();
      const checkIns = this.#registrar.checkInLoop(this.#root);
      await this.#slots.all();
      await this.shutdown();
      await checkIns;
    } catch (e) {
      if (!isContextError(e)) this.log.error({ err: e }, 'the worker stopped on an unexpected error');
      await this.shutdown();
    }
  }

  // ---------------------------------------------------------------- API helpers

  /** Readiness: registered, queue answering PING, runtime answering. */
  async readiness(probeRuntime: (ctx: Context, runtime: Runtime) => Promise<string | undefined>): Promise<Readiness> {
    const [ctx, cancel] = withTimeout(this.#root, 5_000);
    try {
      const queueOk = this.#registrar.queue ? await this.#registrar.queue.ping() : false;
      const runtimeError = this.#runtime ? await probeRuntime(ctx, this.#runtime) : 'the runtime is not created yet';
      const checks: Readiness['checks'] = {
        registered: this.#registrar.registered
          ? { ok: true }
          : {
              ok: false,
              error:
                this.#registrar.checkInError ??
                (this.credentials.token === undefined ? 'waiting for a registration token (POST /register)' : 'not checked in yet'),
            },
        queue: queueOk ? { ok: true } : { ok: false, error: this.#registrar.queue ? 'Redis does not answer PING' : 'no queue yet (not registered)' },
        runtime: runtimeError === undefined ? { ok: true } : { ok: false, error: runtimeError },
      };
      return { ready: !this.#draining && checks.registered.ok && checks.queue.ok && checks.runtime.ok, checks };
    } finally {
      cancel();
    }
  }

  /** Checks a bearer token with the server's `/validate-token`. */
  async validateServerToken(token: string): Promise<boolean> {
    const [ctx, cancel] = withTimeout(this.#root, 20_000);
    try {
      return await this.#client.validateServerToken(ctx, token, { retry: { attempts: 2 } });
    } finally {
      cancel();
    }
  }

  /**
   * Cancels the build in `slot` (the API's cancel route) and answers as soon as the cancel is
   * recorded: the executor stops the build in the background (SIGTERM, the stop grace, SIGKILL)
   * and the slot runner reports the final statuses as usual. go-vela/worker api/build.go
   * CancelBuild answers once executor/linux/api.go CancelBuild has marked the steps and removed
   * the containers (no stop grace there); go-vela/server api/build/cancel.go cancelBuildForExecutor
   * waits for that answer (30 s client timeout) before the user's cancel returns.
   * A cancel that arrives before the slot's executor exists is recorded and honoured when it
   * appears. Returns the build as the server last stored it, with status `canceled`; a build
   * that had already ended (or had begun destroying) is returned with the status it ended with,
   * and `canceled` is false. Undefined when the slot runs nothing.
   */
  cancel(slot: number): { build: VelaBuild; canceled: boolean } | undefined {
    const entry = this.slots.get(slot);
    if (!entry) return undefined;
    const where = { slot, build: entry.build().id };
    const executor = entry.executor;
    if (executor && isFinal(executor.status)) {
      // execBuild is over: destroy runs or ran, and cancelBuild would do nothing (Go's cancel still
      // says `canceled`; Berth tells what happened).
      this.log.warn({ ...where, status: executor.status }, 'cancel through the API: the build had already ended; nothing canceled');
      return { build: { ...entry.build(), status: executor.status }, canceled: false };
    }
    const cause = new Error('canceled through the worker API');
    if (executor) executor.cancelBuild(cause);
    else entry.pendingCancel ??= cause;
    this.log.warn(
      { ...where, executor: executor ? 'running' : 'starting' },
      executor
        ? 'build canceled through the API: stopping it in the background'
        : 'build canceled through the API while its slot starts: recorded, applied when the build starts',
    );
    return { build: { ...entry.build(), status: 'canceled' }, canceled: true };
  }

  // ---------------------------------------------------------------- shutdown

  /**
   * First call: drain — stop claiming builds (a popped item is run or pushed back), let running
   * builds finish within the drain grace, then cancel them; then close everything. Second call:
   * cancel running builds now. Resolves when the daemon has stopped.
   */
  shutdown(reason = 'shutdown requested'): Promise<void> {
    if (this.#draining) {
      if (!this.#drain.forced && reason !== 'shutdown requested') this.#drain.force(reason);
      return this.#stopping ?? this.#done;
    }
    this.#draining = true;
    this.log.warn({ reason, running: this.slots.size, graceMs: this.#o.drainGraceMs ?? 600_000 }, 'draining: no new builds; waiting for running builds');
    this.#cancelClaims(new Error(`draining: ${reason}`));
    this.#stopping = this.#drain.run();
    return this.#stopping;
  }

  /** True once `start` finished (for tests). */
  get started(): boolean {
    return this.#started;
  }
}
