import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { startKubeSim, type KubeSim, type KubeSimOptions } from '@berth/kube-sim';
import { background, withTimeout } from '@berth/context';
import { type Build, type Container } from '@berth/pipeline';
import type { RuntimeConfig } from '@berth/runtime';
import { conformanceBuild, conformanceStep } from '@berth/runtime-conformance';
import { createKubernetesRuntime, type KubernetesRuntime, type KubernetesRuntimeOptions } from '../src/index.ts';

/** The images the tests run (present in the local Docker engine; nothing is pulled). */
export const BUSYBOX = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';
export const PAUSE = process.env.BERTH_PAUSE_IMAGE ?? 'berth/pause:1';

/** Short timings for tests: the defaults (30 s grace, 5 min pending) are for production. */
export const TEST_OPTIONS: KubernetesRuntimeOptions = {
  pauseImage: PAUSE,
  pullGraceMs: 1_500,
  pendingTimeoutMs: 60_000,
  watchSilenceMs: 30_000,
  watchBackoffMaxMs: 1_000,
};

/** The kube-sim settings of the tests: fast image-pull back-off and bookmarks. */
const SIM_SETTINGS = { imagePullBackoff: { initialMs: 200, maxMs: 1_000 }, bookmarkIntervalMs: 2_000 };

/** Starts a kube-sim with {@link SIM_SETTINGS}. */
export function startSim(options: KubeSimOptions = {}): Promise<KubeSim> {
  return startKubeSim({ ...SIM_SETTINGS, ...options });
}

/** A kube-sim in a child process (its CLI): what it holds is not counted in this process's memory. */
export interface SimProcess {
  /** The kubeconfig YAML. */
  kubeconfig: string;
  /** Stops it (SIGTERM: it removes its containers) and waits for its exit. */
  close(): Promise<void>;
}

/**
 * Starts kube-sim's CLI with {@link SIM_SETTINGS}, in a child process: for the cases that bound
 * this process's memory. In the test's own process, kube-sim's socket reads of a 50 MiB log
 * (about a million records of 100 bytes, Docker sending each alone) grew its RSS by 380–530 MB on
 * a loaded machine, against a JavaScript heap of 60–110 MB and no backlog.
 */
export async function startSimProcess(): Promise<SimProcess> {
  const cli = path.join(path.dirname(createRequire(import.meta.url).resolve('@berth/kube-sim/package.json')), 'src/cli.ts');
  const { imagePullBackoff: backoff, bookmarkIntervalMs } = SIM_SETTINGS;
  const args = ['--pull-backoff-ms', backoff.initialMs, '--pull-backoff-max-ms', backoff.maxMs, '--bookmark-ms', bookmarkIntervalMs].map(String);
  const child = spawn(process.execPath, [cli, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let out = '';
  const kubeconfigPath = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const m = /^kubeconfig: (.+)$/m.exec(out);
      if (m?.[1]) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`kube-sim (${cli}) exited with ${code} before it printed its kubeconfig; it printed: ${out}`)));
  });
  child.stdout.resume();
  return {
    kubeconfig: await readFile(kubeconfigPath, 'utf8'),
    close: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** A runtime against `sim`. */
export async function simRuntime(sim: KubeSim, config: Partial<RuntimeConfig> = {}, options: KubernetesRuntimeOptions = {}): Promise<KubernetesRuntime> {
  const [ctx, cancel] = withTimeout(background(), 30_000);
  try {
    return await createKubernetesRuntime(
      ctx,
      { workerId: `test-${Math.random().toString(16).slice(2, 10)}`, ...config },
      { kubeconfig: sim.kubeconfig, ...TEST_OPTIONS, ...options },
    );
  } finally {
    cancel();
  }
}

/** What {@link useSim} gives a test file. */
export interface SimFixture {
  /** The file's kube-sim (started in beforeAll). */
  readonly sim: () => KubeSim;
  /** A runtime against the sim; reaped and closed after each test. */
  readonly runtimeFor: (config?: Partial<RuntimeConfig>, options?: KubernetesRuntimeOptions) => Promise<KubernetesRuntime>;
  /** A CoreV1Api client of the sim, as an outside observer (not the runtime's own client). */
  readonly core: () => CoreV1Api;
}

/**
 * One kube-sim for the test file: started before all tests; after each test its faults are cleared
 * and the runtimes made with `runtimeFor` are reaped and closed; closed after all tests.
 */
export function useSim(options: KubeSimOptions = {}): SimFixture {
  let sim: KubeSim | undefined;
  let core: CoreV1Api | undefined;
  const runtimes: KubernetesRuntime[] = [];
  beforeAll(async () => {
    sim = await startSim(options);
  });
  afterEach(async () => {
    sim?.faults.clear();
    for (const runtime of runtimes.splice(0)) {
      await runtime.reap(background(), runtime.config.workerId).catch(() => undefined);
      await runtime.close();
    }
  });
  afterAll(async () => {
    await sim?.close();
  });
  const current = (): KubeSim => {
    if (sim === undefined) throw new Error('kube-sim is not started yet: use the fixture inside a test');
    return sim;
  };
  return {
    sim: current,
    async runtimeFor(config = {}, runtimeOptions = {}) {
      const runtime = await simRuntime(current(), config, runtimeOptions);
      runtimes.push(runtime);
      return runtime;
    },
    core() {
      if (core === undefined) {
        const kc = new KubeConfig();
        kc.loadFromString(current().kubeconfig);
        core = kc.makeApiClient(CoreV1Api);
      }
      return core;
    },
  };
}

/** A build of `steps` busybox steps, each running `script(i)`. */
export function buildOf(count: number, script: (i: number) => string[], fields: Partial<Container> = {}): { build: Build; steps: Container[] } {
  const build = conformanceBuild();
  const steps = Array.from({ length: count }, (_, i) => conformanceStep(build, `s${i}`, i + 1, { image: BUSYBOX, script: script(i), ...fields }));
  build.steps = steps;
  return { build, steps };
}

/**
 * Whether the Docker engine under kube-sim can start a privileged container at all (inside some
 * sandboxes runc fails with "unable to apply caps"). Returns the engine's message when it cannot.
 */
export async function privilegedUnsupported(): Promise<string | undefined> {
  const { execFile } = await import('node:child_process');
  return new Promise((resolve) => {
    execFile('docker', ['run', '--rm', '--privileged', '--network', 'none', BUSYBOX, 'true'], { timeout: 30_000 }, (error, _stdout, stderr) => {
      const lines = (stderr.trim() || error?.message || '').split('\n');
      resolve(error ? (lines.find((line) => /error/i.test(line)) ?? lines[0] ?? 'failed').trim() : undefined);
    });
  });
}

/**
 * Why a real-cluster case that runs alone, after the other lanes, is skipped now (`what` says what
 * it would disturb), or undefined when it runs: the test command sets BERTH_REAL_CLUSTER_ALONE=1 for it.
 */
export function aloneSkip(clusterSkip: string | undefined, what: string): string | undefined {
  if (clusterSkip !== undefined) return clusterSkip;
  return process.env.BERTH_REAL_CLUSTER_ALONE === '1'
    ? undefined
    : `${what}: set BERTH_REAL_CLUSTER_ALONE=1 (the test command runs it alone, after the other lanes)`;
}

/**
 * One runtime on the real cluster for the test file, with a worker id starting `prefix`: created
 * before all tests unless `kubeconfig` is undefined (the file's cases are skipped), reaped and
 * closed after all.
 */
export function useRealRuntime(kubeconfig: string | undefined, prefix: string): () => KubernetesRuntime {
  let runtime: KubernetesRuntime | undefined;
  const workerId = `${prefix}-${Math.random().toString(16).slice(2, 10)}`;
  beforeAll(async () => {
    if (kubeconfig === undefined) return;
    runtime = await createKubernetesRuntime(background(), { workerId }, { ...TEST_OPTIONS, kubeconfig });
  }, 60_000);
  afterAll(async () => {
    await runtime?.reap(background(), workerId).catch(() => undefined);
    await runtime?.close();
  });
  return () => {
    if (runtime === undefined) throw new Error('the real-cluster runtime was not created: use it inside a test that is not skipped');
    return runtime;
  };
}
