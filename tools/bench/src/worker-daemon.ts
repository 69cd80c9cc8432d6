/**
 * A `berth start` worker for the benches, in one of the forms operators get: the `berth` command
 * of a checkout (compiled and bundled when `pnpm build` made it, as bin/berth.js chooses; or from
 * the TypeScript sources) or the worker image (`docker run`, host network, the engine's socket).
 * Registered with a vela-sim on a real Redis; builds of two quick steps enqueued one at a time.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { compilePipeline, marshalBuild } from '@berth/pipeline';
import type { VelaSim } from '@berth/vela-sim';
import { BUSYBOX } from './docker-common.ts';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const BERTH = path.join(ROOT, 'apps/worker/bin/berth.js');

/** How the worker runs: Berth's command or image, or an upstream go-vela/worker binary built elsewhere (`vela-worker`). */
export type WorkerForm =
  /** `judged: false`: a form operators do not get (from source, V8's settings changed), printed beside the others, not judged against the goals. */
  | { kind: 'command'; label: string; env: Record<string, string>; nodeArgs?: string[]; judged?: false }
  | { kind: 'image'; label: string; image: string }
  | { kind: 'vela-worker'; label: string; bin: string };

/** A running worker. */
export interface BenchWorker {
  /** The host pid of the worker's process (Node's, or vela-worker's). */
  pid: number;
  /** The hostname it registers as (the `:host` of its `/api/v1/workers/:host` calls). */
  hostname: string;
  /** The worker API's base URL. */
  url: string;
  /** The route its builds are queued on. */
  route: string;
  /** Its stderr so far (JSON log lines). */
  log(): string;
  stop(): Promise<void>;
}

/** The forms to measure: the command as it runs by default (and from source when that differs), and the image when it exists. */
export function workerForms(only = process.env.BENCH_FORMS): WorkerForm[] {
  const want = new Set((only ?? 'command,unit,source,image').split(',').map((s) => s.trim()));
  const forms: WorkerForm[] = [];
  const info = spawnSync(process.execPath, [BERTH, '--build-info'], { encoding: 'utf8' }).stdout.trim();
  if (want.has('command')) forms.push({ kind: 'command', label: `berth start (${info.split(':')[0]})`, env: {} });
  // The systemd unit (apps/worker/deploy/systemd) runs the command with the image's V8 setting.
  const unit = /^Environment=NODE_OPTIONS=(.*)$/m.exec(readFileSync(path.join(ROOT, 'apps/worker/deploy/systemd/berth-worker.service'), 'utf8'))?.[1];
  if (want.has('unit') && unit !== undefined)
    forms.push({ kind: 'command', label: `berth start (${info.split(':')[0]}, systemd unit)`, env: { NODE_OPTIONS: unit } });
  if (want.has('source') && !info.startsWith('source'))
    forms.push({ kind: 'command', label: 'berth start (source)', env: { BERTH_FROM_SOURCE: '1' }, judged: false });
  // On request only: the command with V8's settings that `berth start` changes: Maglev and
  // feedback after 8 calls (TurboFan still off, as session 10 left it), or V8's defaults.
  const v8Defaults = ['--maglev', '--invocation-count-for-feedback-allocation=8'];
  if (want.has('maglev'))
    forms.push({ kind: 'command', label: `berth start (${info.split(':')[0]}, Maglev on)`, env: {}, nodeArgs: v8Defaults, judged: false });
  if (want.has('turbofan'))
    forms.push({
      kind: 'command',
      label: `berth start (${info.split(':')[0]}, V8's compilers as by default)`,
      env: {},
      nodeArgs: ['--turbo-filter=*', ...v8Defaults],
      judged: false,
    });
  const image = process.env.BERTH_WORKER_IMAGE ?? 'berth/worker:dev';
  if (want.has('image') && spawnSync('docker', ['image', 'inspect', image], { stdio: 'ignore' }).status === 0)
    forms.push({ kind: 'image', label: `image ${image}`, image });
  // The reference: go-vela/worker's `cmd/vela-worker`, built by whoever runs the bench (the bench
  // never builds it; tools/bench/README.md says how it was built here).
  const vela = process.env.BENCH_VELA_WORKER_BIN;
  if (want.has('vela-worker') && vela !== undefined && vela !== '') {
    if (!existsSync(vela))
      throw new Error(`BENCH_VELA_WORKER_BIN=${vela}: no such file; build go-vela/worker's cmd/vela-worker and point the variable at the binary`);
    forms.push({ kind: 'vela-worker', label: `vela-worker (${path.basename(vela)})`, bin: vela });
  }
  return forms;
}

/**
 * The environment a go-vela/worker binary reads for what `berth start` gets from the bench: the
 * names are vela-worker's (cmd/vela-worker/flags.go, server/queue/flags.go, runtime/flags.go,
 * executor/flags.go). The queue's address and public key come from the server's
 * `/api/v1/queue/info` (cmd/vela-worker/operate.go), as for Berth; one build at a time.
 */
function velaWorkerEnv(o: { serverAddr: string; secret: string; workerAddr: string; route: string }): Record<string, string> {
  return {
    VELA_SERVER_ADDR: o.serverAddr,
    VELA_SERVER_SECRET: o.secret,
    VELA_WORKER_ADDR: o.workerAddr,
    VELA_QUEUE_DRIVER: 'redis',
    VELA_QUEUE_ROUTES: o.route,
    VELA_RUNTIME_DRIVER: 'docker',
    VELA_EXECUTOR_DRIVER: 'linux',
    VELA_BUILD_LIMIT: '1',
    VELA_LOG_FORMAT: 'json',
    VELA_LOG_LEVEL: 'info',
  };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  return typeof address === 'object' && address !== null ? address.port : 0;
}

/**
 * Ways to stop, at once, the workers still running should the bench be interrupted (Ctrl-C, a
 * kill): `finally` blocks do not run then, and an image's container (`docker run` left behind
 * by its CLI) would keep running after the bench.
 */
const stopOnInterrupt = new Set<() => void>();
let interruptHandled = false;

function registerForInterrupt(stopNow: () => void): () => void {
  if (!interruptHandled) {
    interruptHandled = true;
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const)
      process.once(signal, () => {
        for (const stop of stopOnInterrupt) stop();
        // The handler is gone: the signal now ends the process as it would have.
        process.kill(process.pid, signal);
      });
  }
  stopOnInterrupt.add(stopNow);
  return () => stopOnInterrupt.delete(stopNow);
}

/** Starts a worker of `form` against `sim` and waits until its /ready answers 200. */
export async function startWorker(sim: VelaSim, form: WorkerForm, extraEnv: Record<string, string> = {}): Promise<BenchWorker> {
  const hostname = `bench-${process.pid}-${Math.floor(Math.random() * 1e6)}`;
  const route = `bench-${hostname}`;
  const port = await freePort();
  const env: Record<string, string> = {
    VELA_SERVER_ADDR: sim.url,
    VELA_SERVER_SECRET: sim.secret,
    VELA_WORKER_ADDR: `http://${hostname}:8080`,
    VELA_QUEUE_ROUTES: route,
    VELA_LOG_FORMAT: 'json',
    BERTH_LISTEN: `127.0.0.1:${port}`,
    ...extraEnv,
  };
  let child: ChildProcess;
  let stateDir: string | undefined;
  let container: string | undefined;
  if (form.kind === 'command') {
    stateDir = mkdtempSync(path.join(os.tmpdir(), 'berth-bench-state-'));
    child = spawn(process.execPath, [...(form.nodeArgs ?? []), BERTH, 'start'], {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...form.env, ...env, BERTH_STATE_DIR: stateDir },
    });
  } else if (form.kind === 'vela-worker') {
    // vela-worker serves its API on the port of its address, on every interface (cmd/vela-worker/start.go).
    const velaEnv = velaWorkerEnv({ serverAddr: sim.url, secret: sim.secret, workerAddr: `http://${hostname}:${port}`, route });
    child = spawn(form.bin, [], {
      cwd: os.tmpdir(),
      stdio: ['ignore', 'ignore', 'pipe'],
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        ...(process.env.DOCKER_HOST ? { DOCKER_HOST: process.env.DOCKER_HOST } : {}),
        ...velaEnv,
      },
    });
  } else {
    container = `berth-bench-${hostname}`;
    const socket = '/var/run/docker.sock';
    const args = ['run', '--rm', '--name', container, '--network', 'host', '-v', `${socket}:${socket}`, '--group-add', String(statSync(socket).gid)];
    for (const [k, v] of Object.entries(env)) args.push('-e', `${k}=${v}`);
    child = spawn('docker', [...args, form.image, 'start'], { stdio: ['ignore', 'ignore', 'pipe'] });
  }
  const forget = registerForInterrupt(() => {
    if (container) spawnSync('docker', ['rm', '-f', container], { stdio: 'ignore' });
    else child.kill('SIGKILL');
    if (stateDir) rmSync(stateDir, { recursive: true, force: true });
  });
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`${form.label} exited ${code}: ${stderr.slice(-800)}`))));
  exited.catch(() => undefined);
  const url = `http://127.0.0.1:${port}`;
  const stop = async (): Promise<void> => {
    if (child.exitCode === null) {
      const gone = new Promise((resolve) => child.once('exit', resolve));
      if (container) spawnSync('docker', ['kill', '--signal', 'TERM', container], { stdio: 'ignore' });
      else child.kill('SIGTERM');
      await gone;
    }
    if (stateDir) rmSync(stateDir, { recursive: true, force: true });
    forget();
  };
  try {
    const until = performance.now() + 60_000;
    for (;;) {
      const ok = await fetch(`${url}/${form.kind === 'vela-worker' ? 'health' : 'ready'}`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) break;
      if (performance.now() > until) throw new Error(`${form.label}: its readiness route did not answer 200 within 60 s: ${stderr.slice(-800)}`);
      await Promise.race([new Promise((resolve) => setTimeout(resolve, 100)), exited]);
    }
    let pid = child.pid!;
    if (container) pid = Number(spawnSync('docker', ['inspect', '-f', '{{.State.Pid}}', container], { encoding: 'utf8' }).stdout.trim());
    return { pid, hostname, url, route, log: () => stderr, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** The CPU time (user and system) a process has used so far, in ms. */
export function cpuMsOf(pid: number): number {
  // /proc/PID/stat: the fields after the command's closing parenthesis; utime and stime are the
  // 12th and 13th of them, in clock ticks (USER_HZ, 100 on Linux).
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** VmRSS and VmHWM (the peak so far) of a process, in MB. */
export function memoryOf(pid: number): { rssMb: number; hwmMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rssMb: kb('VmRSS') / 1024, hwmMb: kb('VmHWM') / 1024 };
}

/** Vela's final build statuses (go-vela/server constants). */
const FINAL = new Set(['success', 'failure', 'error', 'canceled', 'killed']);

/** The benches' pipeline: two quick steps on the local busybox image. */
const PIPELINE = `version: "1"
steps:
  - name: first
    image: ${BUSYBOX}
    pull: never
    commands: ["echo one"]
  - name: second
    image: ${BUSYBOX}
    pull: never
    commands: ["echo two"]
`;

/** One finished build: its id, repo, final status, and when it was enqueued and finished (ms since the epoch). */
export interface BenchBuild {
  id: number;
  repo: string;
  status: string;
  enqueuedAt: number;
  /** The arrival at vela-sim of the build PUT that set the final status. */
  finalAt: number;
}

/**
 * Enqueues one build of {@link PIPELINE} on the worker's route (its own repo, so its container
 * names are its own) once the worker waits on the queue, and waits for its final status.
 */
export async function runOneBuild(sim: VelaSim, worker: BenchWorker, tag: string): Promise<BenchBuild> {
  const repo = `${tag}-${Math.floor(Math.random() * 1e9)}`;
  const r = compilePipeline(PIPELINE, { file: '.vela.yml', identity: { org: 'bench', repo, number: 1 } });
  if (!r.ok) throw new Error(`the bench pipeline does not compile: ${JSON.stringify(r.errors)}`);
  const { build } = await sim.enqueueBuild({ org: 'bench', repo, number: 1, pipeline: marshalBuild(r.build), route: worker.route });
  const enqueuedAt = performance.timeOrigin + performance.now();
  const id = build.id!;
  const until = Date.now() + 120_000;
  while (!FINAL.has(sim.builds.get(id)?.status ?? '')) {
    if (Date.now() > until) throw new Error(`build ${id} did not finish within 120 s: ${worker.log().slice(-800)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const status = sim.builds.get(id)!.status!;
  const puts = sim.callsTo('PUT', `/api/v1/repos/bench/${repo}/builds/1`).filter((c) => c.status === 200);
  const finalAt = puts.at(-1)?.at ?? NaN;
  // The worker may pop (and ask for the build token) before enqueueBuild has returned here.
  const token = sim.callsTo('GET', `/api/v1/repos/bench/${repo}/builds/1/token`)[0]?.at ?? Infinity;
  return { id, repo, status, enqueuedAt: Math.min(enqueuedAt, token), finalAt };
}

/**
 * Waits until a freshly started worker pops: for vela-worker, its first GET of itself after the
 * check-in's `PUT` of its status (cmd/vela-worker/register.go queueCheckIn): its executor loop
 * sleeps 5 s while the worker is not checked in (operate.go), and the GET of the check-in itself
 * (checkIn) comes before it. For Berth, its first GET of itself.
 */
export async function waitUntilFirstPop(sim: VelaSim, worker: BenchWorker, form: WorkerForm): Promise<void> {
  let since = 0;
  if (form.kind === 'vela-worker') {
    const until = Date.now() + 30_000;
    const self = `/api/v1/workers/${worker.hostname}`;
    for (;;) {
      const put = sim.calls.find((c) => c.method === 'PUT' && c.path === self && c.status === 200);
      if (put) {
        since = put.at;
        break;
      }
      if (Date.now() > until) throw new Error(`${form.label} did not check in (PUT ${self}) within 30 s: ${worker.log().slice(-800)}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
  await waitUntilPopping(sim, since);
}

/** Waits until the worker is back on the queue after a build (its next GET of itself, exec.go, then a moment for the pop). */
export async function waitUntilPopping(sim: VelaSim, since: number): Promise<void> {
  const until = Date.now() + 30_000;
  while (!sim.calls.some((c) => c.method === 'GET' && c.path.startsWith('/api/v1/workers/') && c.at > since)) {
    if (Date.now() > until) throw new Error('the worker did not return to the queue within 30 s');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await new Promise((resolve) => setTimeout(resolve, 200));
}
