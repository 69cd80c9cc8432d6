/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-call -- wire-level tests read untyped JSON */
// Rule 7: the API server's answers a client must handle: 403 Forbidden for missing RBAC, 504
// "Too large resource version", resourceVersionMatch, and a watch history per resource that
// reaches back in time (75 s) rather than by a global count. The node agent is stalled.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeSim } from '../src/index.ts';
import { call, openWatch } from './http.ts';
import { pod, startTestSim } from './helpers.ts';

let sim: KubeSim;
beforeAll(async () => {
  ({ sim } = await startTestSim({ historyLimit: 30, user: 'system:serviceaccount:ci:berth' }));
  sim.faults.set({ stallNodeAgent: true });
  expect((await call(sim, 'POST', pods, { body: pod('subject') })).status).toBe(201);
});
afterAll(async () => {
  await sim.close();
});

const pods = '/api/v1/namespaces/default/pods';
const currentVersion = async (): Promise<number> => Number((await call(sim, 'GET', pods)).body.metadata.resourceVersion);
const label = (value: string) =>
  call(sim, 'PATCH', `${pods}/subject`, { body: { metadata: { labels: { v: value } } }, contentType: 'application/merge-patch+json' });

describe('403 Forbidden (apiserver endpoints/handlers/responsewriters/errors.go forbiddenMessage, ForbiddenStatusError)', () => {
  it('answers denied verbs with the API server`s Status, and only those', async () => {
    sim.faults.set({
      forbidden: [
        { verbs: ['list', 'watch'], resources: ['pods'], namespaces: ['default'] },
        { verbs: ['get'], resources: ['pods/log'] },
        { resources: ['events'] },
      ],
    });
    try {
      const list = await call(sim, 'GET', pods);
      expect(list.status).toBe(403);
      expect(list.body).toEqual({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: 'pods is forbidden: User "system:serviceaccount:ci:berth" cannot list resource "pods" in API group "" in the namespace "default"',
        reason: 'Forbidden',
        details: { kind: 'pods' },
        code: 403,
      });
      expect((await call(sim, 'GET', `${pods}?watch=true`)).status).toBe(403);
      expect((await call(sim, 'GET', `${pods}/subject`)).status).toBe(200);
      const log = await call(sim, 'GET', `${pods}/subject/log`);
      expect(log.body.message).toBe(
        'pods "subject" is forbidden: User "system:serviceaccount:ci:berth" cannot get resource "pods/log" in API group "" in the namespace "default"',
      );
      const events = await call(sim, 'GET', '/api/v1/events');
      expect(events.body.message).toBe(
        'events is forbidden: User "system:serviceaccount:ci:berth" cannot list resource "events" in API group "" at the cluster scope',
      );
    } finally {
      sim.faults.set({ forbidden: [] });
    }
    expect((await call(sim, 'GET', pods)).status).toBe(200);
  });
});

describe('504 Too large resource version (apiserver storage/errors.go NewTooLargeResourceVersionError; cacher watch_cache.go waitUntilFreshAndBlock)', () => {
  it('a get or list at a version not reached within 3 s gets 504; a watch gets it in-stream; one reached meanwhile is served', async () => {
    const now = await currentVersion();
    const asked = Date.now();
    const list = await call(sim, 'GET', `${pods}?resourceVersion=${now + 1000}`);
    expect(Date.now() - asked).toBeGreaterThanOrEqual(2900);
    expect(list.status).toBe(504);
    expect(list.body).toMatchObject({
      kind: 'Status',
      reason: 'Timeout',
      code: 504,
      message: `Timeout: Too large resource version: ${now + 1000}, current: ${now}`,
      details: { causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }], retryAfterSeconds: 1 },
    });
    expect((await call(sim, 'GET', `${pods}/subject?resourceVersion=${now + 1000}`)).status).toBe(504);
    const w = openWatch(sim, `${pods}?watch=true&resourceVersion=${now + 1000}`);
    expect(await w.status).toBe(200);
    await w.ended;
    expect(w.events).toMatchObject([{ type: 'ERROR', object: { kind: 'Status', code: 504, reason: 'Timeout' } }]);
    // A version reached while the request waits is served.
    const waiting = call(sim, 'GET', `${pods}?resourceVersion=${(await currentVersion()) + 1}`);
    await label('bump');
    expect((await waiting).status).toBe(200);
  });
});

describe('resourceVersionMatch (apimachinery meta/internalversion/validation ValidateListOptions; cacher.go GetList)', () => {
  it('validates as the API server does', async () => {
    const cases: [string, string][] = [
      ['resourceVersionMatch=Exact', 'resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided'],
      ['resourceVersionMatch=Exact&resourceVersion=0', 'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"'],
      ['resourceVersionMatch=Newest&resourceVersion=1', 'resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""'],
      ['resourceVersionMatch=NotOlderThan&resourceVersion=1&watch=true', 'resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch'],
    ];
    for (const [query, message] of cases) {
      const r = await call(sim, 'GET', `${pods}?${query}`);
      expect(r.status, query).toBe(422);
      expect(r.body.message).toBe(`ListOptions.meta.k8s.io "" is invalid: ${message}`);
    }
  });

  it('Exact lists the objects as they were at that version; NotOlderThan the latest; a version out of the history is 410', async () => {
    await label('before');
    const at = await currentVersion();
    await label('after');
    const exact = await call(sim, 'GET', `${pods}?resourceVersionMatch=Exact&resourceVersion=${at}`);
    expect(exact.status).toBe(200);
    expect(exact.body.metadata.resourceVersion).toBe(String(at));
    expect(exact.body.items.map((p: { metadata: { labels: { v: string } } }) => p.metadata.labels.v)).toEqual(['before']);
    const newer = await call(sim, 'GET', `${pods}?resourceVersionMatch=NotOlderThan&resourceVersion=${at}`);
    expect(newer.body.items.map((p: { metadata: { labels: { v: string } } }) => p.metadata.labels.v)).toEqual(['after']);
    for (let i = 0; i < 35; i++) await label(`churn-${i}`);
    const gone = await call(sim, 'GET', `${pods}?resourceVersionMatch=Exact&resourceVersion=${at}`);
    expect(gone.status).toBe(410);
    expect(gone.body).toMatchObject({ reason: 'Expired', message: 'The resourceVersion for the provided list is too old.' });
  });
});

describe('watch history per resource and in time (cacher.go DefaultEventFreshDuration 75 s, watch_cache.go resizeCacheLocked)', () => {
  it('changes to events do not push pods out of their window', async () => {
    const from = await currentVersion();
    await label('one');
    // More event changes than the 30-change limit: they fill the events' history, not the pods'.
    for (let i = 0; i < 40; i++) {
      const r = await call(sim, 'POST', '/api/v1/namespaces/default/events', {
        body: { metadata: { name: `e${i}` }, involvedObject: { kind: 'Pod', name: 'subject', namespace: 'default' }, reason: 'Test', message: String(i) },
      });
      expect(r.status).toBe(201);
    }
    const w = openWatch(sim, `${pods}?watch=true&resourceVersion=${from}&timeoutSeconds=1`);
    await w.ended;
    expect(w.events.map((e: { type: string; object: { metadata: { labels?: { v?: string } } } }) => `${e.type} ${e.object.metadata.labels?.v ?? ''}`)).toEqual([
      'MODIFIED one',
    ]);
  });

  it('changes older than the window go once a resource has more than 100 of them', async () => {
    const other = await startTestSim({ historyWindowMs: 1_000 });
    try {
      other.sim.faults.set({ stallNodeAgent: true });
      const path = '/api/v1/namespaces/default/pods';
      await call(other.sim, 'POST', path, { body: pod('busy') });
      const from = Number((await call(other.sim, 'GET', path)).body.metadata.resourceVersion);
      for (let i = 0; i < 110; i++)
        await call(other.sim, 'PATCH', `${path}/busy`, { body: { metadata: { labels: { i: String(i) } } }, contentType: 'application/merge-patch+json' });
      // Within the window (or within 100 changes) the watch resumes; after it, it is expired.
      await new Promise((r) => setTimeout(r, 1_100));
      await call(other.sim, 'PATCH', `${path}/busy`, { body: { metadata: { labels: { i: 'last' } } }, contentType: 'application/merge-patch+json' });
      const old = openWatch(other.sim, `${path}?watch=true&resourceVersion=${from}`);
      await old.ended;
      expect(old.events).toMatchObject([{ type: 'ERROR', object: { code: 410, reason: 'Expired' } }]);
      const recent = Number((await call(other.sim, 'GET', path)).body.metadata.resourceVersion) - 50;
      const fresh = openWatch(other.sim, `${path}?watch=true&resourceVersion=${recent}&timeoutSeconds=1`);
      await fresh.ended;
      expect(fresh.events.filter((e: { type: string }) => e.type === 'MODIFIED')).toHaveLength(50);
    } finally {
      await other.sim.close();
    }
  });
});
