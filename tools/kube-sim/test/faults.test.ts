/* eslint-disable @typescript-eslint/no-unsafe-member-access -- wire-level tests read untyped JSON */
// Fault injection (library API and admin endpoint) and exact counters.

import { ListWatch, Watch, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busybox, dockerObjects, pod, startTestSim, waitFor, type TestSim } from './helpers.ts';
import { call, openWatch } from './http.ts';

let t: TestSim;
beforeAll(async () => {
  t = await startTestSim({ historyLimit: 30 });
});
afterAll(async () => {
  await t.sim.close();
  expect(dockerObjects(t.sim.instanceId)).toEqual([]);
});

const ns = 'default';
const pods = `/api/v1/namespaces/${ns}/pods`;
const snap = () => t.sim.counters.snapshot();

function informer(selector: string) {
  const listFn = () => t.core.listNamespacedPod({ namespace: ns, labelSelector: selector });
  const lw = new ListWatch<V1Pod>(pods, new Watch(t.kc), listFn, false, selector);
  const log: string[] = [];
  let connects = 0;
  lw.on('add', (p) => log.push(`add ${p.metadata?.name}`));
  lw.on('delete', (p) => log.push(`delete ${p.metadata?.name}`));
  lw.on('error', (e) => {
    const err = e as { statusCode?: number; code?: number };
    log.push(`error ${err.statusCode ?? err.code ?? String(e)}`);
  });
  lw.on('connect', () => connects++);
  return { lw, log, connects: () => connects };
}

describe('faults', () => {
  it('an injected HTTP 410 on the watch makes the informer relist and carry on', async () => {
    t.sim.faults.set({ stallNodeAgent: true });
    const inf = informer('f=gone');
    await inf.lw.start();
    await waitFor('watch open', () => snap().watches.open === 1);
    const lists = snap().byVerbResource['list pods'] ?? 0;
    t.sim.faults.set({ failRequests: { count: 1, code: 410, verbs: ['watch'] }, closeWatchesNow: true });
    await waitFor('relisted', () => (snap().byVerbResource['list pods'] ?? 0) === lists + 1);
    expect(snap().faultsInjected).toMatchObject({ '410': 1 });
    await t.core.createNamespacedPod({ namespace: ns, body: pod('after-410', { labels: { f: 'gone' } }) });
    await waitFor('add after relist', () => inf.log.includes('add after-410'));
    expect(inf.log.filter((l) => l.startsWith('error'))).toEqual([]);
    await inf.lw.stop();
  });

  it('a watch resuming from a version older than the history window gets an in-stream 410; the relist reports what was deleted meanwhile', async () => {
    const inf = informer('f=window');
    await t.core.createNamespacedPod({ namespace: ns, body: pod('doomed', { labels: { f: 'window' } }) });
    await inf.lw.start();
    expect(inf.log).toContain('add doomed');
    await waitFor('watch open', () => snap().watches.open === 1);
    // First close: the informer reconnects at once but arms a 1 s back-off for the next one.
    t.sim.faults.closeWatches();
    await waitFor('reconnected', () => inf.connects() >= 2 && snap().watches.open === 1);
    const lists = snap().byVerbResource['list pods'] ?? 0;
    t.sim.faults.closeWatches();
    // During the back-off: delete the pod and churn more than 30 changes.
    await t.core.deleteNamespacedPod({ namespace: ns, name: 'doomed', gracePeriodSeconds: 0 });
    await t.core.createNamespacedPod({ namespace: ns, body: pod('churn') });
    for (let i = 0; i < 35; i++)
      await call(t.sim, 'PATCH', `${pods}/churn`, { body: { metadata: { labels: { i: String(i) } } }, contentType: 'application/merge-patch+json' });
    await waitFor('relist after in-stream 410', () => (snap().byVerbResource['list pods'] ?? 0) === lists + 1);
    await waitFor('delete seen through the relist', () => inf.log.includes('delete doomed'));
    expect(inf.log.filter((l) => l.startsWith('error'))).toEqual([]);
    await inf.lw.stop();
  });

  it('500 and 429 answers are Status objects; 429 carries Retry-After; an informer stops on a 500', async () => {
    t.sim.faults.set({ failRequests: { count: 2, code: 429, verbs: ['list', 'get'] } });
    const a = await call(t.sim, 'GET', pods);
    expect(a.status).toBe(429);
    expect(a.headers['retry-after']).toBe('1');
    expect(a.body).toMatchObject({ kind: 'Status', reason: 'TooManyRequests', code: 429 });
    expect((await call(t.sim, 'GET', `${pods}/churn`)).status).toBe(429);
    expect((await call(t.sim, 'GET', pods)).status).toBe(200);
    t.sim.faults.set({ failRequests: { count: 1, code: 500 } });
    const inf = informer('f=500');
    await inf.lw.start();
    expect(inf.log).toEqual(['error 500']);
    await inf.lw.stop();
    expect(t.sim.faults.get().failRequests?.count).toBe(0);
  });

  it('closes watches every N seconds and delays watch events', async () => {
    t.sim.faults.set({ closeWatchesEverySeconds: 0.5 });
    const w = openWatch(t.sim, `${pods}?watch=true`);
    const started = Date.now();
    await w.ended;
    expect(Date.now() - started).toBeLessThan(5000);
    t.sim.faults.set({ closeWatchesEverySeconds: null, watchEventDelayMs: 700 });
    const rv = (await call(t.sim, 'GET', pods)).body.metadata.resourceVersion as string;
    const d = openWatch(t.sim, `${pods}?watch=true&resourceVersion=${rv}`);
    await d.status;
    const sent = Date.now();
    await call(t.sim, 'PATCH', `${pods}/churn`, { body: { metadata: { labels: { delayed: 'yes' } } }, contentType: 'application/merge-patch+json' });
    await waitFor('delayed event', () => d.events.length > 0);
    expect(Date.now() - sent).toBeGreaterThanOrEqual(650);
    d.close();
    t.sim.faults.set({ watchEventDelayMs: 0 });
  });

  it('fails pulls of a present image on demand, and stalls the node agent', async () => {
    t.sim.faults.set({ stallNodeAgent: false, imagePullFailures: { [busybox]: { reason: 'ErrImagePull', message: 'registry is down (injected)' } } });
    await t.core.createNamespacedPod({ namespace: ns, body: pod('pullfail', { args: ['true'] }) });
    const waiting = await waitFor('ErrImagePull', async () => {
      const w = (await t.core.readNamespacedPod({ namespace: ns, name: 'pullfail' })).status?.containerStatuses?.[0]?.state?.waiting;
      return w?.reason === 'ErrImagePull' ? w : undefined;
    });
    expect({ ...waiting }).toEqual({ reason: 'ErrImagePull', message: 'registry is down (injected)' });
    t.sim.faults.set({ imagePullFailures: {} });
    await waitFor(
      'recovers after the back-off',
      async () => (await t.core.readNamespacedPod({ namespace: ns, name: 'pullfail' })).status?.phase === 'Succeeded',
      30_000,
    );

    t.sim.faults.set({ stallNodeAgent: true });
    await t.core.createNamespacedPod({ namespace: ns, body: pod('stalled', { args: ['true'] }) });
    await new Promise((r) => setTimeout(r, 1500));
    const stalled = await t.core.readNamespacedPod({ namespace: ns, name: 'stalled' });
    expect(stalled.status?.phase).toBe('Pending');
    expect(stalled.status?.containerStatuses).toBeUndefined();
    t.sim.faults.set({ stallNodeAgent: false });
    await waitFor('runs once un-stalled', async () => (await t.core.readNamespacedPod({ namespace: ns, name: 'stalled' })).status?.phase === 'Succeeded');
  });

  it('is switchable through POST /_sim/faults', async () => {
    const r = await call(t.sim, 'POST', '/_sim/faults', { body: { failRequests: { count: 1, code: 500, verbs: ['get'] }, logCutAfterBytes: 10 } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ failRequests: { count: 1, code: 500, verbs: ['get'] }, logCutAfterBytes: 10 });
    expect((await call(t.sim, 'GET', `${pods}/churn`)).status).toBe(500);
    expect((await call(t.sim, 'POST', '/_sim/faults', { body: { failRequests: { count: 1, code: 404 } } })).status).toBe(400);
    expect((await call(t.sim, 'DELETE', '/_sim/faults')).body).toMatchObject({ failRequests: null, logCutAfterBytes: null, stallNodeAgent: false });
    expect((await call(t.sim, 'GET', '/_sim/faults', { token: null })).status).toBe(401);
  });
});

describe('counters', () => {
  it('count every API request exactly once by verb, resource and subresource, open watches and log bytes', async () => {
    // The stopped informer of an earlier test may have opened one more watch after its back-off
    // (@kubernetes/client-node cache.js ListWatch.doneHandler checks `stopped` before the delay, not
    // after), which its 30 s client timeout would end: close it now (stopped, it does not reconnect).
    t.sim.faults.closeWatches();
    await waitFor('no watch open', () => snap().watches.open === 0);
    t.sim.counters.reset();
    await t.core.createNamespacedPod({ namespace: ns, body: pod('counted', { args: ['echo', 'hello'] }) });
    await waitFor('done', async () => (await t.core.readNamespacedPod({ namespace: ns, name: 'counted' })).status?.phase === 'Succeeded');
    const gets = snap().byVerbResource['get pods'] ?? 0;
    await t.core.listNamespacedPod({ namespace: ns });
    await t.core.listPodForAllNamespaces();
    const w1 = openWatch(t.sim, `${pods}?watch=true`);
    const w2 = openWatch(t.sim, `/api/v1/watch/namespaces/${ns}/events`);
    await w1.status;
    await w2.status;
    expect(snap().watches.open).toBe(2);
    w1.close();
    w2.close();
    await waitFor('watches closed', () => snap().watches.open === 0);
    expect(await t.core.readNamespacedPodLog({ namespace: ns, name: 'counted' })).toBe('hello\n');
    await call(t.sim, 'PATCH', `${pods}/counted/status`, { body: { status: { message: 'x' } }, contentType: 'application/merge-patch+json' });
    await t.core.listNamespacedEvent({ namespace: ns, fieldSelector: 'involvedObject.name=counted' });
    await t.core.deleteNamespacedPod({ namespace: ns, name: 'counted' });
    await call(t.sim, 'GET', '/version');
    await call(t.sim, 'GET', '/_sim/counters'); // not counted
    const s = snap();
    expect(s.byVerbResource).toEqual({
      'create pods': 1,
      'get pods': gets,
      'list pods': 2,
      'watch pods': 1,
      'watch events': 1,
      'get pods/log': 1,
      'patch pods/status': 1,
      'list events': 1,
      'delete pods': 1,
      'get discovery': 1,
    });
    expect(s.requestsTotal).toBe(gets + 10);
    expect(s.byVerb).toMatchObject({ create: 1, list: 3, watch: 2, patch: 1, delete: 1 });
    expect(s.byResource).toMatchObject({ 'pods/log': 1, 'pods/status': 1, events: 2 });
    expect(s.watches).toEqual({ open: 0, maxOpen: 2, opened: 2 });
    expect(s.logs).toEqual({ streams: 1, bytes: 'hello\n'.length });
    const wire = await call(t.sim, 'GET', '/_sim/counters');
    expect(wire.body.byVerbResource).toEqual(s.byVerbResource);
  });

  it('counts response bytes by verb and resource, and watch events sent (bookmarks not) by resource', async () => {
    t.sim.counters.reset();
    const name = 'bytes-counted';
    const events = `/api/v1/namespaces/${ns}/events`;
    const w = openWatch(t.sim, `${events}?watch=true&allowWatchBookmarks=true&fieldSelector=involvedObject.name%3D${name}`);
    await w.status;
    const post = (i: number, about: string) =>
      call(t.sim, 'POST', events, {
        body: { metadata: { name: `${about}.${i}` }, involvedObject: { kind: 'Pod', name: about, namespace: ns }, reason: 'Custom', message: `m${i}` },
      });
    await post(1, name);
    await post(2, 'someone-else');
    await waitFor('one event on the watch', () => w.events.length >= 1);
    const list = await call(t.sim, 'GET', `${events}?fieldSelector=involvedObject.name%3D${name}`);
    w.close();
    const s = snap();
    // Only the event about `name` passed the watch's field selector.
    expect(s.watchEventsByResource).toEqual({ events: 1 });
    expect(s.bytesByVerbResource['list events']).toBe(Buffer.byteLength(JSON.stringify(list.body)));
    expect(s.bytesByVerbResource['watch events']).toBe(Buffer.byteLength(`${JSON.stringify(w.events[0])}\n`));
    expect(s.bytesByVerbResource['create events']).toBeGreaterThan(0);
  });
});

describe('close', () => {
  it('returns while the node agent is stalled with pods mid-run, and leaves no Docker objects', async () => {
    const other = await startTestSim();
    try {
      await other.core.createNamespacedPod({ namespace: ns, body: pod('mid-run', { args: ['sleep', '30'] }) });
      await waitFor(
        'running',
        async () => (await other.core.readNamespacedPod({ namespace: ns, name: 'mid-run' })).status?.containerStatuses?.[0]?.state?.running,
      );
      other.sim.faults.set({ stallNodeAgent: true });
      await other.core.deleteNamespacedPod({ namespace: ns, name: 'mid-run' });
      await new Promise((r) => setTimeout(r, 500));
      // The stalled kubelet has not confirmed the deletion.
      expect((await other.core.readNamespacedPod({ namespace: ns, name: 'mid-run' })).metadata?.deletionTimestamp).toBeTruthy();
    } finally {
      await other.sim.close();
    }
    expect(dockerObjects(other.sim.instanceId)).toEqual([]);
  });
});
