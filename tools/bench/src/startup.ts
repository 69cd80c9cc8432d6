/**
 * How fast the `berth` command starts and how much memory it holds, next to `docker --version`
 * as the reference (issue 17):
 *
 * - `berth --version`, `--help`, `validate`: wall time (median of STARTUP_RUNS runs) and peak RSS
 *   of the whole process, measured with GNU time. Target for --version: ≤ 150 ms and ≤ 60 MB.
 * - `berth exec examples/hello.yml`: the time from spawning the process to the first container's
 *   `start` call reaching the engine, minus the time the engine spent answering the calls before
 *   it (network, volume, image inspect, container create): a recording proxy sits in front of the
 *   engine's socket (docker-proxy.ts). Target: ≤ 300 ms.
 * - `berth start`: the resident memory (VmRSS) of the daemon once it has registered with a Vela
 *   server (vela-sim, with a real Redis at REDIS_URL) and its /ready answers 200, sampled over
 *   STARTUP_IDLE_MS of idling (median of the samples; the peak VmHWM too). Target: ≤ 80 MB.
 *
 * Each berth row runs twice when the compiled build exists: as `berth` runs by default (compiled
 * JavaScript when it is fresh) and from source (`BERTH_FROM_SOURCE=1`), the fallback contributors
 * get without a build step.
 *
 *   pnpm --filter @berth/bench bench:startup        (STARTUP_RUNS=10, STARTUP_IDLE_MS=5000)
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { VelaSim } from '@berth/vela-sim';
import { median } from './docker-common.ts';
import { engineBusyBefore, startDockerProxy } from './docker-proxy.ts';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const BERTH = path.join(ROOT, 'apps/worker/bin/berth.js');
const RUNS = Number(process.env.STARTUP_RUNS ?? 10);
/** Which rows to run (comma-separated: version, help, validate, exec, start); all by default. */
const ONLY = new Set((process.env.STARTUP_ONLY ?? 'version,help,validate,exec,start').split(',').map((s) => s.trim()));
const IDLE_MS = Number(process.env.STARTUP_IDLE_MS ?? 5000);
const TIME = '/usr/bin/time';

interface Sample {
  ms: number;
  rssMb: number;
}

/** A way to run berth: the default, and forced from source. */
interface Mode {
  label: string;
  env: Record<string, string>;
}

/** Runs a command once under GNU time; returns its wall time and peak RSS. */
function once(command: string, args: readonly string[], env: Record<string, string> = {}): Sample {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-startup-'));
  const out = path.join(dir, 'time');
  try {
    const result = spawnSync(TIME, ['-f', '%e %M', '-o', out, command, ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, ...env },
    });
    if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${result.status}: ${result.stderr.toString().slice(-500)}`);
    const [seconds, kb] = readFileSync(out, 'utf8').trim().split(/\s+/).slice(-2).map(Number);
    return { ms: (seconds ?? 0) * 1000, rssMb: (kb ?? 0) / 1024 };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function print(label: string, ms: number | undefined, rssMb: number | undefined, note = ''): void {
  const time = ms === undefined ? '' : `${ms.toFixed(0)} ms`;
  const rss = rssMb === undefined ? '' : `${rssMb.toFixed(0)} MB`;
  console.log(`${label.padEnd(44)} ${time.padStart(9)} ${rss.padStart(8)}  ${note}`);
}

function row(label: string, command: string, args: readonly string[], env: Record<string, string> = {}): Sample {
  const samples = Array.from({ length: RUNS }, () => once(command, args, env));
  const result = { ms: median(samples.map((s) => s.ms)), rssMb: Math.max(...samples.map((s) => s.rssMb)) };
  print(label, result.ms, result.rssMb);
  return result;
}

/** One `berth exec`: ms from spawn to the first container start at the engine, and the engine's share of it. */
async function firstStart(proxy: Awaited<ReturnType<typeof startDockerProxy>>, env: Record<string, string>): Promise<{ raw: number; engine: number }> {
  proxy.reset();
  const spawned = performance.now();
  const child = spawn(process.execPath, [BERTH, 'exec', 'examples/hello.yml'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env, DOCKER_HOST: proxy.dockerHost, BERTH_BUILD_NUMBER: `${process.pid}${Math.floor(Math.random() * 1e6)}` },
  });
  let stderr = '';
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  child.stdout.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const start = await Promise.race([
    proxy.firstStart(),
    exited.then((code) => Promise.reject(new Error(`berth exec exited ${code} before starting a container: ${stderr.slice(-500)}`))),
  ]);
  const engine = engineBusyBefore(proxy.calls, start.arrived);
  const code = await exited;
  if (code !== 0) throw new Error(`berth exec exited ${code}: ${stderr.slice(-500)}`);
  return { raw: start.arrived - spawned, engine };
}

/** VmRSS and VmHWM of a process, in MB. */
function memoryOf(pid: number): { rssMb: number; hwmMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rssMb: kb('VmRSS') / 1024, hwmMb: kb('VmHWM') / 1024 };
}

/** `berth start` against vela-sim: RSS once registered and ready, idling. */
async function idleDaemon(sim: VelaSim, env: Record<string, string>): Promise<{ rssMb: number; hwmMb: number; readyMs: number }> {
  const hostname = `bench-${process.pid}-${Math.floor(Math.random() * 1e6)}`;
  const stateDir = mkdtempSync(path.join(os.tmpdir(), 'berth-bench-state-'));
  const spawned = performance.now();
  const child = spawn(process.execPath, [BERTH, 'start'], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      ...env,
      VELA_SERVER_ADDR: sim.url,
      VELA_SERVER_SECRET: sim.secret,
      VELA_WORKER_ADDR: `http://${hostname}:8080`,
      VELA_QUEUE_ROUTES: `bench-${hostname}`,
      VELA_LOG_FORMAT: 'json',
      BERTH_LISTEN: '127.0.0.1:0',
      BERTH_STATE_DIR: stateDir,
    },
  });
  let stderr = '';
  let resolveUrl!: (url: string) => void;
  const url = new Promise<string>((resolve) => (resolveUrl = resolve));
  child.stderr.on('data', (b: Buffer) => {
    stderr += b.toString();
    const match = /"url":"(http:[^"]+)"/.exec(stderr);
    if (match?.[1]) resolveUrl(match[1]);
  });
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`berth start exited ${code}: ${stderr.slice(-800)}`))));
  try {
    const base = await Promise.race([url, exited]);
    let readyMs = 0;
    for (;;) {
      const ok = await fetch(`${base}/ready`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) {
        readyMs = performance.now() - spawned;
        break;
      }
      await Promise.race([new Promise((resolve) => setTimeout(resolve, 100)), exited]);
    }
    const samples: number[] = [];
    const until = performance.now() + IDLE_MS;
    while (performance.now() < until) {
      samples.push(memoryOf(child.pid!).rssMb);
      await Promise.race([new Promise((resolve) => setTimeout(resolve, 250)), exited]);
    }
    return { rssMb: median(samples), hwmMb: memoryOf(child.pid!).hwmMb, readyMs };
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve)).catch(() => undefined);
    rmSync(stateDir, { recursive: true, force: true });
  }
}

if (spawnSync(TIME, ['--version']).status !== 0) {
  console.error(`bench:startup needs GNU time at ${TIME} (Debian package "time")`);
  process.exit(1);
}
const compiled = spawnSync(process.execPath, [BERTH, '--build-info'], { encoding: 'utf8' });
const modes: Mode[] = [{ label: '', env: {} }];
if (compiled.status === 0 && !compiled.stdout.includes('source')) modes.push({ label: ' [source]', env: { BERTH_FROM_SOURCE: '1' } });
console.log(
  `startup, median of ${RUNS} runs (peak RSS is the largest run); load: ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')} on ${os.cpus().length} CPUs`,
);
console.log(`berth runs: ${compiled.status === 0 ? compiled.stdout.trim() : 'from source (no --build-info: an older bin)'}`);
const docker = row('docker --version (reference)', 'docker', ['--version']);
const results: Record<string, { version: Sample; exec: number; idle: number }> = {};
const proxy = await startDockerProxy();
const sim = await VelaSim.start();
try {
  for (const mode of modes) {
    const version = ONLY.has('version') ? row(`berth --version${mode.label}`, process.execPath, [BERTH, '--version'], mode.env) : { ms: NaN, rssMb: NaN };
    if (ONLY.has('help')) row(`berth --help${mode.label}`, process.execPath, [BERTH, '--help'], mode.env);
    if (ONLY.has('validate')) row(`berth validate examples/hello.yml${mode.label}`, process.execPath, [BERTH, 'validate', 'examples/hello.yml'], mode.env);
    const starts: Array<{ raw: number; engine: number }> = [];
    for (let i = 0; ONLY.has('exec') && i < Math.min(RUNS, 5); i++) starts.push(await firstStart(proxy, mode.env));
    const own = median(starts.map((s) => s.raw - s.engine));
    print(
      `berth exec: first container start${mode.label}`,
      own,
      undefined,
      `(engine time excluded: ${median(starts.map((s) => s.raw)).toFixed(0)} ms in all, engine ${median(starts.map((s) => s.engine)).toFixed(0)} ms)`,
    );
    const idles = [];
    for (let i = 0; ONLY.has('start') && i < 3; i++) idles.push(await idleDaemon(sim, mode.env));
    const idle = median(idles.map((s) => s.rssMb));
    print(
      `berth start: idle RSS, registered${mode.label}`,
      undefined,
      idle,
      `(peak ${Math.max(...idles.map((s) => s.hwmMb)).toFixed(0)} MB; ready after ${median(idles.map((s) => s.readyMs)).toFixed(0)} ms)`,
    );
    results[mode.label || 'default'] = { version, exec: own, idle };
  }
} finally {
  await sim.close();
  await proxy.close();
}
for (const [mode, r] of Object.entries(results)) {
  const met = (ok: boolean) => (ok ? 'met' : 'NOT met');
  console.log(
    `${mode}: --version ${(r.version.ms / docker.ms).toFixed(1)}× docker's time, ${(r.version.rssMb / docker.rssMb).toFixed(1)}× its RSS (≤ 150 ms, ≤ 60 MB: ${met(r.version.ms <= 150 && r.version.rssMb <= 60)}); ` +
      `exec first start ${r.exec.toFixed(0)} ms (≤ 300 ms: ${met(r.exec <= 300)}); start idle ${r.idle.toFixed(0)} MB, ${(r.idle / docker.rssMb).toFixed(1)}× docker's RSS (≤ 80 MB: ${met(r.idle <= 80)})`,
  );
}
