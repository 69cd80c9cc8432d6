// kube-sim answers to the real cluster (issue 24, item 3): one scenario list, run through the
// runtime on kube-sim and on the real cluster (tools/kube-cluster), and what the runtime observes
// compared: exit codes, logs, error kinds and the gist of their messages. The real cluster is the
// judge; a difference is kube-sim's to fix (each rule it follows cites the kubelet or API server
// code: see tools/kube-sim/README.md).
import { randomUUID } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { background, withTimeout } from '@berth/context';
import { realCluster } from '@berth/kube-cluster';
import type { KubeSim } from '@berth/kube-sim';
import type { Build, Container } from '@berth/pipeline';
import { isRuntimeError } from '@berth/runtime';
import { collectStream, conformanceBuild, conformanceStep, setupBuildResources, teardownBuild } from '@berth/runtime-conformance';
import { createKubernetesRuntime, type KubernetesRuntime, type KubernetesRuntimeOptions } from '../src/index.ts';
import { BUSYBOX, startSim, TEST_OPTIONS } from './helpers.ts';

/** What the runtime observed of one container: its exit code and log, or its error's code and gist. */
type Seen = { exit: number; log: string } | { error: string; gist: string[] };

/** What a scenario observed, container by container in the order they ran. */
type Observation = Record<string, Seen>;

/** Phrases of an error message that say what happened (compared), not how (ids, times, wording). */
const GISTS: [RegExp, string][] = [
  [/no kubelet event said why/, 'no kubelet event'],
  [/check the image name/, 'check the image name'],
  [/berth\/diff-missing:1/, 'image named'],
  [/ErrImagePull|ErrImageNeverPull|ImagePullBackOff/, 'pull failure reason'],
  [/stayed Pending for \d+ s/, 'stayed pending'],
  [/PodScheduled Unschedulable/, 'unschedulable'],
  [/didn't match Pod's node affinity\/selector/, 'node selector named'],
  [/pod \S+ ended/, 'pod ended'],
];

function gistOf(message: string): string[] {
  return GISTS.filter(([pattern]) => pattern.test(message)).map(([, gist]) => gist);
}

interface Scenario {
  readonly name: string;
  readonly options?: KubernetesRuntimeOptions;
  /** The build's steps (busybox unless they say otherwise). */
  steps(build: Build): Container[];
}

const step = (build: Build, name: string, number: number, script: string[], fields: Partial<Container> = {}): Container =>
  conformanceStep(build, name, number, { image: BUSYBOX, script, ...fields });

// Written by beforeAll and removed by afterAll: without a cluster every case is skipped, and the
// file's hooks with them.
const dir = path.join(tmpdir(), `berth-diff-${randomUUID()}`);
const unschedulableTemplate = path.join(dir, 'unschedulable.yml');

const SCENARIOS: Scenario[] = [
  {
    name: 'two steps, the second exits 3',
    steps: (b) => [step(b, 'ok', 1, ['echo one']), step(b, 'bad', 2, ['echo two', 'exit 3'])],
  },
  {
    // Issue 24 (b): the kubelet's event spam filter drops the later pull events of a pod of ~8+ containers.
    name: 'twelve steps, then a missing image',
    steps: (b) => [
      ...Array.from({ length: 12 }, (_, i) => step(b, `s${i + 1}`, i + 1, [`echo s${i + 1}`])),
      step(b, 'missing', 13, ['echo never'], { image: 'berth/diff-missing:1', pull: 'not_present' }),
    ],
  },
  {
    // Issue 24 (c): a pod no node can take stays Pending; the runtime says why after its pending timeout.
    name: 'a pod no node matches',
    options: { podsTemplateFile: unschedulableTemplate, pendingTimeoutMs: 5_000 },
    steps: (b) => [step(b, 'ok', 1, ['echo one'])],
  },
];

/** Runs the scenario's steps one after another, as the executor does, until one fails to run. */
async function observe(runtime: KubernetesRuntime, scenario: Scenario): Promise<Observation> {
  const [ctx, cancel] = withTimeout(background(), 150_000);
  const build = conformanceBuild();
  build.steps = scenario.steps(build);
  const seen: Observation = {};
  try {
    try {
      await setupBuildResources(ctx, runtime, build);
      for (const container of build.steps) {
        try {
          await runtime.runContainer(ctx, container, build);
          const [log, exit] = await Promise.all([collectStream(ctx, await runtime.tailContainer(ctx, container)), runtime.waitContainer(ctx, container)]);
          seen[container.name] = { exit: exit.exitCode, log: log.toString() };
        } catch (error) {
          seen[container.name] = isRuntimeError(error) ? { error: error.code, gist: gistOf(error.message) } : { error: String(error), gist: [] };
          break;
        }
      }
    } catch (error) {
      seen['(build)'] = isRuntimeError(error) ? { error: error.code, gist: gistOf(error.message) } : { error: String(error), gist: [] };
    }
    return seen;
  } finally {
    await teardownBuild(ctx, runtime, build).catch(() => undefined);
    cancel();
  }
}

const cluster = realCluster();
const workerId = `diff-${Math.random().toString(16).slice(2, 10)}`;
let sim: KubeSim | undefined;
const runtimes = new Map<string, KubernetesRuntime>();

async function runtimeFor(target: 'kube-sim' | 'real cluster', options: KubernetesRuntimeOptions = {}): Promise<KubernetesRuntime> {
  const key = `${target} ${JSON.stringify(options)}`;
  let runtime = runtimes.get(key);
  if (runtime === undefined) {
    const kubeconfig = target === 'kube-sim' ? sim?.kubeconfig : cluster.kubeconfig;
    runtime = await createKubernetesRuntime(background(), { workerId }, { ...TEST_OPTIONS, ...options, kubeconfig });
    runtimes.set(key, runtime);
  }
  return runtime;
}

beforeAll(async () => {
  mkdirSync(dir);
  writeFileSync(
    unschedulableTemplate,
    'apiVersion: go-vela.github.io/v1alpha1\nkind: PipelinePodsTemplate\nmetadata: { name: nowhere }\nspec:\n  template:\n    spec:\n      nodeSelector: { berth.dev/pool: nowhere }\n',
  );
  // Rule 10 (the kubelet acting on a patch only after a relist newer than its last sync) is off by
  // default in kube-sim for speed; compared with the real kubelet, kube-sim runs as faithful as it can.
  sim = await startSim({ syncWaitsForRelist: true });
}, 60_000);
afterAll(async () => {
  for (const runtime of runtimes.values()) {
    await runtime.reap(background(), workerId).catch(() => undefined);
    await runtime.close();
  }
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe.each(SCENARIOS)('differential (kube-sim against the real cluster): $name', (scenario) => {
  it.skipIf(cluster.skip !== undefined)(
    `kube-sim observes what the real cluster observes${cluster.skip === undefined ? '' : ` [skipped: ${cluster.skip}]`}`,
    { timeout: 300_000 },
    async () => {
      const [onSim, onReal] = await Promise.all([
        runtimeFor('kube-sim', scenario.options).then((rt) => observe(rt, scenario)),
        runtimeFor('real cluster', scenario.options).then((rt) => observe(rt, scenario)),
      ]);
      console.log(`[differential] ${scenario.name}\n  real cluster: ${JSON.stringify(onReal)}\n  kube-sim:     ${JSON.stringify(onSim)}`);
      expect(onSim).toEqual(onReal);
    },
  );
});
