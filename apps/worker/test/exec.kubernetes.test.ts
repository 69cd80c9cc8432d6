// `berth exec --runtime kubernetes` end to end: the real `berth` process against kube-sim, the
// Kubernetes API test double whose pods run in Docker (no cluster can run here).
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { type KubeSim, startKubeSim } from '@berth/kube-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeSimPodNames, type ProcessRun, spawnBerth } from './run-cli.ts';
import { tempDir } from './temp-dir.ts';

let runs = 0;
/** A build number no other test run on the shared engine uses at the same time. */
const uniqueBuildNumber = (): string => `${process.pid % 100000}${String(++runs).padStart(3, '0')}`;

const EXAMPLES = path.join(import.meta.dirname, '../../../examples');
const PAUSE = process.env.BERTH_PAUSE_IMAGE ?? 'berth/pause:1';
const IMAGE = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';

let kube: KubeSim;
beforeAll(async () => {
  kube = await startKubeSim();
});
afterAll(async () => {
  await kube?.close();
});

function podNames(): Promise<string[]> {
  return kubeSimPodNames(kube);
}

function berth(args: string[], cwd: string): Promise<ProcessRun> {
  return spawnBerth(['exec', '--runtime', 'kubernetes', '--kubeconfig', kube.kubeconfigPath, ...args], cwd, {
    BERTH_BUILD_NUMBER: uniqueBuildNumber(),
    BERTH_KUBERNETES_PAUSE_IMAGE: PAUSE,
  });
}

describe('berth exec --runtime kubernetes (against kube-sim)', { timeout: 180_000 }, () => {
  it('runs examples/stages.yml as one pod: package after lint and test, exit 0, no pod left', async () => {
    const run = await berth(['stages.yml'], EXAMPLES);
    // A pod cannot bind the worker's folder: the build runs in a workspace of its own, and says so.
    expect(run.stderr).toBe(
      `warning: the kubernetes runtime does not declare the hostWorkspace capability, so the build runs in a workspace of its own, without the files of ${EXAMPLES}\n`,
    );
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/package +│ packaging after lint and test/);
    expect(run.stdout.indexOf('packaging after lint and test')).toBeGreaterThan(run.stdout.indexOf('42 tests passed'));
    expect(run.stdout).toMatch(/build \S+ ✓ success/);
    expect(await podNames()).toEqual([]);
  });

  it('exits 1 with the failing step named', async () => {
    const dir = tempDir('berth-k8s-exec-');
    writeFileSync(path.join(dir, '.vela.yml'), `version: "1"\nsteps:\n  - name: broken\n    image: ${IMAGE}\n    pull: never\n    commands: [exit 7]\n`);
    const run = await berth([], dir);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/broken +✗ failure \(exit code 7\)/);
  });
});
