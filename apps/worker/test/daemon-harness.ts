// Helpers of the daemon tests: an in-process `berth start` against vela-sim, real Redis and Docker.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { compilePipeline, marshalBuild } from '@berth/pipeline';
import { VelaSim } from '@berth/vela-sim';
import { daemonLogger, parseStartConfig } from '../src/commands/start.ts';
import { Daemon, type DaemonOptions } from '../src/daemon/daemon.ts';
import type { Io } from '../src/io.ts';
import { tempDir } from './temp-dir.ts';

export const IMAGE = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';

/** A unique queue route, so test files sharing one Redis never see each other's items. */
export function uniqueRoute(prefix = 'test'): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/** Compiles pipeline YAML into the executable JSON a Vela server hands a worker. */
export function executable(yaml: string, identity: { org: string; repo: string; number: number }): Record<string, unknown> {
  const r = compilePipeline(yaml, { file: '.vela.yml', identity });
  if (!r.ok) throw new Error(`bad test pipeline: ${JSON.stringify(r.errors)}`);
  return marshalBuild(r.build);
}

/** A running in-process worker and what it logged (pino JSON lines). */
export interface WorkerHandle {
  daemon: Daemon;
  hostname: string;
  logs: Array<Record<string, unknown> & { msg?: string; level?: number }>;
  /** Log lines whose `msg` matches. */
  logged(re: RegExp): Array<Record<string, unknown>>;
  stop(): Promise<void>;
}

/** Environment of a worker against `sim`: secret registration, 1 s pops, fast retries. */
export function workerEnv(sim: VelaSim, hostname: string, route: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    VELA_SERVER_ADDR: sim.url,
    VELA_SERVER_SECRET: sim.secret,
    VELA_WORKER_ADDR: `http://${hostname}:8080`,
    VELA_QUEUE_ROUTES: route,
    VELA_QUEUE_POP_TIMEOUT: '1s',
    VELA_CHECK_IN: '30s',
    VELA_LOG_LEVEL: 'debug',
    VELA_LOG_STREAMING_TIMEOUT: '10s',
    BERTH_LISTEN: '127.0.0.1:0',
    BERTH_STOP_GRACE: '2s',
    BERTH_SERVER_TIMEOUT: '5s',
    BERTH_STATE_DIR: tempDir('berth-state-'),
    ...extra,
  };
}

/** Starts a daemon in this process. */
export async function startWorker(
  sim: VelaSim,
  options: { hostname?: string; route: string; env?: Record<string, string>; daemon?: Partial<DaemonOptions> },
): Promise<WorkerHandle> {
  const hostname = options.hostname ?? `w-${randomUUID().slice(0, 8)}`;
  const env = workerEnv(sim, hostname, options.route, options.env);
  const { config, extras } = parseStartConfig({}, env);
  const stderr = new PassThrough();
  const logs: WorkerHandle['logs'] = [];
  let partial = '';
  stderr.on('data', (b: Buffer) => {
    partial += b.toString('utf8');
    let nl: number;
    while ((nl = partial.indexOf('\n')) >= 0) {
      const line = partial.slice(0, nl);
      partial = partial.slice(nl + 1);
      try {
        logs.push(JSON.parse(line) as WorkerHandle['logs'][number]);
      } catch {
        logs.push({ msg: line });
      }
      if (process.env.BERTH_TEST_VERBOSE) process.stderr.write(`[${hostname}] ${line}\n`);
    }
  });
  const io: Io = { stdout: new PassThrough(), stderr, env, cwd: process.cwd(), exitCode: 0 };
  const daemon = await Daemon.start({
    config,
    logger: await daemonLogger(io, config),
    version: '0.0.0-test',
    drainGraceMs: extras.drainGraceMs,
    stopGraceMs: extras.stopGraceMs,
    ...(extras.listen ? { listen: extras.listen } : {}),
    stateDir: extras.stateDir,
    serverTimeoutMs: extras.serverTimeoutMs,
    retry: { baseDelayMs: 100, maxDelayMs: 1_000 },
    errorBackoffMs: 300,
    ...options.daemon,
  });
  return {
    daemon,
    hostname,
    logs,
    logged: (re) => logs.filter((l) => typeof l.msg === 'string' && re.test(l.msg)),
    stop: async () => {
      await daemon.shutdown('test over');
    },
  };
}

/** Starts a vela-sim and a worker against it (`startWorker`), and waits until the worker registered. */
export async function startRegistered(options: Parameters<typeof startWorker>[1]): Promise<{ sim: VelaSim; worker: WorkerHandle }> {
  const sim = await VelaSim.start();
  const worker = await startWorker(sim, options);
  await waitFor('the worker to register', () => worker.daemon.registered);
  return { sim, worker };
}

/** Stops the worker (drains), then closes the sim; either may be missing when start-up failed. */
export async function stopRegistered(t: { sim?: VelaSim | undefined; worker?: WorkerHandle | undefined }): Promise<void> {
  await t.worker?.stop();
  await t.sim?.close();
}

/** Polls `check` until it returns a truthy value, or throws after `timeoutMs`. */
export async function waitFor<T>(what: string, check: () => T | Promise<T>, timeoutMs = 30_000, everyMs = 100): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Docker containers, networks and volumes labelled with worker id `workerId`. */
export function labelled(workerId: string): string[] {
  const label = `label=berth.dev/worker=${workerId}`;
  const run = (args: string[]): string[] => execFileSync('docker', args, { encoding: 'utf8' }).split('\n').filter(Boolean);
  return [...run(['ps', '-aq', '--filter', label]), ...run(['network', 'ls', '-q', '--filter', label]), ...run(['volume', 'ls', '-q', '--filter', label])];
}

const FINAL = ['success', 'failure', 'error', 'canceled', 'killed'];

/**
 * Waits until build `id` is over: its status at the server is final and no worker lists it as
 * running any more. The worker sends the final status when exec returns, as go-vela/worker does
 * (executor/linux/build.go ExecBuild defers build.Upload; cmd/vela-worker/exec.go destroys the
 * build afterwards), so the last log uploads, the services' final statuses and the removal of the
 * containers come after it; the worker takes the build off its record (PUT of the worker) last.
 */
export async function waitForBuildOver(sim: VelaSim, id: number, timeoutMs = 60_000, everyMs = 100): Promise<void> {
  await waitFor(`build ${id} to be over`, () => buildOver(sim, id), timeoutMs, everyMs);
}

/** Build `id` is over (see {@link waitForBuildOver}). */
export function buildOver(sim: VelaSim, id: number): boolean {
  return FINAL.includes(sim.builds.get(id)?.status ?? '') && [...sim.workers.values()].every((w) => !w.running_build_ids.includes(id));
}
