import type { KubernetesListObject, V1Pod } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, type FakeApi, type FakeRequest, json, podObject, startFakeApi } from '../../test/fake-api.ts';
import { resolveOptions } from '../options.ts';
import { Informer, type InformerOptions, trimPod } from './informer.ts';

const PATH = '/api/v1/namespaces/ns/pods';

interface Harness {
  api: FakeApi;
  informer: Informer<V1Pod>;
  upserts: V1Pod[];
  removes: V1Pod[];
  errors: unknown[];
  watches: () => FakeRequest[];
  lists: () => FakeRequest[];
}

let current: Harness | undefined;
afterEach(async () => {
  current?.informer.stop();
  await current?.api.close();
  current = undefined;
});

async function harness(handler: (request: FakeRequest) => void, options: Partial<InformerOptions<V1Pod>> = {}): Promise<Harness> {
  const api = await startFakeApi(handler);
  const upserts: V1Pod[] = [];
  const removes: V1Pod[] = [];
  const errors: unknown[] = [];
  const informer = new Informer<V1Pod>(
    api.kc,
    {
      name: 'pods',
      path: PATH,
      labelSelector: 'app=x',
      list: async (signal) => {
        const response = await fetch(`${api.url}${PATH}?labelSelector=app%3Dx`, { signal });
        if (response.status !== 200) throw Object.assign(new Error(`HTTP ${response.status}`), { statusCode: response.status });
        return (await response.json()) as KubernetesListObject<V1Pod>;
      },
      trim: trimPod,
      silenceMs: 60_000,
      backoffMaxMs: 100,
      ...options,
    },
    { upsert: (pod) => upserts.push(pod), remove: (pod) => removes.push(pod), error: (error) => errors.push(error) },
  );
  const isWatch = (r: FakeRequest): boolean => r.url.searchParams.get('watch') === 'true';
  current = {
    api,
    informer,
    upserts,
    removes,
    errors,
    watches: () => api.requests.filter(isWatch),
    lists: () => api.requests.filter((r) => !isWatch(r)),
  };
  return current;
}

function list(res: FakeRequest['res'], rv: string, items: unknown[] = []): void {
  json(res, 200, { apiVersion: 'v1', kind: 'PodList', metadata: { resourceVersion: rv }, items });
}

function openStream(res: FakeRequest['res']): (type: string, object: unknown) => void {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.flushHeaders();
  return (type, object) => res.write(`${JSON.stringify({ type, object })}\n`);
}

describe('Informer', () => {
  it('lists, then watches from the list version with bookmarks requested, and trims what it caches', async () => {
    const h = await harness(({ url, res }) => {
      if (url.searchParams.get('watch') !== 'true') return list(res, '10', [podObject('a', '9')]);
      const send = openStream(res);
      send('MODIFIED', podObject('a', '11', { status: { phase: 'Succeeded' } }));
    });
    h.informer.start();
    await eventually(() => h.upserts.length === 2);
    const watch = h.watches()[0];
    expect(watch?.url.searchParams.get('resourceVersion')).toBe('10');
    expect(watch?.url.searchParams.get('allowWatchBookmarks')).toBe('true');
    expect(watch?.url.searchParams.get('labelSelector')).toBe('app=x');
    const cached = h.informer.get('a', 'ns');
    expect(cached?.status?.phase).toBe('Succeeded');
    expect(cached?.metadata?.managedFields).toBeUndefined();
    expect(cached?.spec).toBeUndefined();
    expect(JSON.stringify(h.upserts)).not.toContain('hunter2');
  });

  it('reconnects a silent watch after the inactivity timeout it was given, from its resourceVersion, without a relist', async () => {
    // client-node's Watch reconnects after 30 s without data; the API server sends a bookmark about
    // once a minute (staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go, defaultBookmarkFrequency),
    // so the runtime sets the timeout itself (issue 14).
    const h = await harness(
      ({ url, res }) => {
        if (url.searchParams.get('watch') !== 'true') return list(res, '3');
        openStream(res);
      },
      { inactivityTimeoutMs: 300 },
    );
    h.informer.start();
    await eventually(() => h.watches().length >= 2, 3_000);
    expect(h.lists(), 'a timeout resumes, it does not relist').toHaveLength(1);
    expect(h.watches()[1]?.url.searchParams.get('resourceVersion')).toBe('3');
  });

  it("keeps a watch open past client-node's 30 s when bookmarks come every minute: the default timeout is above 60 s", () => {
    expect(resolveOptions().watchInactivityTimeoutMs).toBeGreaterThan(60_000);
    expect(resolveOptions().watchInactivityTimeoutMs).toBeLessThan(resolveOptions().watchSilenceMs);
  });

  it('caches nothing with cache: false, and still hands every object over', async () => {
    const h = await harness(
      ({ url, res }) => {
        if (url.searchParams.get('watch') !== 'true')
          return list(
            res,
            '10',
            Array.from({ length: 100 }, (_, i) => podObject(`p${i}`, '9')),
          );
        const send = openStream(res);
        for (let i = 0; i < 100; i++) send('ADDED', podObject(`w${i}`, String(11 + i)));
      },
      { cache: false },
    );
    h.informer.start();
    await eventually(() => h.upserts.length === 200);
    expect(h.informer.list()).toHaveLength(0);
  });

  it('start() twice opens one list and one watch', async () => {
    const h = await harness(({ url, res }) => {
      if (url.searchParams.get('watch') !== 'true') return list(res, '1');
      openStream(res);
    });
    h.informer.start();
    h.informer.start();
    await eventually(() => h.watches().length >= 1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(h.lists()).toHaveLength(1);
    expect(h.watches()).toHaveLength(1);
  });

  it('stop() during the initial list opens no watch and delivers nothing', async () => {
    let answerList: (() => void) | undefined;
    const h = await harness(({ url, res }) => {
      if (url.searchParams.get('watch') !== 'true') {
        answerList = () => list(res, '5', [podObject('late', '4')]);
        return;
      }
      openStream(res);
    });
    h.informer.start();
    await eventually(() => answerList !== undefined);
    h.informer.stop();
    answerList?.();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(h.watches()).toHaveLength(0);
    expect(h.upserts).toHaveLength(0);
  });

  it('restarts with backoff after a 500 on list, and then syncs', async () => {
    let lists = 0;
    const h = await harness(({ url, res }) => {
      if (url.searchParams.get('watch') !== 'true') {
        lists++;
        if (lists <= 2) return json(res, 500, { kind: 'Status', code: 500, message: 'injected' });
        return list(res, '7', [podObject('a', '7')]);
      }
      openStream(res);
    });
    h.informer.start();
    await eventually(() => h.upserts.length === 1);
    expect(h.errors).toHaveLength(2);
    expect(h.informer.stats.restarts).toBe(2);
    expect(h.informer.synced).toBe(true);
  });

  it('relists after a 410 in the stream and reports what vanished meanwhile', async () => {
    let watches = 0;
    let lists = 0;
    const h = await harness(({ url, res }) => {
      if (url.searchParams.get('watch') !== 'true') {
        lists++;
        return lists === 1 ? list(res, '1', [podObject('a', '1'), podObject('b', '1')]) : list(res, '20', [podObject('a', '15')]);
      }
      watches++;
      const send = openStream(res);
      if (watches === 1) {
        send('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' });
        res.end();
      }
    });
    h.informer.start();
    await eventually(() => h.removes.length === 1);
    expect(h.removes[0]?.metadata?.name).toBe('b');
    expect(h.informer.stats.restarts).toBe(0);
    await eventually(() => h.watches().length === 2);
    expect(h.watches()[1]?.url.searchParams.get('resourceVersion')).toBe('20');
  });

  it('resumes from the last version when the server closes the watch', async () => {
    let watches = 0;
    const h = await harness(({ url, res }) => {
      if (url.searchParams.get('watch') !== 'true') return list(res, '1');
      watches++;
      const send = openStream(res);
      if (watches === 1) {
        send('ADDED', podObject('a', '2'));
        send('BOOKMARK', { kind: 'Pod', apiVersion: 'v1', metadata: { resourceVersion: '30' } });
        res.end();
      }
    });
    h.informer.start();
    await eventually(() => h.watches().length === 2);
    expect(h.watches()[1]?.url.searchParams.get('resourceVersion')).toBe('30');
    expect(h.lists()).toHaveLength(1);
    expect(h.informer.stats.bookmarks).toBe(1);
  });

  it('restarts a watch that stays silent longer than the silence period', async () => {
    const h = await harness(
      ({ url, res }) => {
        if (url.searchParams.get('watch') !== 'true') return list(res, '1');
        openStream(res); // and never a byte more
      },
      { silenceMs: 300 },
    );
    h.informer.start();
    await eventually(() => h.watches().length >= 2, 5_000);
    expect(h.lists().length).toBeGreaterThanOrEqual(2);
    expect(h.informer.stats.restarts).toBeGreaterThanOrEqual(1);
  });

  it('stop() closes the open watch', async () => {
    const h = await harness(({ url, res }) => {
      if (url.searchParams.get('watch') !== 'true') return list(res, '1');
      openStream(res);
    });
    h.informer.start();
    await eventually(() => h.watches().length === 1);
    await eventually(() => h.api.openSockets() >= 1);
    h.informer.stop();
    h.informer.stop();
    const watch = h.watches()[0];
    await eventually(() => watch?.res.closed === true || watch?.req.destroyed === true);
  });
});
