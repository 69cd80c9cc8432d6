// `berth exec --runtime kubernetes` end to end: the real `berth` process against kube-sim, the
// Kubernetes API test double whose pods run in Docker (no cluster can run here).
import { spawn } from 'node:child_process';
import https from 'node:https';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type KubeSim, startKubeSim } from '@berth/kube-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let runs = 0;
/** A build number no other test run on the shared engine uses at the same time. */
const uniqueBuildNumber = (): string => `${process.pid % 100000}${String(++runs).padStart(3, '0')}`;

const BERTH = path.join(import.meta.dirname, '../bin/berth.js');
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

/** The pods kube-sim holds now, asked over its HTTPS API with its own CA and token. */
function podNames(): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const request = https.get(
      `${kube.url}/api/v1/namespaces/default/pods`,
      { ca: kube.caCert, headers: { authorization: `Bearer ${kube.token}` } },
      (response) => {
        let body = '';
        response.on('data', (b: Buffer) => (body += b.toString()));
        response.on('end', () => resolve((JSON.parse(body) as { items: { metadata: { name: string } }[] }).items.map((p) => p.metadata.name)));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
  });
}

function berth(args: string[], cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BERTH, 'exec', '--runtime', 'kubernetes', '--kubeconfig', kube.kubeconfigPath, ...args], {
      cwd,
      env: { ...process.env, NO_COLOR: '1', BERTH_BUILD_NUMBER: uniqueBuildNumber(), BERTH_KUBERNETES_PAUSE_IMAGE: PAUSE },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('berth exec --runtime kubernetes (against kube-sim)', { timeout: 180_000 }, () => {
  it('runs examples/stages.yml as one pod: package after lint and test, exit 0, no pod left', async () => {
    const run = await berth(['stages.yml'], EXAMPLES);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/package +│ packaging after lint and test/);
    expect(run.stdout.indexOf('packaging after lint and test')).toBeGreaterThan(run.stdout.indexOf('42 tests passed'));
    expect(run.stdout).toMatch(/build \S+ ✓ success/);
    expect(await podNames()).toEqual([]);
  });

  it('exits 1 with the failing step named', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'berth-k8s-exec-'));
    writeFileSync(path.join(dir, '.vela.yml'), `version: "1"\nsteps:\n  - name: broken\n    image: ${IMAGE}\n    pull: never\n    commands: [exit 7]\n`);
    const run = await berth([], dir);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/broken +✗ failure \(exit code 7\)/);
  });
});
