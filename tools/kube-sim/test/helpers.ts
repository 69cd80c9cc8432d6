import { afterAll, beforeAll, expect } from 'vitest';
// Shared helpers of kube-sim's tests.

import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { startKubeSim, type KubeSim, type KubeSimOptions } from '../src/index.ts';

/** busybox test image. */
export const busybox = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';
/** pause test image. */
export const pause = process.env.BERTH_PAUSE_IMAGE ?? 'berth/pause:1';

/** A sim plus a client-node config and CoreV1Api for it. */
export interface TestSim {
  sim: KubeSim;
  kc: KubeConfig;
  core: CoreV1Api;
}

/** Starts a sim with fast pull back-off for tests. */
export async function startTestSim(options: KubeSimOptions = {}): Promise<TestSim> {
  const sim = await startKubeSim({ imagePullBackoff: { initialMs: 1000, maxMs: 4000 }, ...options });
  const kc = new KubeConfig();
  kc.loadFromString(sim.kubeconfig);
  return { sim, kc, core: kc.makeApiClient(CoreV1Api) };
}

/** Polls `check` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function waitFor<T>(what: string, check: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 45_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last instanceof Error ? `: ${last.message}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A one-container pod manifest. */
export function pod(
  name: string,
  opts: { image?: string; args?: string[]; command?: string[]; labels?: Record<string, string>; pullPolicy?: string; extra?: Partial<V1Pod['spec']> } = {},
): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: opts.labels ?? { test: 'kube-sim' } },
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 5,
      containers: [
        {
          name: 'main',
          image: opts.image ?? busybox,
          ...(opts.command ? { command: opts.command } : {}),
          ...(opts.args ? { args: opts.args } : {}),
          ...(opts.pullPolicy ? { imagePullPolicy: opts.pullPolicy } : {}),
        },
      ],
      ...(opts.extra ?? {}),
    },
  };
}

/** Docker objects (containers and volumes) labelled with the sim's instance id (and a pod's uid). */
export function dockerObjects(instanceId: string, podUid?: string): string[] {
  const filters = ['--filter', `label=berth.kube-sim/instance=${instanceId}`, ...(podUid ? ['--filter', `label=berth.kube-sim/pod-uid=${podUid}`] : [])];
  const containers = execFileSync('docker', ['ps', '-aq', ...filters], { encoding: 'utf8' }).trim();
  const volumes = execFileSync('docker', ['volume', 'ls', '-q', ...filters], { encoding: 'utf8' }).trim();
  return [...containers.split('\n'), ...volumes.split('\n')].filter(Boolean);
}

/** kubectl, when installed. */
export const kubectlPath = '/usr/bin/kubectl';
/** True when kubectl can be run. */
export const hasKubectl = existsSync(kubectlPath);

/**
 * One kube-sim for the enclosing describe (or file): started before all its tests and handed to
 * `use`; closed after them, checking that it left no Docker object behind.
 */
export function useTestSim(use: (sim: TestSim) => void, options: KubeSimOptions = {}): void {
  let t: TestSim | undefined;
  beforeAll(async () => {
    t = await startTestSim(options);
    use(t);
  });
  afterAll(async () => {
    if (t === undefined) return;
    await t.sim.close();
    expect(dockerObjects(t.sim.instanceId)).toEqual([]);
  });
}
