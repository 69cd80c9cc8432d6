// What one build leaves behind, checked with the context package's async-resource tracker. kube-sim
// runs in a child process here, so that its server-side sockets and Docker calls are not counted.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { background, withTimeout } from '@berth/context';
import { expectNoAsyncLeaks } from '@berth/context/testing';
import { runToCompletion, setupBuildResources, teardownBuild } from '@berth/runtime-conformance';
import { createKubernetesRuntime, type KubernetesRuntime } from '../src/index.ts';
import { buildOf, TEST_OPTIONS } from './helpers.ts';

const CLI = fileURLToPath(new URL('../../../tools/kube-sim/src/cli.ts', import.meta.url));
let child: ChildProcess | undefined;
let dir: string | undefined;
let runtime: KubernetesRuntime | undefined;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'berth-kube-sim-'));
  const sim = spawn(process.execPath, [CLI, '--dir', dir, '--pull-backoff-ms', '200'], { stdio: ['ignore', 'pipe', 'inherit'] });
  child = sim;
  const kubeconfig = await new Promise<string>((resolve, reject) => {
    let out = '';
    sim.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /^kubeconfig: (.+)$/m.exec(out);
      if (match?.[1]) resolve(match[1].trim());
    });
    sim.on('exit', (code) => reject(new Error(`kube-sim exited with ${code}: ${out}`)));
  });
  const [ctx, cancel] = withTimeout(background(), 30_000);
  try {
    runtime = await createKubernetesRuntime(ctx, { workerId: `leaks-${process.pid}` }, { kubeconfig, ...TEST_OPTIONS });
  } finally {
    cancel();
  }
}, 60_000);

afterAll(async () => {
  await runtime?.close();
  if (child && child.exitCode === null) {
    const exited = new Promise((resolve) => child?.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

it('a build leaves no timer, socket or stream of its own behind', async () => {
  const rt = runtime;
  if (!rt) throw new Error('no runtime');
  // Warm up: the worker's watches and the shared connection pool exist before the tracked build.
  const warm = buildOf(1, () => ['true']);
  await setupBuildResources(background(), rt, warm.build);
  await runToCompletion(rt, warm.build, warm.steps[0]!);
  await teardownBuild(background(), rt, warm.build);
  let logs: string[] = [];
  await expectNoAsyncLeaks(
    async () => {
      const { build, steps } = buildOf(2, (i) => [`echo ${i}`, 'sleep 0.3', `echo done ${i}`]);
      const ctx = background();
      await setupBuildResources(ctx, rt, build);
      logs = [];
      for (const step of steps) logs.push((await runToCompletion(rt, build, step)).logs);
      await teardownBuild(ctx, rt, build);
    },
    {
      settleMs: 1_000,
      // A TLS socket's TLSWRAP is reported destroyed only when garbage-collected; its TCPWRAP (checked) closes with it.
      ignore: ['TLSWRAP'],
      // Worker-scoped, not the build's: the worker's pod watch reconnects on their own
      // schedule, and API calls share one keep-alive pool (undici) that lives as long as the runtime.
      ignoreStacks: [/tracker[\\/]informer\.ts/, /client-node[\\/]dist[\\/](watch|cache)\.js/, /undici[\\/]lib/],
    },
  );
  expect(logs).toEqual(['0\ndone 0\n', '1\ndone 1\n']);
}, 120_000);
