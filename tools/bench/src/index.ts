/**
 * Runs every benchmark, each in its own Node process (so one's memory does not show in another's
 * peak RSS), one after another, and prints their figures.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const benchmarks = ['docker-runs.ts', 'docker-logs.ts', 'step-overhead.ts', 'worker-memory.ts', 'build-overhead.ts'];
let failed = false;
for (const file of benchmarks) {
  // The per-step goal is judged on steps that outlast a held start (step-overhead.ts, GOAL_DOCKER_MS).
  const env = file === 'step-overhead.ts' ? { ...process.env, BENCH_STEP_SECONDS: process.env.BENCH_STEP_SECONDS ?? '1' } : process.env;
  const result = spawnSync(process.execPath, ['--conditions=@berth/source', path.join(import.meta.dirname, file)], { stdio: 'inherit', env });
  if (result.status !== 0) {
    failed = true;
    console.error(`benchmark ${file} failed (exit ${result.status ?? result.signal})`);
  }
}
process.exitCode = failed ? 1 : 0;
