/**
 * The Vela worker daemon (`berth start`): registration and check-in, build slots popping the
 * Redis queue, claiming and running builds, the worker's HTTP API, graceful drain and reaping.
 */
import { type CancelFunc, type Context, background, isContextError, sleep, withCancel, withTimeout } from '@berth/context';
import { type BuildResult, type Reporter, combineReporters, isFinal, runBuild, RuntimeEventRouter } from '@berth/executor';
import { type Build, marshalBuild, parseBuild, prepareBuild, validateBuild } from '@berth/pipeline';
import { isPrivilegedImage, isRuntimeError, type Runtime, type RuntimeDescriptor } from '@berth/runtime';
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { instrumentRuntime, selectRuntime, type RuntimeSettings } from '../runtimes.ts';
import { WorkerCredentials } from '../vela/auth.ts';
import { claimBuild, type ClaimResult } from '../vela/claim.ts';
import { type RetryOptions, VelaClient } from '../vela/client.ts';
import type { StartConfig } from '../vela/config.ts';
import type { VelaBuild } from '../vela/models.ts';
import { type PopResult, type QueueItem, type RawEntry, type UnverifiedBuild } from '../vela/queue.ts';
import { type ReportedBuild, VelaReporter } from '../vela/reporter.ts';
import { type ApiTls, createApi } from './api.ts';
import type { DaemonCore, Readiness, SlotEntry, WorkerApiHost } from './types.ts';
import { Reaper } from './reaper.ts';
import { Registrar } from './registrar.ts';
import { DaemonMetrics } from './metrics.ts';
import { runEnvironment } from './environment.ts';
import { ScmAuth } from './scm-auth.ts';
import { velaSecretLoader } from './secrets.ts';
import { RunningBuildsFile } from './state.ts';

/** The message Vela stores on a build queued by a server with another item version. */
export const STALE_BUILD_MESSAGE = 'Unable to process stale build (queued before Vela upgrade/downgrade).';

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

const errText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

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
  readonly #slotLoops: Promise<void>[] = [];
  #api: FastifyInstance | undefined;
  #apiUrl = '';
  #runtime: Runtime | undefined;
  /** What the parts share (see {@link DaemonCore}). */
  readonly #core: DaemonCore;
  readonly #registrar: Registrar;
  readonly #reaper: Reaper;
  #draining = false;
  #forced = false;
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
      fetch: this.metrics.countingFetch(),
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
        return self.#forced;
      },
    };
    this.#registrar = new Registrar(this.#core);
    this.#reaper = new Reaper(this.#core, this.#registrar);
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
    if (!cert || !certKey) throw new Error('unable to run with TLS: the worker address is https but no certificate is set (set server.cert and server.cert-key, VELA_SERVER_CERT and VELA_SERVER_CERT_KEY)');
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
    const descriptor = this.#o.runtime ?? selectRuntime(this.config.runtime.driver, {
      kubeconfig: this.config.runtime.config,
      namespace: this.config.runtime.namespace,
      podsTemplateName: this.config.runtime.podsTemplateName,
      podsTemplateFile: this.config.runtime.podsTemplateFile,
      dropCapabilities: this.config.runtime.dropCapabilities,
      ...this.#o.runtimeSettings,
    });
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
      for (let slot = 0; slot < this.config.build.limit; slot++) this.#slotLoops.push(this.#slotLoop(slot));
      const checkIns = this.#registrar.checkInLoop(this.#root);
      await Promise.all(this.#slotLoops);
      await this.shutdown();
      await checkIns;
    } catch (e) {
      if (!isContextError(e)) this.log.error({ err: e }, 'the worker stopped on an unexpected error');
      await this.shutdown();
    }
  }

  // ---------------------------------------------------------------- build slots

  async #slotLoop(slot: number): Promise<void> {
    const backoff = this.#o.errorBackoffMs ?? 5_000;
    let skipping: string | undefined;
    while (!this.#claimCtx.signal.aborted) {
      // The token expired without a secret to fall back on: claim nothing until a /register.
      if (this.credentials.needsRegistration()) {
        await sleep(this.#claimCtx, 1_000).catch(() => undefined);
        continue;
      }
      // go-vela/worker operate.go: a build thread skips the queue while the last check-in or its
      // queue PING failed.
      const why = !this.#registrar.registered ? 'worker not checked in: skipping the queue until a check-in works' : !this.#registrar.queueOk ? 'queue PING failed: skipping the queue until a check-in pings it' : undefined;
      if (why !== undefined) {
        if (skipping !== why) this.log.warn({ slot }, why);
        skipping = why;
        await sleep(this.#claimCtx, backoff).catch(() => undefined);
        continue;
      }
      if (skipping !== undefined) this.log.info({ slot }, 'checked in again: reading the queue');
      skipping = undefined;
      // go-vela/worker exec.go: GET the worker before each pop; its routes are what to pop.
      let routes: string[];
      try {
        const me = await this.#registrar.authClient().getWorker(this.#claimCtx, this.workerId, { retry: { attempts: 3 } });
        this.#registrar.updateRoutes(me?.routes);
        routes = this.#registrar.routes;
      } catch (e) {
        if (this.#claimCtx.signal.aborted) break;
        this.log.error({ slot, err: e }, 'unable to retrieve the worker from the server: not reading the queue; retrying');
        await sleep(this.#claimCtx, backoff).catch(() => undefined);
        continue;
      }
      const queue = this.#registrar.queue!;
      const res: PopResult = await queue.pop(this.#claimCtx, routes.length > 0 ? routes : queue.routes);
      this.metrics.queueItems.inc({ result: res.kind });
      try {
        switch (res.kind) {
          case 'canceled':
          case 'empty':
            break;
          case 'error':
            if (this.#claimCtx.signal.aborted) break;
            this.log.error({ slot, err: res.error }, 'queue pop failed; retrying');
            await sleep(this.#claimCtx, backoff).catch(() => undefined);
            break;
          case 'bad-signature':
            await this.#badItem(slot, res.entry, 'its signature does not verify with the server queue key', res.unverified);
            break;
          case 'bad-item':
            await this.#badItem(slot, res.entry, res.reason, res.build);
            break;
          case 'stale':
            await this.#stale(slot, res.item, res.version);
            break;
          case 'item':
            await this.#item(slot, res.item, res.entry);
            break;
        }
      } catch (e) {
        // Never let one item end the slot.
        this.log.error({ slot, err: e }, 'unexpected error handling a queue item');
        await sleep(this.#claimCtx, backoff).catch(() => undefined);
      }
    }
  }

  async #badItem(slot: number, entry: RawEntry, reason: string, unverified: UnverifiedBuild | undefined): Promise<void> {
    const what = unverified ? { build: unverified.id, repo: unverified.org && unverified.repo ? `${unverified.org}/${unverified.repo}` : undefined, number: unverified.number } : {};
    this.log.error({ slot, route: entry.route, bytes: entry.bytes.length, ...what }, `dropped a queue item: ${reason}`);
    if (unverified?.org && unverified.repo && typeof unverified.number === 'number') {
      await this.#reaper.failBuild(
        this.#root,
        { ...(unverified.id === undefined ? {} : { id: unverified.id }), org: unverified.org, repo: unverified.repo, number: unverified.number },
        `The worker could not use this build's queue item: ${reason}.`,
        {},
      );
    }
  }

  async #stale(slot: number, item: QueueItem, version: number): Promise<void> {
    const b = item.build;
    this.log.warn({ slot, build: b.id, repo: `${b.repo.org}/${b.repo.name}`, number: b.number, itemVersion: version }, 'stale queue item (another item version): failing the build');
    await this.#reaper.failBuild(this.#root, { id: b.id, org: b.repo.org, repo: b.repo.name, number: b.number }, STALE_BUILD_MESSAGE);
    // It was never added to running_builds; make sure the server agrees.
    await this.#registrar.putWorker(this.#root).catch((e: unknown) => this.log.warn({ err: e }, 'worker update failed'));
  }

  async #item(slot: number, item: QueueItem, entry: RawEntry): Promise<void> {
    const b = item.build;
    const where = { slot, build: b.id, repo: `${b.repo.org}/${b.repo.name}`, number: b.number };
    if (this.#draining) {
      await this.#pushBack(entry, where);
      return;
    }
    const claim: ClaimResult = await claimBuild(this.#root, this.#registrar.authClient(), item);
    switch (claim.kind) {
      case 'not-pending':
        this.log.info({ ...where }, 'the build is no longer pending (canceled or taken): skipped');
        return;
      case 'unknown-build':
        this.log.warn({ ...where, err: claim.error }, 'the server has no such build: skipped');
        return;
      case 'failed':
        if (claim.stage === 'token') {
          this.log.error({ ...where, err: claim.error }, 'could not get the build token: the item goes back to the queue');
          await this.#pushBack(entry, where);
          await sleep(this.#claimCtx, this.#o.errorBackoffMs ?? 5_000).catch(() => undefined);
        } else {
          this.log.error({ ...where, err: claim.error }, 'could not get the executable');
          await this.#reaper.failBuild(this.#root, { id: b.id, org: b.repo.org, repo: b.repo.name, number: b.number }, `The worker could not get the build's executable: ${claim.error.message}`, {
            token: claim.buildToken,
          });
        }
        return;
      case 'claimed':
        await this.#run(slot, item, claim);
        return;
    }
  }

  async #pushBack(entry: RawEntry, where: object): Promise<void> {
    try {
      await this.#registrar.queue!.pushBack(entry);
      this.log.info({ ...where }, 'queue item pushed back');
    } catch (e) {
      this.log.error({ ...where, err: e }, 'could not push the item back to the queue: the build stays pending on the server');
    }
  }

  async #run(slot: number, item: QueueItem, claim: Extract<ClaimResult, { kind: 'claimed' }>): Promise<void> {
    const started = Date.now();
    // The repo last: the build's own fields (status…) lead each PUT body, which reads better in logs.
    const { repo: itemRepo, ...itemFields } = item.build;
    const vb: ReportedBuild = { ...itemFields, repo: itemRepo };
    const id = item.build.id;
    const { org, name } = vb.repo;
    const where = { slot, build: vb.id, repo: `${org}/${name}`, number: vb.number };
    // The server sets `enqueued` only after the push (S api/build/enqueue.go), so the item's build
    // usually lacks it: fall back to `created` (set when the build was created, just before).
    const queuedAt = typeof vb.enqueued === 'number' && vb.enqueued > 0 ? vb.enqueued : typeof vb.created === 'number' && vb.created > 0 ? vb.created : undefined;
    if (queuedAt !== undefined) this.metrics.queueWait.observe(Math.max(0, started / 1000 - queuedAt));
    const client = claim.client;
    const reporter = new VelaReporter({ client, build: vb, logger: { warn: (o, m) => this.log.warn({ ...where, ...o }, m) } });

    // The compiled pipeline, checked.
    let build: Build | undefined;
    let problem: string | undefined;
    const parsed = parseBuild(claim.pipeline);
    if (!parsed.ok) problem = parsed.issues.slice(0, 5).map((i) => `${i.path}: ${i.message}`).join('; ');
    else {
      const issues = validateBuild(parsed.value);
      if (issues.length > 0) problem = issues.slice(0, 5).map((i) => `${i.path}: ${i.message}`).join('; ');
      else build = prepareBuild(parsed.value, { org, repo: name, number: vb.number });
    }
    if (!build) {
      this.log.error({ ...where, problem }, 'the executable is not a pipeline Berth can run');
      await this.#reaper.failBuild(this.#root, { id: vb.id, org, repo: name, number: vb.number }, `The build's executable is not a valid pipeline: ${problem}`, { token: claim.buildToken });
      this.metrics.buildsTotal.inc({ status: 'error' });
      return;
    }

    let resolveDone!: (r: BuildResult | undefined) => void;
    const entry: SlotEntry = {
      slot,
      build: () => reporter.build,
      pipeline: sanitizePipeline(build),
      repo: vb.repo,
      executor: undefined,
      pendingCancel: undefined,
      done: new Promise((r) => (resolveDone = r)),
    };
    this.slots.set(slot, entry);
    this.#state.add({ id, org, repo: name, number: vb.number, token: claim.buildToken, claimedAt: started });
    this.metrics.buildsRunning.inc();
    this.#registrar.buildStarted();
    this.log.info({ ...where }, 'build claimed');
    await this.#registrar.putWorker(this.#root).catch((e: unknown) => this.log.warn({ ...where, err: e }, 'worker update failed'));

    const scm = new ScmAuth({
      client,
      org,
      repo: name,
      number: vb.number,
      build,
      serverAddr: this.config.server.addr,
      logger: { info: (o, m) => this.log.info({ ...where, ...o }, m) },
    });
    // executor.enforce-trusted-repos (go-vela/worker executor/linux/step.go ExecStep ~197–205,
    // service.go ExecService, build.go for secret origins): an untrusted repo may not run an image
    // the privileged allowlist names. Go errors the step when it is about to run; Berth errors the
    // build while assembling it (each container's environment is laid then), before anything runs.
    const guarded = this.config.executor.enforceTrustedRepos && vb.repo.trusted !== true ? this.config.runtime.privilegedImages : [];
    const untrustedPrivileged = (image: string): void => {
      if (guarded.length > 0 && isPrivilegedImage(image, guarded)) {
        throw new Error(`attempting to use privileged image (${image}) as untrusted repo (mark the repo trusted on the server, or remove the image from VELA_RUNTIME_PRIVILEGED_IMAGES)`);
      }
    };
    const environment = runEnvironment(vb, { host: this.workerId, runtime: this.#runtime!.name, started: Math.floor(started / 1000) });
    const timeoutMs = typeof vb.repo.timeout === 'number' && vb.repo.timeout > 0 ? vb.repo.timeout * 60_000 : this.config.build.timeoutMs;
    let result: BuildResult | undefined;
    try {
      result = await runBuild(this.#root, {
        build,
        runtime: this.#runtime!,
        // The SCM reporter after the Vela one: the build is running on the server when it asks for tokens.
        reporter: combineReporters(reporter, scm.reporter(), this.#metricsReporter(where)),
        timeoutMs,
        logStreamingGraceMs: this.config.executor.logStreamingTimeoutMs,
        ...(this.#o.cleanupTimeoutMs === undefined ? {} : { cleanupTimeoutMs: this.#o.cleanupTimeoutMs }),
        ...(this.config.executor.maxLogSize > 0 ? { logs: { limits: { maxBytes: this.config.executor.maxLogSize } } } : {}),
        ruleData: ruleDataOf(vb),
        loadSecret: velaSecretLoader(client, { org, name }),
        environment: (container) => {
          untrustedPrivileged(container.image);
          return { ...environment(container), ...scm.environment(container) };
        },
        events: this.#events,
        host: this.workerId,
        version: this.version,
        logger: {
          debug: (m) => this.log.debug({ ...where }, m),
          info: (m) => this.log.info({ ...where }, m),
          warn: (m) => this.log.warn({ ...where }, m),
        },
        onStart: (executor) => {
          entry.executor = executor;
          // A cancel recorded while the slot was starting, or a drain forced meanwhile: cancel at once.
          if (entry.pendingCancel) executor.cancelBuild(entry.pendingCancel);
          else if (this.#forced) executor.cancelBuild(new Error('the worker is shutting down'));
        },
      });
      const status = result.status;
      this.metrics.buildsTotal.inc({ status });
      this.metrics.buildDuration.observe({ status }, (Date.now() - started) / 1000);
      this.log.info({ ...where, status, error: result.build.error, seconds: Math.round((Date.now() - started) / 1000) }, 'build finished');
    } catch (e) {
      this.log.error({ ...where, err: e }, 'the build failed unexpectedly');
      this.metrics.buildsTotal.inc({ status: 'error' });
      await this.#reaper.failBuild(this.#root, { id: vb.id, org, repo: name, number: vb.number }, `The worker failed running the build: ${errText(e)}`, { token: claim.buildToken });
    } finally {
      reporter.abandon();
      this.slots.delete(slot);
      this.#state.remove(id);
      this.metrics.buildsRunning.dec();
      this.#registrar.buildFinished();
      resolveDone(result);
      await this.#registrar.putWorker(this.#root).catch((e: unknown) => this.log.warn({ ...where, err: e }, 'worker update failed'));
    }
  }

  /** Step durations and log bytes into the metrics. */
  #metricsReporter(where: object): Reporter {
    return {
      buildStatus: () => Promise.resolve(),
      stepStatus: (_ctx, step) => {
        if (step.finished !== undefined && step.started !== undefined && step.kind !== 'init' && ['success', 'failure', 'error', 'canceled', 'killed'].includes(step.status)) {
          this.metrics.stepDuration.observe({ kind: step.kind, status: step.status }, Math.max(0, (step.finished - step.started) / 1000));
        }
        if (step.kind !== 'init' && step.status !== 'running' && step.status !== 'pending') this.log.debug({ ...where, step: step.name, status: step.status, exitCode: step.exitCode }, 'step finished');
        return Promise.resolve();
      },
      appendLog: (_ctx, target, chunk) => {
        this.metrics.logBytes.inc({ kind: target.kind }, chunk.byteLength);
        return Promise.resolve();
      },
      closeLog: () => Promise.resolve(),
    };
  }

  // ---------------------------------------------------------------- API helpers

  /** Readiness: registered, queue answering PING, runtime answering. */
  async readiness(probeRuntime: (ctx: Context, runtime: Runtime) => Promise<string | undefined>): Promise<Readiness> {
    const [ctx, cancel] = withTimeout(this.#root, 5_000);
    try {
      const queueOk = this.#registrar.queue ? await this.#registrar.queue.ping() : false;
      const runtimeError = this.#runtime ? await probeRuntime(ctx, this.#runtime) : 'the runtime is not created yet';
      const checks: Readiness['checks'] = {
        registered: this.#registrar.registered ? { ok: true } : { ok: false, error: this.#registrar.checkInError ?? (this.credentials.token === undefined ? 'waiting for a registration token (POST /register)' : 'not checked in yet') },
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
   * Cancels the build in `slot` (the API's cancel route) and waits, up to `waitMs`, for it to be
   * reported and cleaned. A cancel that arrives before the slot's executor exists is recorded and
   * honoured when it appears. Returns the build as the server last stored it, with status
   * `canceled` only when the cancel took effect: a build that had already ended (or had begun
   * destroying) is returned with the status it ended with, and `canceled` is false.
   * Undefined when the slot runs nothing.
   */
  async cancel(slot: number, waitMs = 25_000): Promise<{ build: VelaBuild; canceled: boolean } | undefined> {
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
    this.log.warn({ ...where, executor: executor ? 'running' : 'starting' }, executor ? 'build canceled through the API' : 'build canceled through the API while its slot starts: recorded, applied when the build starts');
    const [ctx, cancel] = withTimeout(this.#root, waitMs);
    let result: BuildResult | undefined;
    let settled = false;
    try {
      result = await Promise.race([entry.done.then((r) => ((settled = true), r)), ctx.done().then(() => undefined)]);
    } finally {
      cancel();
    }
    if (settled && result?.status !== 'canceled') return { build: { ...entry.build(), status: result?.status ?? entry.build().status ?? 'error' }, canceled: false };
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
      if (!this.#forced && reason !== 'shutdown requested') this.#force(reason);
      return this.#stopping ?? this.#done;
    }
    this.#draining = true;
    this.log.warn({ reason, running: this.slots.size, graceMs: this.#o.drainGraceMs ?? 600_000 }, 'draining: no new builds; waiting for running builds');
    this.#cancelClaims(new Error(`draining: ${reason}`));
    this.#stopping = this.#drain();
    return this.#stopping;
  }

  #force(reason: string): void {
    this.#forced = true;
    this.log.warn({ reason, running: this.slots.size }, 'forced shutdown: canceling running builds now');
    for (const s of this.slots.values()) s.executor?.cancelBuild(new Error(`the worker is shutting down (${reason})`));
  }

  async #drain(): Promise<void> {
    try {
      const grace = this.#o.drainGraceMs ?? 600_000;
      const all = Promise.all(this.#slotLoops);
      const [graceCtx, cancelGrace] = withTimeout(this.#root, grace);
      try {
        await Promise.race([all, graceCtx.done()]);
      } finally {
        cancelGrace();
      }
      if (this.slots.size > 0 && !this.#forced) this.#force(`the drain grace of ${Math.round(grace / 1000)} s is over`);
      await all;
      const [ctx, cancel] = withTimeout(this.#root, 20_000);
      await this.#registrar.putWorker(ctx)
        .catch((e: unknown) => this.log.warn({ err: e }, 'final worker update failed'))
        .finally(cancel);
    } catch (e) {
      this.log.error({ err: e }, 'error while draining');
    } finally {
      await this.#close();
    }
  }

  async #close(): Promise<void> {
    this.#cancelRoot(new Error('the worker stopped'));
    this.#registrar.queue?.close();
    try {
      await this.#runtime?.close();
    } catch (e) {
      this.log.warn({ err: e }, 'closing the runtime failed');
    }
    try {
      await this.#api?.close();
    } catch (e) {
      this.log.warn({ err: e }, 'closing the API failed');
    }
    this.log.info('the worker stopped');
    this.#resolveDone();
  }

  /** True once `start` finished (for tests). */
  get started(): boolean {
    return this.#started;
  }
}

/** Rule data for rulesets from the queue item's build (branch, event, repo, tag, target…). */
function ruleDataOf(b: VelaBuild): { branch?: string; event?: string; repo?: string; tag?: string; target?: string; comment?: string; sender?: string } {
  const event = b.event ? (b.event_action ? `${b.event}:${b.event_action}` : b.event) : undefined;
  const tag = b.event === 'tag' && typeof b.ref === 'string' ? b.ref.replace(/^refs\/tags\//, '') : undefined;
  const out: Record<string, string> = {};
  if (b.branch) out.branch = b.branch;
  if (event) out.event = event;
  if (b.repo?.full_name) out.repo = b.repo.full_name;
  if (tag) out.tag = tag;
  if (b.deploy) out.target = b.deploy;
  if (typeof b.sender === 'string' && b.sender) out.sender = b.sender;
  return out;
}

const CREDENTIAL_ENV = ['VELA_NETRC_PASSWORD', 'VELA_GIT_TOKEN', 'VELA_ID_TOKEN_REQUEST_TOKEN'];

/** The pipeline as the executors API shows it: no token, no secret values, no credentials in env. */
export function sanitizePipeline(build: Build): Record<string, unknown> {
  const json = marshalBuild(build);
  if (typeof json.token === 'string' && json.token !== '') json.token = '***';
  const scrubEnv = (env: unknown): void => {
    if (env && typeof env === 'object') for (const k of CREDENTIAL_ENV) if (k in env) (env as Record<string, unknown>)[k] = '***';
  };
  scrubEnv(json.environment);
  for (const s of (json.secrets as Array<Record<string, unknown>> | undefined) ?? []) if (typeof s.value === 'string' && s.value !== '') s.value = '***';
  for (const list of ['steps', 'services'] as const) for (const c of (json[list] as Array<Record<string, unknown>> | undefined) ?? []) scrubEnv(c.environment);
  for (const st of (json.stages as Array<Record<string, unknown>> | undefined) ?? []) for (const c of (st.steps as Array<Record<string, unknown>> | undefined) ?? []) scrubEnv(c.environment);
  return json;
}

