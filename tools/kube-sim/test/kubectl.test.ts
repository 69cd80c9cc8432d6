// kubectl 1.32 as an outside client: keeps kube-sim honest about the wire format.

import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busybox, dockerObjects, hasKubectl, kubectlPath, pause, pod, startTestSim, waitFor, type TestSim } from './helpers.ts';

const run = promisify(execFile);
const why = hasKubectl ? '' : ` (skipped: ${kubectlPath} is not installed)`;

let t: TestSim;
let cacheDir: string;
beforeAll(async () => {
  t = await startTestSim();
  cacheDir = await mkdtemp(path.join(tmpdir(), 'kube-sim-kubectl-'));
});
afterAll(async () => {
  await t.sim.close();
  await rm(cacheDir, { recursive: true, force: true });
  expect(dockerObjects(t.sim.instanceId)).toEqual([]);
});

function args(...rest: string[]): string[] {
  return ['--kubeconfig', t.sim.kubeconfigPath, '--cache-dir', cacheDir, ...rest];
}

async function kubectl(...rest: string[]): Promise<string> {
  const { stdout } = await run(kubectlPath, args(...rest), { timeout: 60_000 });
  return stdout;
}

const ns = 'default';

describe('kubectl against kube-sim', () => {
  it.skipIf(!hasKubectl)(`get pods -w prints the list, then a change${why}`, async () => {
    await t.core.createNamespacedPod({ namespace: ns, body: pod('watched', { image: pause }) });
    const child = spawn(kubectlPath, args('get', 'pods', '-w'), { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
    try {
      await waitFor('the list', () => /NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE/.test(out) && /\nwatched\s/.test(out));
      await t.core.createNamespacedPod({ namespace: ns, body: pod('appeared', { image: pause }) });
      await waitFor('the change', () => /\nappeared\s+\S+\s+(Pending|ContainerCreating|Running)/.test(out));
      await waitFor('appeared running', () => /\nappeared\s+1\/1\s+Running/.test(out));
      expect(err).toBe('');
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
    await waitFor('kubectl watch closed', () => t.sim.counters.snapshot().watches.open === 0);
  });

  it.skipIf(!hasKubectl)(`patch (strategic) restarts the container with the new image; logs -f follows it to the end${why}`, async () => {
    await t.core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'patched' },
        spec: {
          restartPolicy: 'Never',
          containers: [{ name: 'main', image: pause, args: ['sh', '-c', 'for i in 1 2 3 4; do echo tick $i; sleep 0.5; done'] }],
        },
      },
    });
    await waitFor('running', async () => (await t.core.readNamespacedPod({ namespace: ns, name: 'patched' })).status?.containerStatuses?.[0]?.state?.running);
    const patched = await kubectl('patch', 'pod', 'patched', '-p', JSON.stringify({ spec: { containers: [{ name: 'main', image: busybox }] } }));
    expect(patched.trim()).toBe('pod/patched patched');
    await waitFor(
      'restarted',
      async () => (await t.core.readNamespacedPod({ namespace: ns, name: 'patched' })).status?.containerStatuses?.[0]?.restartCount === 1,
    );
    await waitFor(
      'new container running',
      async () => (await t.core.readNamespacedPod({ namespace: ns, name: 'patched' })).status?.containerStatuses?.[0]?.state?.running,
    );
    const logs = await kubectl('logs', '-f', 'patched');
    expect(logs).toBe('tick 1\ntick 2\ntick 3\ntick 4\n');
    // The kubelet's status manager reports at most once a second (kube-sim rule 5,
    // pkg/kubelet/status/status_manager.go syncBatch), so the table may say Running for a moment
    // after the log ends, as it does on a real cluster.
    let table = '';
    await waitFor('the table says Completed', async () => /patched\s+0\/1\s+Completed\s+1\s+/.test((table = await kubectl('get', 'pod', 'patched'))));
    expect(table).toMatch(/^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\n/);
  });

  it.skipIf(!hasKubectl)(`get events lists the kubelet's events${why}`, async () => {
    const out = await kubectl('get', 'events', '--field-selector', 'involvedObject.name=patched');
    expect(out).toMatch(/LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE/);
    for (const reason of ['Scheduled', 'Pulled', 'Created', 'Started', 'Killing']) expect(out).toMatch(new RegExp(`Normal\\s+${reason}\\s+pod/patched`));
  });

  it.skipIf(!hasKubectl)(`delete waits until the pod is gone${why}`, async () => {
    const out = await kubectl('delete', 'pod', 'watched', 'appeared');
    expect(out).toBe('pod "watched" deleted\npod "appeared" deleted\n');
    await expect(t.core.readNamespacedPod({ namespace: ns, name: 'watched' })).rejects.toMatchObject({ code: 404 });
    const after = await kubectl('get', 'pods', '-o', 'name');
    expect(after.trim().split('\n')).toEqual(['pod/patched']);
    await kubectl('delete', 'pod', 'patched', '--grace-period=0', '--force');
  });
});
