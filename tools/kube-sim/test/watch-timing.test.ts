// Rule 6: bookmarks about once a minute, as the API server's watch cache sends them
// (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go
// defaultBookmarkFrequency = time.Minute; cache_watcher.go nextBookmarkTime: one more 2 s before
// the watch's deadline), and what that does to @kubernetes/client-node 2.x, whose Watch aborts a
// watch that has been quiet for requestTimeoutMs (30 s) and ListWatch silently re-opens it.
// Time-compressed by 10: client timeout 3 s against 6 s bookmarks (30 s against 60 s).

import { type KubeConfig, ListWatch, Watch, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeSim } from '../src/index.ts';
import { openWatch } from './http.ts';
import { startTestSim, waitFor, type TestSim } from './helpers.ts';

const pods = '/api/v1/namespaces/default/pods';

describe('bookmarks with the default period (cache_watcher.go nextBookmarkTime, cacher.go defaultBookmarkFrequency)', () => {
  let sim: KubeSim;
  beforeAll(async () => {
    ({ sim } = await startTestSim());
    sim.faults.set({ stallNodeAgent: true });
  });
  afterAll(async () => {
    await sim.close();
  });

  it('sends no bookmark for a minute, but one 2 s before the watch deadline', async () => {
    const opened = Date.now();
    const w = openWatch(sim, `${pods}?watch=true&allowWatchBookmarks=true&timeoutSeconds=14`);
    const arrivals: number[] = [];
    const seen = setInterval(() => {
      while (arrivals.length < w.events.length) arrivals.push(Date.now());
    }, 20);
    await w.ended;
    clearInterval(seen);
    while (arrivals.length < w.events.length) arrivals.push(Date.now());
    expect(w.events.map((e: { type: string }) => e.type)).toEqual(['BOOKMARK']);
    // Not at 10 s (kube-sim's old period): at the deadline (14 s) minus 2 s.
    expect((arrivals[0] ?? 0) - opened).toBeGreaterThanOrEqual(11_900);
  });
});

/** A Watch that asks for bookmarks (as the Kubernetes runtime's does), with a compressed client timeout. */
class BookmarkWatch extends Watch {
  constructor(kc: KubeConfig, timeoutMs: number) {
    super(kc);
    // client-node's field is private in its types; the timer reads it on every watch.
    (this as unknown as { requestTimeoutMs: number }).requestTimeoutMs = timeoutMs;
  }
  override watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    return super.watch(path, { ...queryParams, allowWatchBookmarks: true }, callback, done);
  }
}

describe('client-node 2.x watch inactivity timeout against the bookmark period', () => {
  const quietFor = async (t: TestSim, ms: number): Promise<{ opened: number; errors: string[] }> => {
    const selector = 'quiet=yes';
    const listFn = () => t.core.listNamespacedPod({ namespace: 'default', labelSelector: selector });
    const informer = new ListWatch<V1Pod>(pods, new BookmarkWatch(t.kc, 3_000), listFn, false, selector);
    const errors: string[] = [];
    informer.on('error', (err) => errors.push(String(err)));
    await informer.start();
    await waitFor('watch open', () => t.sim.counters.snapshot().watches.open === 1);
    const before = t.sim.counters.snapshot().watches.opened;
    await new Promise((r) => setTimeout(r, ms));
    const opened = t.sim.counters.snapshot().watches.opened - before;
    await informer.stop();
    return { opened, errors };
  };

  it('a quiet watch is re-opened after the client timeout when bookmarks come less often (3 s vs 6 s, i.e. 30 s vs the faithful 60 s)', async () => {
    const t = await startTestSim({ bookmarkIntervalMs: 6_000 });
    try {
      t.sim.faults.set({ stallNodeAgent: true });
      // 7 s quiet: the 3 s client timeout fires at least twice before the first bookmark (6 s).
      const { opened, errors } = await quietFor(t, 7_000);
      expect(opened).toBeGreaterThanOrEqual(1);
      expect(errors).toEqual([]);
    } finally {
      await t.sim.close();
    }
  });

  it('bookmarks more often than the client timeout keep the watch open (2 s vs 3 s)', async () => {
    const t = await startTestSim({ bookmarkIntervalMs: 2_000 });
    try {
      t.sim.faults.set({ stallNodeAgent: true });
      const { opened, errors } = await quietFor(t, 7_000);
      expect(opened).toBe(0);
      expect(errors).toEqual([]);
    } finally {
      await t.sim.close();
    }
  });
});
