/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-call -- wire-level tests read untyped JSON */
// Wire-level behaviour of the API: auth, discovery, Status errors, selectors, patches,
// resourceVersion, watch semantics. The node agent is stalled: no Docker work here.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeSim } from '../src/index.ts';
import { call, openWatch } from './http.ts';
import { pod, startTestSim, waitFor } from './helpers.ts';

let sim: KubeSim;
beforeAll(async () => {
  ({ sim } = await startTestSim({ historyLimit: 40, bookmarkIntervalMs: 200 }));
  sim.faults.set({ stallNodeAgent: true });
});
afterAll(async () => {
  await sim.close();
});

const pods = '/api/v1/namespaces/default/pods';

describe('auth and discovery', () => {
  it('answers 401 with a Status without the bearer token', async () => {
    for (const token of [null, 'wrong']) {
      const r = await call(sim, 'GET', '/api/v1/namespaces/default/pods', { token });
      expect(r.status).toBe(401);
      expect(r.body).toMatchObject({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Unauthorized', code: 401 });
    }
  });
  it('serves /version, /api, /apis, /api/v1 and 404 for openapi', async () => {
    expect((await call(sim, 'GET', '/version')).body).toMatchObject({ major: '1', minor: '32' });
    expect((await call(sim, 'GET', '/api')).body).toMatchObject({ kind: 'APIVersions', versions: ['v1'] });
    expect((await call(sim, 'GET', '/apis')).body).toMatchObject({ kind: 'APIGroupList', groups: [] });
    const v1 = (await call(sim, 'GET', '/api/v1')).body as { resources: { name: string; verbs: string[] }[] };
    expect(v1.resources.map((r) => r.name)).toEqual(expect.arrayContaining(['pods', 'pods/log', 'pods/status', 'events', 'namespaces']));
    expect(v1.resources.find((r) => r.name === 'pods')?.verbs).toEqual(expect.arrayContaining(['create', 'get', 'list', 'watch', 'patch', 'delete']));
    expect((await call(sim, 'GET', '/openapi/v2')).status).toBe(404);
    expect((await call(sim, 'GET', '/openapi/v3')).status).toBe(404);
    expect((await call(sim, 'GET', '/api/v1/services')).body).toMatchObject({ kind: 'Status', code: 404, reason: 'NotFound' });
  });
});

describe('namespaces', () => {
  it('has default, creates and gets, 409 on duplicates', async () => {
    expect((await call(sim, 'GET', '/api/v1/namespaces/default')).body).toMatchObject({ kind: 'Namespace', status: { phase: 'Active' } });
    const created = await call(sim, 'POST', '/api/v1/namespaces', { body: { metadata: { name: 'team-a' } } });
    expect(created.status).toBe(201);
    const again = await call(sim, 'POST', '/api/v1/namespaces', { body: { metadata: { name: 'team-a' } } });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ kind: 'Status', reason: 'AlreadyExists', message: 'namespaces "team-a" already exists' });
    const list = (await call(sim, 'GET', '/api/v1/namespaces')).body as { kind: string; items: { metadata: { name: string } }[] };
    expect(list.kind).toBe('NamespaceList');
    expect(list.items.map((n) => n.metadata.name)).toEqual(expect.arrayContaining(['default', 'team-a', 'kube-system']));
    const missing = await call(sim, 'POST', '/api/v1/namespaces/nope/pods', { body: pod('x') });
    expect(missing.body).toMatchObject({ code: 404, message: 'namespaces "nope" not found' });
  });
});

describe('pods: errors as Status objects', () => {
  it('404, 409, 422 with causes, 415, 400', async () => {
    const nf = await call(sim, 'GET', `${pods}/does-not-exist`);
    expect(nf.status).toBe(404);
    expect(nf.body).toMatchObject({
      kind: 'Status',
      reason: 'NotFound',
      message: 'pods "does-not-exist" not found',
      details: { name: 'does-not-exist', kind: 'pods' },
    });

    expect((await call(sim, 'POST', pods, { body: pod('dup') })).status).toBe(201);
    const dup = await call(sim, 'POST', pods, { body: pod('dup') });
    expect(dup.status).toBe(409);
    expect(dup.body.reason).toBe('AlreadyExists');

    const bad = await call(sim, 'POST', pods, { body: { metadata: { name: 'Bad_Name' }, spec: { containers: [{ name: 'c' }, { name: 'c', image: 'x' }] } } });
    expect(bad.status).toBe(422);
    expect(bad.body.reason).toBe('Invalid');
    const fields = (bad.body.details.causes as { field: string; reason: string }[]).map((c) => `${c.field} ${c.reason}`);
    expect(fields).toEqual(
      expect.arrayContaining(['metadata.name FieldValueInvalid', 'spec.containers[0].image FieldValueRequired', 'spec.containers[1].name FieldValueDuplicate']),
    );
    expect(bad.body.message).toMatch(/^Pod "Bad_Name" is invalid: \[/);

    const unsupported = await call(sim, 'PATCH', `${pods}/dup`, { body: '{}', contentType: 'application/apply-patch+yaml' });
    expect(unsupported.status).toBe(415);
    expect(unsupported.body).toMatchObject({ kind: 'Status', reason: 'UnsupportedMediaType', code: 415 });

    const forbidden = await call(sim, 'PATCH', `${pods}/dup`, { body: { spec: { restartPolicy: 'Always' } }, contentType: 'application/merge-patch+json' });
    expect(forbidden.status).toBe(422);
    expect(forbidden.body.details.causes[0]).toMatchObject({ field: 'spec', reason: 'FieldValueForbidden' });

    expect((await call(sim, 'GET', `${pods}?labelSelector=${encodeURIComponent('a in b')}`)).status).toBe(400);
    expect((await call(sim, 'GET', `${pods}?fieldSelector=spec.image%3Dx`)).body.message).toBe('field label not supported: spec.image');
  });
});

describe('pods: list, selectors, patch, resourceVersion', () => {
  it('filters with set-based label selectors and field selectors', async () => {
    const mk = (name: string, labels: Record<string, string>) => call(sim, 'POST', '/api/v1/namespaces/team-a/pods', { body: pod(name, { labels }) });
    await mk('p1', { app: 'web', tier: 'front' });
    await mk('p2', { app: 'db', tier: 'back' });
    await mk('p3', { app: 'cache' });
    const names = async (q: string) =>
      ((await call(sim, 'GET', `/api/v1/namespaces/team-a/pods?${q}`)).body as { items: { metadata: { name: string } }[] }).items.map((p) => p.metadata.name);
    expect(await names(`labelSelector=${encodeURIComponent('app in (web,db)')}`)).toEqual(['p1', 'p2']);
    expect(await names(`labelSelector=${encodeURIComponent('app notin (web,db)')}`)).toEqual(['p3']);
    expect(await names(`labelSelector=${encodeURIComponent('!tier')}`)).toEqual(['p3']);
    expect(await names(`labelSelector=tier`)).toEqual(['p1', 'p2']);
    expect(await names(`labelSelector=${encodeURIComponent('tier,app!=db')}`)).toEqual(['p1']);
    expect(await names(`fieldSelector=metadata.name%3Dp2`)).toEqual(['p2']);
    expect(await names(`fieldSelector=metadata.namespace%3Dteam-a,metadata.name!%3Dp2`)).toEqual(['p1', 'p3']);
    expect(await names(`fieldSelector=status.phase%3DPending`)).toEqual(['p1', 'p2', 'p3']);
    expect(await names(`fieldSelector=status.phase%3DRunning`)).toEqual([]);
    // The scheduler binds even while the kubelet is stalled.
    await waitFor('bound', async () => (await names('fieldSelector=spec.nodeName%3Dkube-sim-node')).length === 3);
    const all = (await call(sim, 'GET', `/api/v1/pods?labelSelector=app`)).body as { items: { metadata: { namespace: string } }[] };
    expect(all.items.every((p) => p.metadata.namespace === 'team-a')).toBe(true);
    // Paging.
    const page = (await call(sim, 'GET', '/api/v1/namespaces/team-a/pods?limit=2')).body as { items: unknown[]; metadata: { continue: string } };
    expect(page.items).toHaveLength(2);
    const rest = (await call(sim, 'GET', `/api/v1/namespaces/team-a/pods?limit=2&continue=${page.metadata.continue}`)).body as {
      items: { metadata: { name: string } }[];
    };
    expect(rest.items.map((p) => p.metadata.name)).toEqual(['p3']);
  });

  it('patches with the three formats, bumping one global resourceVersion', async () => {
    const created = (
      await call(sim, 'POST', pods, {
        body: {
          ...pod('patchme'),
          spec: {
            ...pod('x').spec,
            containers: [
              { name: 'a', image: 'berth/pause:1' },
              { name: 'b', image: 'berth/pause:1' },
            ],
          },
        },
      })
    ).body;
    const rv0 = Number(created.metadata.resourceVersion);
    const smp = await call(sim, 'PATCH', `${pods}/patchme`, {
      body: { metadata: { labels: { step: 'b' } }, spec: { containers: [{ name: 'b', image: 'berth/busybox:1.35' }] } },
      contentType: 'application/strategic-merge-patch+json',
    });
    expect(smp.status).toBe(200);
    expect(smp.body.spec.containers.map((c: { name: string; image: string }) => `${c.name}=${c.image}`)).toEqual(['a=berth/pause:1', 'b=berth/busybox:1.35']);
    expect(Number(smp.body.metadata.resourceVersion)).toBeGreaterThan(rv0);
    const merge = await call(sim, 'PATCH', `${pods}/patchme`, {
      body: { metadata: { labels: { step: null, done: 'yes' } } },
      contentType: 'application/merge-patch+json',
    });
    expect(merge.body.metadata.labels).toEqual({ test: 'kube-sim', done: 'yes' });
    const jp = await call(sim, 'PATCH', `${pods}/patchme`, {
      body: [{ op: 'replace', path: '/spec/containers/0/image', value: 'berth/busybox:1.35' }],
      contentType: 'application/json-patch+json',
    });
    expect(jp.body.spec.containers[0].image).toBe('berth/busybox:1.35');
    const rvs = [created, smp.body, merge.body, jp.body].map((p: { metadata: { resourceVersion: string } }) => Number(p.metadata.resourceVersion));
    expect([...rvs].sort((a, b) => a - b)).toEqual(rvs);
    expect(new Set(rvs).size).toBe(4);
    // A stale resourceVersion in the patch is a conflict.
    const stale = await call(sim, 'PATCH', `${pods}/patchme`, {
      body: { metadata: { resourceVersion: String(rv0), labels: { x: 'y' } } },
      contentType: 'application/merge-patch+json',
    });
    expect(stale.status).toBe(409);
    expect(stale.body.reason).toBe('Conflict');
    // Status written through the main resource is ignored; through pods/status it is taken.
    await call(sim, 'PATCH', `${pods}/patchme`, { body: { status: { phase: 'Succeeded' } }, contentType: 'application/merge-patch+json' });
    expect((await call(sim, 'GET', `${pods}/patchme`)).body.status.phase).toBe('Pending');
    const st = await call(sim, 'PATCH', `${pods}/patchme/status`, { body: { status: { message: 'hello' } }, contentType: 'application/merge-patch+json' });
    expect(st.body.status.message).toBe('hello');
  });
});

describe('watch', () => {
  it('streams events after the given resourceVersion, with selectors, for ?watch=true and /watch/ paths', async () => {
    const list = (await call(sim, 'GET', `${pods}?labelSelector=w%3D1`)).body as { metadata: { resourceVersion: string } };
    const rv = list.metadata.resourceVersion;
    const w1 = openWatch(sim, `${pods}?watch=true&labelSelector=w%3D1&resourceVersion=${rv}`);
    const w2 = openWatch(sim, `/api/v1/watch/namespaces/default/pods/wa?resourceVersion=${rv}`);
    expect(await w1.status).toBe(200);
    await call(sim, 'POST', pods, { body: pod('wa', { labels: { w: '1' } }) });
    await call(sim, 'POST', pods, { body: pod('wb', { labels: { w: '2' } }) });
    await call(sim, 'PATCH', `${pods}/wa`, { body: { metadata: { labels: { w: '2' } } }, contentType: 'application/merge-patch+json' });
    await call(sim, 'DELETE', `${pods}/wa`, { body: { kind: 'DeleteOptions', apiVersion: 'v1', gracePeriodSeconds: 0, propagationPolicy: 'Background' } });
    await waitFor('watch events', () => w2.events.some((e: { type: string }) => e.type === 'DELETED'));
    // Leaving the selection is a DELETED for that watcher, and then it sees nothing more of it; wb is never seen.
    await waitFor('w1', () => w1.events.some((e: { type: string }) => e.type === 'DELETED'));
    const seen = w1.events.map(
      (e: { type: string; object: { metadata: { name: string; labels: Record<string, string> } } }) =>
        `${e.type} ${e.object.metadata.name} w=${e.object.metadata.labels.w}`,
    );
    expect(seen[0]).toBe('ADDED wa w=1');
    expect(seen[seen.length - 1]).toBe('DELETED wa w=2');
    expect(seen.slice(1, -1).every((s: string) => s === 'MODIFIED wa w=1')).toBe(true);
    const types = w2.events.map((e: { type: string }) => e.type);
    expect(types[0]).toBe('ADDED');
    expect(types.slice(-1)).toEqual(['DELETED']);
    expect(w2.events.every((e: { object: { kind: string; metadata: { name: string } } }) => e.object.kind === 'Pod' && e.object.metadata.name === 'wa')).toBe(
      true,
    );
    const rvs = w2.events.map((e: { object: { metadata: { resourceVersion: string } } }) => Number(e.object.metadata.resourceVersion));
    expect(rvs.every((v: number, i: number) => i === 0 || v > (rvs[i - 1] as number))).toBe(true);
    w1.close();
    w2.close();
    await waitFor('watches closed', () => sim.counters.snapshot().watches.open === 0);
  });

  it('starts with synthetic ADDED events without a resourceVersion', async () => {
    const w = openWatch(sim, `/api/v1/namespaces/team-a/pods?watch=1&timeoutSeconds=1`);
    await w.ended;
    expect(w.events.map((e: { type: string; object: { metadata: { name: string } } }) => `${e.type} ${e.object.metadata.name}`)).toEqual([
      'ADDED p1',
      'ADDED p2',
      'ADDED p3',
    ]);
  });

  it('sends BOOKMARK events when allowed and ends at timeoutSeconds', async () => {
    const rv = (await call(sim, 'GET', pods)).body.metadata.resourceVersion as string;
    const started = Date.now();
    // 4 s: bookmarks stop 2 s before the deadline (cache_watcher.go nextBookmarkTime).
    const w = openWatch(sim, `${pods}?watch=true&allowWatchBookmarks=true&timeoutSeconds=4&resourceVersion=${rv}`);
    await w.ended;
    expect(Date.now() - started).toBeGreaterThanOrEqual(3900);
    const bookmarks = w.events.filter((e: { type: string }) => e.type === 'BOOKMARK');
    expect(bookmarks.length).toBeGreaterThanOrEqual(2);
    expect(bookmarks[0].object).toMatchObject({ kind: 'Pod', apiVersion: 'v1' });
    expect(Number(bookmarks[0].object.metadata.resourceVersion)).toBeGreaterThanOrEqual(Number(rv));
    const plain = openWatch(sim, `${pods}?watch=true&timeoutSeconds=1&resourceVersion=${rv}`);
    await plain.ended;
    expect(plain.events.filter((e: { type: string }) => e.type === 'BOOKMARK')).toEqual([]);
  });

  it('answers a too old resourceVersion with an in-stream 410 ERROR event', async () => {
    const old = (await call(sim, 'GET', pods)).body.metadata.resourceVersion as string;
    // Push the version out of the 40-change window.
    for (let i = 0; i < 45; i++)
      await call(sim, 'PATCH', `${pods}/patchme`, { body: { metadata: { labels: { n: String(i) } } }, contentType: 'application/merge-patch+json' });
    const w = openWatch(sim, `${pods}?watch=true&resourceVersion=${old}`);
    expect(await w.status).toBe(200);
    await w.ended;
    expect(w.events).toHaveLength(1);
    expect(w.events[0]).toMatchObject({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired' } });
    expect(w.events[0].object.message).toMatch(/^too old resource version: \d+ \(\d+\)$/);
  });
});

describe('events', () => {
  it('creates, lists with involvedObject field selectors, and watches', async () => {
    const target = (await call(sim, 'GET', `${pods}/patchme`)).body as { metadata: { uid: string } };
    const w = openWatch(sim, `/api/v1/namespaces/default/events?watch=true&fieldSelector=involvedObject.name%3Dpatchme`);
    await w.status;
    const body = (name: string, reason: string) => ({
      metadata: { name },
      involvedObject: { kind: 'Pod', name: 'patchme', namespace: 'default', uid: target.metadata.uid },
      reason,
      message: `m ${reason}`,
      type: 'Normal',
    });
    expect((await call(sim, 'POST', '/api/v1/namespaces/default/events', { body: body('e1', 'Custom') })).status).toBe(201);
    await call(sim, 'POST', '/api/v1/namespaces/default/events', {
      body: { ...body('e2', 'Other'), involvedObject: { kind: 'Pod', name: 'other', namespace: 'default' } },
    });
    const sel = (s: string) =>
      call(sim, 'GET', `/api/v1/namespaces/default/events?fieldSelector=${encodeURIComponent(s)}`).then((r) =>
        (r.body as { items: { metadata: { name: string } }[] }).items.map((e) => e.metadata.name),
      );
    expect(await sel('involvedObject.name=patchme,reason=Custom')).toEqual(['e1']);
    expect(await sel(`involvedObject.uid=${target.metadata.uid},type=Normal,reason!=Scheduled`)).toEqual(['e1']);
    // The scheduler recorded its own event for the pod.
    expect(await sel(`involvedObject.uid=${target.metadata.uid},reason=Scheduled,source=default-scheduler`)).toHaveLength(1);
    expect(await sel('involvedObject.kind=Pod,involvedObject.namespace=default,involvedObject.name=other')).toEqual(['e2']);
    await waitFor('event watch', () => w.events.some((e: { object: { metadata: { name: string } } }) => e.object.metadata.name === 'e1'));
    expect(w.events.some((e: { object: { metadata: { name: string } } }) => e.object.metadata.name === 'e2')).toBe(false);
    w.close();
  });
});

describe('delete', () => {
  it('deletes an unbound pod at once and 404s afterwards; DeleteOptions preconditions are checked', async () => {
    await call(sim, 'POST', pods, { body: pod('gone') });
    const pre = await call(sim, 'DELETE', `${pods}/gone`, { body: { preconditions: { uid: 'not-the-uid' } } });
    expect(pre.status).toBe(409);
    const del = await call(sim, 'DELETE', `${pods}/gone?gracePeriodSeconds=0`);
    expect(del.status).toBe(200);
    expect(del.body.kind).toBe('Pod');
    expect((await call(sim, 'GET', `${pods}/gone`)).status).toBe(404);
    expect((await call(sim, 'DELETE', `${pods}/gone`)).status).toBe(404);
  });
});
