/**
 * How fast the `berth` command starts, next to `docker --version` as the reference: wall time
 * (median of N runs) and peak RSS of whole processes, measured with GNU time.
 *
 *   pnpm --filter @berth/bench bench:startup        (STARTUP_RUNS=10 by default)
 *
 * Targets (issue 17): `berth --version` ≤ 150 ms median and ≤ 60 MB RSS. The `exec` row is the
 * time from process start to the build's first line of output on the local Docker engine.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { median } from './docker-common.ts';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const BERTH = path.join(ROOT, 'apps/worker/bin/berth.js');
const RUNS = Number(process.env.STARTUP_RUNS ?? 10);
const TIME = '/usr/bin/time';

interface Sample {
  ms: number;
  rssMb: number;
}

/** Runs a command once under GNU time; returns its wall time and peak RSS. */
function once(command: string, args: readonly string[]): Sample {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-startup-'));
  const out = path.join(dir, 'time');
  try {
    const result = spawnSync(TIME, ['-f', '%e %M', '-o', out, command, ...args], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
    if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${result.status}: ${result.stderr.toString().slice(-500)}`);
    const [seconds, kb] = readFileSync(out, 'utf8').trim().split(/\s+/).slice(-2).map(Number);
    return { ms: (seconds ?? 0) * 1000, rssMb: (kb ?? 0) / 1024 };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function row(label: string, command: string, args: readonly string[]): Sample {
  const samples = Array.from({ length: RUNS }, () => once(command, args));
  const result = { ms: median(samples.map((s) => s.ms)), rssMb: Math.max(...samples.map((s) => s.rssMb)) };
  console.log(`${label.padEnd(34)} ${`${result.ms.toFixed(0)} ms`.padStart(9)} ${`${result.rssMb.toFixed(0)} MB`.padStart(8)}`);
  return result;
}

/** Milliseconds from spawning `berth exec` to its first line of output. */
async function firstLine(file: string): Promise<number> {
  const started = performance.now();
  const child = spawn(process.execPath, [BERTH, 'exec', file], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, BERTH_BUILD_NUMBER: `${process.pid}${Date.now() % 100000}` },
  });
  const ms = await new Promise<number>((resolve, reject) => {
    child.stdout.once('data', () => resolve(performance.now() - started));
    child.once('exit', (code) => reject(new Error(`berth exec exited ${code} before printing`)));
  });
  await new Promise((resolve) => child.once('exit', resolve));
  return ms;
}

if (spawnSync(TIME, ['--version']).status !== 0) {
  console.error(`bench:startup needs GNU time at ${TIME} (Debian package "time")`);
  process.exit(1);
}
console.log(`startup, median of ${RUNS} runs (peak RSS is the largest run)`);
const docker = row('docker --version (reference)', 'docker', ['--version']);
const version = row('berth --version', process.execPath, [BERTH, '--version']);
row('berth --help', process.execPath, [BERTH, '--help']);
row('berth validate examples/hello.yml', process.execPath, [BERTH, 'validate', 'examples/hello.yml']);
const firsts: number[] = [];
for (let i = 0; i < Math.min(RUNS, 5); i++) firsts.push(await firstLine('examples/hello.yml'));
console.log(`${'berth exec: first line of output'.padEnd(34)} ${`${median(firsts).toFixed(0)} ms`.padStart(9)}`);
console.log(
  `berth --version: ${(version.ms / docker.ms).toFixed(1)}× docker's time, ${(version.rssMb / docker.rssMb).toFixed(1)}× its RSS; ` +
    `target ≤ 150 ms and ≤ 60 MB: ${version.ms <= 150 && version.rssMb <= 60 ? 'met' : 'NOT met'}`,
);
