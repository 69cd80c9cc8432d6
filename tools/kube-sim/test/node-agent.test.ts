/* eslint-disable @typescript-eslint/no-unsafe-member-access -- wire-level tests read untyped JSON */
// The node agent: pods really run in Docker, as the kubelet would run them.

import { PatchStrategy, setHeaderOptions, type CoreV1Event, type V1Pod } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { busybox, dockerObjects, pause, pod, startTestSim, waitFor, type TestSim } from './helpers.ts';
import { call, openWatch } from './http.ts';

let t: TestSim;
beforeAll(async () => {
  t = await startTestSim();
});
afterEach(async () => {
  // Whatever a test left behind goes at once.
  await t.core.deleteCollectionNamespacedPod({ namespace: ns, gracePeriodSeconds: 0 });
});
afterAll(async () => {
  await t.sim.close();
  expect(dockerObjects(t.sim.instanceId)).toEqual([]);
});

const ns = 'default';
const read = (name: string) => t.core.readNamespacedPod({ namespace: ns, name });
const events = async (name: string) =>
  (await t.core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${name}` })).items.map(
    (e: CoreV1Event) => `${e.type} ${e.reason}: ${e.message}`,
  );
const status = async (name: string, container = 'main') => (await read(name)).status?.containerStatuses?.find((c) => c.name === container);
const smp = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

describe('node agent', () => {
  it('restarts a container whose image is patched (pause, then the real image), which runs and reports its exit code', async () => {
    const body: V1Pod = {
      metadata: { name: 'vela-build' },
      spec: {
        restartPolicy: 'Never',
        terminationGracePeriodSeconds: 5,
        containers: [
          { name: 'step-one', image: pause, imagePullPolicy: 'IfNotPresent', args: ['sh', '-c', 'echo step one on $(hostname); exit 4'] },
          { name: 'step-two', image: pause, imagePullPolicy: 'IfNotPresent', args: ['sh', '-c', 'echo two'] },
        ],
      },
    };
    await t.core.createNamespacedPod({ namespace: ns, body });
    await waitFor('both running', async () => (await read('vela-build')).status?.containerStatuses?.every((c) => c.state?.running));
    expect((await read('vela-build')).status?.phase).toBe('Running');
    const patched = await t.core.patchNamespacedPod(
      { namespace: ns, name: 'vela-build', body: { spec: { containers: [{ name: 'step-one', image: busybox }] } } },
      smp,
    );
    expect(patched.spec?.containers.map((c) => c.image)).toEqual([busybox, pause]);
    const done = await waitFor('step-one terminated after restart', async () => {
      const s = await status('vela-build', 'step-one');
      return s?.restartCount === 1 && s.state?.terminated ? s : undefined;
    });
    expect(done.state?.terminated).toMatchObject({ exitCode: 4, reason: 'Error' });
    expect(done.state?.terminated?.startedAt).toBeTruthy();
    expect(done.state?.terminated?.finishedAt).toBeTruthy();
    expect(done.lastState?.terminated).toMatchObject({ exitCode: 0, reason: 'Completed' });
    expect(done.image).toBe(`docker.io/${busybox}`);
    // The other step still runs the pause image: the pod stays Running.
    const p = await read('vela-build');
    expect(p.status?.phase).toBe('Running');
    expect(p.status?.containerStatuses?.find((c) => c.name === 'step-two')?.state?.running).toBeTruthy();
    const log = await t.core.readNamespacedPodLog({ namespace: ns, name: 'vela-build', container: 'step-one' });
    expect(log).toBe('step one on vela-build\n');
    const ev = await events('vela-build');
    expect(ev).toEqual(
      expect.arrayContaining([
        'Normal Scheduled: Successfully assigned default/vela-build to kube-sim-node',
        'Normal Killing: Container step-one definition changed, will be restarted',
        `Normal Pulled: Container image "${busybox}" already present on machine`,
        'Normal Created: Created container: step-one',
        'Normal Started: Started container step-one',
      ]),
    );
    await t.core.deleteNamespacedPod({ namespace: ns, name: 'vela-build' });
  });

  it('shares the network namespace (localhost), emptyDir volumes and hostAliases; maps env, workingDir, runAsUser', async () => {
    const body: V1Pod = {
      metadata: { name: 'shared' },
      spec: {
        restartPolicy: 'Never',
        terminationGracePeriodSeconds: 1,
        hostAliases: [{ ip: '10.9.8.7', hostnames: ['vela-server', 'vela.local'] }],
        volumes: [{ name: 'workspace', emptyDir: {} }],
        containers: [
          { name: 'server', image: busybox, command: ['sh', '-c', 'mkdir -p /www && echo served > /www/index.html && exec httpd -f -p 8080 -h /www'] },
          {
            name: 'client',
            image: busybox,
            command: ['sh', '-c'],
            args: [
              'for i in 1 2 3 4 5 6 7 8 9 10; do wget -qO- http://localhost:8080/ 2>/dev/null && break; sleep 0.3; done; echo "$FOO $(pwd) $(id -u)"; grep vela-server /etc/hosts; ping -c1 -W1 vela.local 2>&1 | grep -q 10.9.8.7 || echo vela.local unresolved; for i in $(seq 1 50); do [ -s /work/note ] && break; sleep 0.2; done; cat /work/note',
            ],
            env: [{ name: 'FOO', value: 'bar baz' }],
            workingDir: '/tmp',
            securityContext: { runAsUser: 1234 },
            volumeMounts: [{ name: 'workspace', mountPath: '/work' }],
          },
          { name: 'writer', image: busybox, command: ['sh', '-c', 'echo from-writer > /work/note'], volumeMounts: [{ name: 'workspace', mountPath: '/work' }] },
        ],
      },
    };
    await t.core.createNamespacedPod({ namespace: ns, body });
    await waitFor('client terminated', async () => (await status('shared', 'client'))?.state?.terminated);
    const log = await t.core.readNamespacedPodLog({ namespace: ns, name: 'shared', container: 'client' });
    const lines = log.trim().split('\n');
    expect(lines[0]).toBe('served');
    expect(lines[1]).toBe('bar baz /tmp 1234');
    expect(lines[2]).toMatch(/^10\.9\.8\.7\s+vela-server$/);
    expect(lines[3]).toBe('from-writer');
    expect(lines).toHaveLength(4);
    expect((await status('shared', 'client'))?.state?.terminated?.exitCode).toBe(0);
    await t.core.deleteNamespacedPod({ namespace: ns, name: 'shared', gracePeriodSeconds: 0 });
  });

  it('reports pull failures with the kubelet reasons and events, and recovers when the image is patched', async () => {
    await t.core.createNamespacedPod({ namespace: ns, body: pod('missing', { image: 'berth/does-not-exist:1', args: ['echo', 'recovered'] }) });
    await t.core.createNamespacedPod({ namespace: ns, body: pod('never', { image: 'berth/does-not-exist:2', pullPolicy: 'Never' }) });
    await t.core.createNamespacedPod({ namespace: ns, body: pod('invalid', { image: 'Not A Valid:ref' }) });
    // Every status the pod goes through, from a watch: no transition is missed on a slow machine.
    const w = openWatch(t.sim, `/api/v1/namespaces/${ns}/pods?watch=true&fieldSelector=metadata.name%3Dmissing`);
    const reasons = () => new Set(w.events.map((e: { object: V1Pod }) => e.object.status?.containerStatuses?.[0]?.state?.waiting?.reason).filter(Boolean));
    await waitFor('ErrImagePull then ImagePullBackOff', () => reasons().has('ErrImagePull') && reasons().has('ImagePullBackOff'));
    w.close();
    // The back-off's waiting message carries the pull's error (image_manager.go EnsureImageExists: prevPullErrMsg).
    const waitingOf = (reason: string): string | undefined =>
      w.events.map((e: { object: V1Pod }) => e.object.status?.containerStatuses?.[0]?.state?.waiting).find((s) => s?.reason === reason)?.message;
    expect(waitingOf('ImagePullBackOff')).toBe(`Back-off pulling image "berth/does-not-exist:1": ErrImagePull: ${waitingOf('ErrImagePull') ?? '?'}`);
    const missing = await read('missing');
    expect(missing.status?.phase).toBe('Pending');
    await waitFor('missing events', async () => {
      const ev = await events('missing');
      return (
        [
          'Normal Pulling: Pulling image "berth/does-not-exist:1"',
          'Warning Failed: Error: ErrImagePull',
          'Normal BackOff: Back-off pulling image "berth/does-not-exist:1"',
          'Warning Failed: Error: ImagePullBackOff',
        ].every((e) => ev.includes(e)) && ev.some((e) => e.startsWith('Warning Failed: Failed to pull image "berth/does-not-exist:1": '))
      );
    });
    const never = await waitFor('ErrImageNeverPull', async () => (await status('never'))?.state?.waiting);
    expect(never).toEqual({ reason: 'ErrImageNeverPull', message: 'Container image "berth/does-not-exist:2" is not present with pull policy of Never' });
    expect(await events('never')).toContain('Warning ErrImageNeverPull: Container image "berth/does-not-exist:2" is not present with pull policy of Never');
    const invalid = await waitFor('InvalidImageName', async () => (await status('invalid'))?.state?.waiting);
    expect(invalid.reason).toBe('InvalidImageName');
    expect(invalid.message).toBe(
      'Failed to apply default image tag "Not A Valid:ref": couldn\'t parse image reference "Not A Valid:ref": invalid reference format',
    );
    // Logs of a container that cannot start are a 400 with the API server's words.
    const logs = await call(t.sim, 'GET', '/api/v1/namespaces/default/pods/missing/log');
    expect(logs.status).toBe(400);
    expect(logs.body.message).toBe('container "main" in pod "missing" is waiting to start: trying and failing to pull image');
    // Patching the image to one that is present makes the container run.
    await t.core.patchNamespacedPod({ namespace: ns, name: 'missing', body: { spec: { containers: [{ name: 'main', image: busybox }] } } }, smp);
    const done = await waitFor('recovered', async () => (await status('missing'))?.state?.terminated);
    expect(done.exitCode).toBe(0);
    expect(await t.core.readNamespacedPodLog({ namespace: ns, name: 'missing' })).toBe('recovered\n');
    // The terminal phase follows the terminated status about two relists later (rule 9).
    expect((await read('missing')).status?.phase).toBe('Running');
    await waitFor('Succeeded', async () => (await read('missing')).status?.phase === 'Succeeded');
    for (const name of ['missing', 'never', 'invalid']) await t.core.deleteNamespacedPod({ namespace: ns, name, gracePeriodSeconds: 0 });
  });

  it('enforces activeDeadlineSeconds: phase Failed, reason DeadlineExceeded, containers killed', async () => {
    await t.core.createNamespacedPod({
      namespace: ns,
      body: pod('deadline', { args: ['sleep', '60'], extra: { activeDeadlineSeconds: 2, terminationGracePeriodSeconds: 1 } }),
    });
    const failed = await waitFor(
      'deadline exceeded',
      async () => {
        const p = await read('deadline');
        return p.status?.phase === 'Failed' && p.status.containerStatuses?.[0]?.state?.terminated ? p : undefined;
      },
      30_000,
    );
    expect(failed.status?.reason).toBe('DeadlineExceeded');
    expect(failed.status?.message).toBe('Pod was active on the node longer than the specified deadline');
    expect(failed.status?.containerStatuses?.[0]?.state?.terminated?.exitCode).toBe(137);
    expect(await events('deadline')).toContain('Warning DeadlineExceeded: Pod was active on the node longer than the specified deadline');
    await t.core.deleteNamespacedPod({ namespace: ns, name: 'deadline' });
    // A terminal pod is deleted at once.
    await expect(read('deadline')).rejects.toMatchObject({ code: 404 });
  });

  it('deletes gracefully: deletionTimestamp meanwhile, SIGTERM then SIGKILL after the grace period, then the object goes', async () => {
    await t.core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'graceful' },
        spec: {
          restartPolicy: 'Never',
          containers: [
            { name: 'stubborn', image: busybox, command: ['sh', '-c', "trap 'echo ignoring TERM' TERM; while true; do sleep 0.2; done"] },
            { name: 'polite', image: busybox, command: ['sh', '-c', "trap 'exit 0' TERM; while true; do sleep 0.2; done"] },
          ],
        },
      },
    });
    await waitFor('running', async () => (await read('graceful')).status?.containerStatuses?.every((c) => c.state?.running));
    const { resourceVersion: rv = '', uid = '' } = (await read('graceful')).metadata ?? {};
    expect(dockerObjects(t.sim.instanceId, uid)).toHaveLength(3);
    const w = openWatch(t.sim, `/api/v1/namespaces/default/pods?watch=true&fieldSelector=metadata.name%3Dgraceful&resourceVersion=${rv}`);
    const started = Date.now();
    const deleted = await t.core.deleteNamespacedPod({ namespace: ns, name: 'graceful', gracePeriodSeconds: 3 });
    expect(deleted.metadata?.deletionTimestamp).toBeTruthy();
    expect(deleted.metadata?.deletionGracePeriodSeconds).toBe(3);
    expect((await read('graceful')).metadata?.deletionTimestamp).toBeTruthy();
    await waitFor('DELETED', () => w.events.some((e: { type: string }) => e.type === 'DELETED'), 30_000);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2500);
    const last = w.events.filter((e: { type: string }) => e.type === 'MODIFIED').pop() as { object: V1Pod };
    const byName = Object.fromEntries((last.object.status?.containerStatuses ?? []).map((c) => [c.name, c.state?.terminated?.exitCode]));
    expect(byName).toEqual({ stubborn: 137, polite: 0 });
    w.close();
    await expect(read('graceful')).rejects.toMatchObject({ code: 404 });
    await waitFor('docker objects of the pod removed', () => dockerObjects(t.sim.instanceId, uid).length === 0);
  });
});
