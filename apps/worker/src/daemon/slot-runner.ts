/**
 * The slot runner: one loop per build slot popping the Redis queue (gated on check-in and queue
 * PING, go-vela/worker operate.go / exec.go), claiming each item and running its build.
 */
import { sleep } from '@berth/context';
import { type BuildResult, type Reporter, type RuntimeEventRouter, combineReporters, runBuild } from '@berth/executor';
import { type Build, marshalBuild, parseBuild, prepareBuild, validateBuild } from '@berth/pipeline';
import { isPrivilegedImage } from '@berth/runtime';
import { claimBuild, type ClaimResult } from '../vela/claim.ts';
import type { VelaBuild } from '../vela/models.ts';
import type { PopResult, QueueItem, RawEntry, UnverifiedBuild } from '../vela/queue.ts';
import { type ReportedBuild, VelaReporter } from '../vela/reporter.ts';
import { runEnvironment } from './environment.ts';
import type { Reaper } from './reaper.ts';
import type { Registrar } from './registrar.ts';
import { ScmAuth } from './scm-auth.ts';
import { velaSecretLoader } from './secrets.ts';
import type { DaemonCore, SlotEntry } from './types.ts';
import { errText } from './util.ts';

/** The message Vela stores on a build queued by a server with another item version. */
export const STALE_BUILD_MESSAGE = 'Unable to process stale build (queued before Vela upgrade/downgrade).';

/** The build slots: each pops, claims and runs one build at a time. */
export class SlotRunner {
  readonly #core: DaemonCore;
  readonly #registrar: Registrar;
  readonly #reaper: Reaper;
  readonly #events: RuntimeEventRouter;
  readonly #cleanupTimeoutMs: number | undefined;
  /** Called when the last running build ended. */
  readonly #onIdle: (() => void) | undefined;
  readonly #loops: Promise<void>[] = [];

  constructor(
    core: DaemonCore,
    parts: { registrar: Registrar; reaper: Reaper; events: RuntimeEventRouter; cleanupTimeoutMs: number | undefined; onIdle?: () => void },
  ) {
    this.#core = core;
    this.#registrar = parts.registrar;
    this.#reaper = parts.reaper;
    this.#events = parts.events;
    this.#cleanupTimeoutMs = parts.cleanupTimeoutMs;
    this.#onIdle = parts.onIdle;
  }

  /** Starts one loop per slot (`build.limit`); each ends when claims stop (drain). */
  start(): void {
    for (let slot = 0; slot < this.#core.config.build.limit; slot++) this.#loops.push(this.#loop(slot));
  }

  /** Settles when every slot loop has ended. */
  all(): Promise<void> {
    return Promise.all(this.#loops).then(() => undefined);
  }

  async #loop(slot: number): Promise<void> {
    const backoff = this.#core.errorBackoffMs;
    let skipping: string | undefined;
    while (!this.#core.claimCtx.signal.aborted) {
      // The token expired without a secret to fall back on: claim nothing until a /register.
      if (this.#core.credentials.needsRegistration()) {
        await sleep(this.#core.claimCtx, 1_000).catch(() => undefined);
        continue;
      }
      // go-vela/worker operate.go: a build thread skips the queue while the last check-in or its
      // queue PING failed.
      const why = !this.#registrar.registered
        ? 'worker not checked in: skipping the queue until a check-in works'
        : !this.#registrar.queueOk
          ? 'queue PING failed: skipping the queue until a check-in pings it'
          : undefined;
      if (why !== undefined) {
        if (skipping !== why) this.#core.log.warn({ slot }, why);
        skipping = why;
        await sleep(this.#core.claimCtx, backoff).catch(() => undefined);
        continue;
      }
      if (skipping !== undefined) this.#core.log.info({ slot }, 'checked in again: reading the queue');
      skipping = undefined;
      // go-vela/worker exec.go: GET the worker before each pop; its routes are what to pop.
      let routes: string[];
      try {
        const me = await this.#registrar.authClient().getWorker(this.#core.claimCtx, this.#core.workerId, { retry: { attempts: 3 } });
        this.#registrar.updateRoutes(me?.routes);
        routes = this.#registrar.routes;
      } catch (e) {
        if (this.#core.claimCtx.signal.aborted) break;
        this.#core.log.error({ slot, err: e }, 'unable to retrieve the worker from the server: not reading the queue; retrying');
        await sleep(this.#core.claimCtx, backoff).catch(() => undefined);
        continue;
      }
      const queue = this.#registrar.queue!;
      const res: PopResult = await queue.pop(this.#core.claimCtx, routes.length > 0 ? routes : queue.routes);
      this.#core.metrics.queueItems.inc({ result: res.kind });
      try {
        switch (res.kind) {
          case 'canceled':
          case 'empty':
            break;
          case 'error':
            if (this.#core.claimCtx.signal.aborted) break;
            this.#core.log.error({ slot, err: res.error }, 'queue pop failed; retrying');
            await sleep(this.#core.claimCtx, backoff).catch(() => undefined);
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
        this.#core.log.error({ slot, err: e }, 'unexpected error handling a queue item');
        await sleep(this.#core.claimCtx, backoff).catch(() => undefined);
      }
    }
  }

  async #badItem(slot: number, entry: RawEntry, reason: string, unverified: UnverifiedBuild | undefined): Promise<void> {
    const what = unverified
      ? { build: unverified.id, repo: unverified.org && unverified.repo ? `${unverified.org}/${unverified.repo}` : undefined, number: unverified.number }
      : {};
    this.#core.log.error({ slot, route: entry.route, bytes: entry.bytes.length, ...what }, `dropped a queue item: ${reason}`);
    if (unverified?.org && unverified.repo && typeof unverified.number === 'number') {
      await this.#reaper.failBuild(
        this.#core.root,
        { ...(unverified.id === undefined ? {} : { id: unverified.id }), org: unverified.org, repo: unverified.repo, number: unverified.number },
        `The worker could not use this build's queue item: ${reason}.`,
        {},
      );
    }
  }

  async #stale(slot: number, item: QueueItem, version: number): Promise<void> {
    const b = item.build;
    this.#core.log.warn(
      { slot, build: b.id, repo: `${b.repo.org}/${b.repo.name}`, number: b.number, itemVersion: version },
      'stale queue item (another item version): failing the build',
    );
    await this.#reaper.failBuild(this.#core.root, { id: b.id, org: b.repo.org, repo: b.repo.name, number: b.number }, STALE_BUILD_MESSAGE);
    // It was never added to running_builds; make sure the server agrees.
    await this.#registrar.putWorker(this.#core.root).catch((e: unknown) => this.#core.log.warn({ err: e }, 'worker update failed'));
  }

  async #item(slot: number, item: QueueItem, entry: RawEntry): Promise<void> {
    const b = item.build;
    const where = { slot, build: b.id, repo: `${b.repo.org}/${b.repo.name}`, number: b.number };
    if (this.#core.draining) {
      await this.#pushBack(entry, where);
      return;
    }
    const claim: ClaimResult = await claimBuild(this.#core.root, this.#registrar.authClient(), item);
    switch (claim.kind) {
      case 'not-pending':
        this.#core.log.info({ ...where }, 'the build is no longer pending (canceled or taken): skipped');
        return;
      case 'unknown-build':
        this.#core.log.warn({ ...where, err: claim.error }, 'the server has no such build: skipped');
        return;
      case 'failed':
        if (claim.stage === 'token') {
          this.#core.log.error({ ...where, err: claim.error }, 'could not get the build token: the item goes back to the queue');
          await this.#pushBack(entry, where);
          await sleep(this.#core.claimCtx, this.#core.errorBackoffMs).catch(() => undefined);
        } else {
          this.#core.log.error({ ...where, err: claim.error }, 'could not get the executable');
          await this.#reaper.failBuild(
            this.#core.root,
            { id: b.id, org: b.repo.org, repo: b.repo.name, number: b.number },
            `The worker could not get the build's executable: ${claim.error.message}`,
            {
              token: claim.buildToken,
            },
          );
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
      this.#core.log.info({ ...where }, 'queue item pushed back');
    } catch (e) {
      this.#core.log.error({ ...where, err: e }, 'could not push the item back to the queue: the build stays pending on the server');
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
    const queuedAt =
      typeof vb.enqueued === 'number' && vb.enqueued > 0 ? vb.enqueued : typeof vb.created === 'number' && vb.created > 0 ? vb.created : undefined;
    if (queuedAt !== undefined) this.#core.metrics.queueWait.observe(Math.max(0, started / 1000 - queuedAt));
    const client = claim.client;
    const reporter = new VelaReporter({ client, build: vb, logger: { warn: (o, m) => this.#core.log.warn({ ...where, ...o }, m) } });

    // The compiled pipeline, checked.
    let build: Build | undefined;
    let problem: string | undefined;
    const parsed = parseBuild(claim.pipeline);
    if (!parsed.ok)
      problem = parsed.issues
        .slice(0, 5)
        .map((i) => `${i.path}: ${i.message}`)
        .join('; ');
    else {
      const issues = validateBuild(parsed.value);
      if (issues.length > 0)
        problem = issues
          .slice(0, 5)
          .map((i) => `${i.path}: ${i.message}`)
          .join('; ');
      else build = prepareBuild(parsed.value, { org, repo: name, number: vb.number });
    }
    if (!build) {
      this.#core.log.error({ ...where, problem }, 'the executable is not a pipeline Berth can run');
      await this.#reaper.failBuild(
        this.#core.root,
        { id: vb.id, org, repo: name, number: vb.number },
        `The build's executable is not a valid pipeline: ${problem}`,
        { token: claim.buildToken },
      );
      this.#core.metrics.buildsTotal.inc({ status: 'error' });
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
    this.#core.slots.set(slot, entry);
    this.#core.state.add({ id, org, repo: name, number: vb.number, token: claim.buildToken, claimedAt: started });
    this.#core.metrics.buildsRunning.inc();
    this.#registrar.buildStarted();
    this.#core.log.info({ ...where }, 'build claimed');
    await this.#registrar.putWorker(this.#core.root).catch((e: unknown) => this.#core.log.warn({ ...where, err: e }, 'worker update failed'));

    const scm = new ScmAuth({
      client,
      org,
      repo: name,
      number: vb.number,
      build,
      serverAddr: this.#core.config.server.addr,
      logger: { info: (o, m) => this.#core.log.info({ ...where, ...o }, m) },
    });
    // executor.enforce-trusted-repos (go-vela/worker executor/linux/step.go ExecStep ~197–205,
    // service.go ExecService, build.go for secret origins): an untrusted repo may not run an image
    // the privileged allowlist names. Go errors the step when it is about to run; Berth errors the
    // build while assembling it (each container's environment is laid then), before anything runs.
    const guarded = this.#core.config.executor.enforceTrustedRepos && vb.repo.trusted !== true ? this.#core.config.runtime.privilegedImages : [];
    const untrustedPrivileged = (image: string): void => {
      if (guarded.length > 0 && isPrivilegedImage(image, guarded)) {
        throw new Error(
          `attempting to use privileged image (${image}) as untrusted repo (mark the repo trusted on the server, or remove the image from VELA_RUNTIME_PRIVILEGED_IMAGES)`,
        );
      }
    };
    const environment = runEnvironment(() => reporter.build, {
      host: this.#core.workerId,
      runtime: this.#core.runtime!.name,
      started: Math.floor(started / 1000),
    });
    const timeoutMs = typeof vb.repo.timeout === 'number' && vb.repo.timeout > 0 ? vb.repo.timeout * 60_000 : this.#core.config.build.timeoutMs;
    let result: BuildResult | undefined;
    try {
      result = await runBuild(this.#core.root, {
        build,
        runtime: this.#core.runtime!,
        // The SCM reporter after the Vela one: the build is running on the server when it asks for tokens.
        reporter: combineReporters(reporter, scm.reporter(), this.#metricsReporter(where)),
        timeoutMs,
        logStreamingGraceMs: this.#core.config.executor.logStreamingTimeoutMs,
        ...(this.#cleanupTimeoutMs === undefined ? {} : { cleanupTimeoutMs: this.#cleanupTimeoutMs }),
        ...(this.#core.config.executor.maxLogSize > 0 ? { logs: { limits: { maxBytes: this.#core.config.executor.maxLogSize } } } : {}),
        ruleData: ruleDataOf(vb),
        loadSecret: velaSecretLoader(client, { org, name }),
        environment: (container) => {
          untrustedPrivileged(container.image);
          return { ...environment(container), ...scm.environment(container) };
        },
        events: this.#events,
        // Vela turns outputs on with an outputs image (go-vela/worker cmd/vela-worker/run.go).
        outputs: this.#core.config.executor.outputsImage !== undefined,
        // The build's final status goes to the server when exec returns, before the containers are
        // removed, as go-vela/worker sends it (executor/linux/build.go ExecBuild defers
        // build.Upload; cmd/vela-worker/exec.go destroys the build afterwards).
        finalBuildStatusAt: 'exec-end',
        host: this.#core.workerId,
        version: this.#core.version,
        logger: {
          debug: (m) => this.#core.log.debug({ ...where }, m),
          info: (m) => this.#core.log.info({ ...where }, m),
          warn: (m) => this.#core.log.warn({ ...where }, m),
        },
        onStart: (executor) => {
          entry.executor = executor;
          // A cancel recorded while the slot was starting, or a drain forced meanwhile: cancel at once.
          if (entry.pendingCancel) executor.cancelBuild(entry.pendingCancel);
          else if (this.#core.forced) executor.cancelBuild(new Error('the worker is shutting down'));
        },
      });
      const status = result.status;
      this.#core.metrics.buildsTotal.inc({ status });
      this.#core.metrics.buildDuration.observe({ status }, (Date.now() - started) / 1000);
      this.#core.log.info({ ...where, status, error: result.build.error, seconds: Math.round((Date.now() - started) / 1000) }, 'build finished');
    } catch (e) {
      this.#core.log.error({ ...where, err: e }, 'the build failed unexpectedly');
      this.#core.metrics.buildsTotal.inc({ status: 'error' });
      await this.#reaper.failBuild(this.#core.root, { id: vb.id, org, repo: name, number: vb.number }, `The worker failed running the build: ${errText(e)}`, {
        token: claim.buildToken,
      });
    } finally {
      reporter.abandon();
      this.#core.slots.delete(slot);
      if (this.#core.slots.size === 0) this.#onIdle?.();
      this.#core.state.remove(id);
      this.#core.metrics.buildsRunning.dec();
      this.#registrar.buildFinished();
      resolveDone(result);
      await this.#registrar.putWorker(this.#core.root).catch((e: unknown) => this.#core.log.warn({ ...where, err: e }, 'worker update failed'));
    }
  }

  /** Step durations and log bytes into the metrics. */
  #metricsReporter(where: object): Reporter {
    return {
      buildStatus: () => Promise.resolve(),
      stepStatus: (_ctx, step) => {
        if (
          step.finished !== undefined &&
          step.started !== undefined &&
          step.kind !== 'init' &&
          ['success', 'failure', 'error', 'canceled', 'killed'].includes(step.status)
        ) {
          this.#core.metrics.stepDuration.observe({ kind: step.kind, status: step.status }, Math.max(0, (step.finished - step.started) / 1000));
        }
        if (step.kind !== 'init' && step.status !== 'running' && step.status !== 'pending')
          this.#core.log.debug({ ...where, step: step.name, status: step.status, exitCode: step.exitCode }, 'step finished');
        return Promise.resolve();
      },
      appendLog: (_ctx, target, chunk) => {
        this.#core.metrics.logBytes.inc({ kind: target.kind }, chunk.byteLength);
        return Promise.resolve();
      },
      closeLog: () => Promise.resolve(),
    };
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
function sanitizePipeline(build: Build): Record<string, unknown> {
  const json = marshalBuild(build);
  if (typeof json.token === 'string' && json.token !== '') json.token = '***';
  const scrubEnv = (env: unknown): void => {
    if (env && typeof env === 'object') for (const k of CREDENTIAL_ENV) if (k in env) (env as Record<string, unknown>)[k] = '***';
  };
  scrubEnv(json.environment);
  for (const s of (json.secrets as Array<Record<string, unknown>> | undefined) ?? []) if (typeof s.value === 'string' && s.value !== '') s.value = '***';
  for (const list of ['steps', 'services'] as const) for (const c of (json[list] as Array<Record<string, unknown>> | undefined) ?? []) scrubEnv(c.environment);
  for (const st of (json.stages as Array<Record<string, unknown>> | undefined) ?? [])
    for (const c of (st.steps as Array<Record<string, unknown>> | undefined) ?? []) scrubEnv(c.environment);
  return json;
}
