/* eslint-disable @typescript-eslint/no-unsafe-member-access -- wire-level tests read untyped JSON */
// pods/log: follow, timestamps, sinceTime resume without duplicates after a cut, tailLines,
// previous, stdout+stderr in one stream, errors.

import { PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { busybox, pause, waitFor, type TestSim, useTestSim } from './helpers.ts';
import { call, openText } from './http.ts';

let t: TestSim;
useTestSim((sim) => (t = sim));

const ns = 'default';
const stamped = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z) (.*)$/;

function counter(name: string, lines: number, sleep = '0.3'): V1Pod {
  return {
    metadata: { name },
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'main',
          image: busybox,
          command: [
            'sh',
            '-c',
            `i=1; while [ $i -le ${lines} ]; do echo "line $i"; [ $((i % 3)) -eq 0 ] && echo "err $i" >&2; i=$((i+1)); sleep ${sleep}; done`,
          ],
        },
        { name: 'side', image: pause },
      ],
    },
  };
}

const logPath = (name: string, q: string) => `/api/v1/namespaces/${ns}/pods/${name}/log?container=main&${q}`;

describe('pods/log', () => {
  it('follows until the container ends, merging stdout and stderr, with fixed-width RFC3339Nano timestamps', async () => {
    await t.core.createNamespacedPod({ namespace: ns, body: counter('follow', 6) });
    await waitFor(
      'started',
      async () => (await t.core.readNamespacedPod({ namespace: ns, name: 'follow' })).status?.containerStatuses?.find((c) => c.name === 'main')?.state?.running,
    );
    const s = openText(t.sim, logPath('follow', 'follow=true&timestamps=true'));
    expect(await s.status).toBe(200);
    expect(await s.ended).toBe(true);
    const lines = s.text().trim().split('\n');
    expect(lines.every((l) => stamped.test(l))).toBe(true);
    const content = lines.map((l) => stamped.exec(l)?.[2]);
    expect(content.filter((c) => c?.startsWith('line'))).toEqual(['line 1', 'line 2', 'line 3', 'line 4', 'line 5', 'line 6']);
    expect(content.filter((c) => c?.startsWith('err'))).toEqual(['err 3', 'err 6']);
    // Without timestamps: plain lines. tailLines: the last ones.
    const plain = await call(t.sim, 'GET', logPath('follow', 'tailLines=2'));
    expect(plain.text.trim().split('\n').sort()).toEqual(['err 6', 'line 6']);
    // A pod with two containers needs a container name.
    const noContainer = await call(t.sim, 'GET', `/api/v1/namespaces/${ns}/pods/follow/log`);
    expect(noContainer.status).toBe(400);
    expect(noContainer.body.message).toBe('a container name must be specified for pod follow, choose one of: [main side]');
    expect((await call(t.sim, 'GET', logPath('follow', 'previous=true'))).body.message).toBe('previous terminated container "main" in pod "follow" not found');
    await t.core.deleteNamespacedPod({ namespace: ns, name: 'follow', gracePeriodSeconds: 0 });
  });

  it('a stream cut by the log fault is resumed with sinceTime, and timestamps let the client drop what it already has', async () => {
    await t.core.createNamespacedPod({ namespace: ns, body: counter('resume', 16, '0.4') });
    await waitFor(
      'started',
      async () => (await t.core.readNamespacedPod({ namespace: ns, name: 'resume' })).status?.containerStatuses?.find((c) => c.name === 'main')?.state?.running,
    );
    t.sim.faults.set({ logCutAfterBytes: 300 });
    const before = t.sim.counters.snapshot().logs.bytes;
    const got: string[] = [];
    let last: string | undefined;
    const seen = new Set<string>();
    let cuts = 0;
    for (let attempt = 0; attempt < 200; attempt++) {
      const q = `follow=true&timestamps=true${last ? `&sinceTime=${encodeURIComponent(last)}` : ''}`;
      const s = openText(t.sim, logPath('resume', q));
      expect(await s.status).toBe(200);
      const clean = await s.ended;
      const text = s.text();
      // Only complete lines count; a cut may leave half a line.
      const complete = text.endsWith('\n') ? text : text.slice(0, text.lastIndexOf('\n') + 1);
      for (const line of complete.split('\n').filter(Boolean)) {
        const m = stamped.exec(line);
        if (!m?.[1]) continue;
        // The engine stamps stdout and stderr in two copiers, so a line can carry an earlier
        // timestamp than the one before it: drop what was seen, not what is older.
        if (seen.has(line)) continue;
        seen.add(line);
        got.push(m[2] ?? '');
        if (!last || m[1] > last) last = m[1];
      }
      if (clean) break;
      cuts++;
    }
    t.sim.faults.set({ logCutAfterBytes: null });
    // Resuming needs fewer than 300 bytes logged within one second (sinceTime has whole-second precision).
    expect(cuts, got.join('|')).toBeGreaterThanOrEqual(1);
    expect(got.filter((l) => l.startsWith('line'))).toEqual(Array.from({ length: 16 }, (_, i) => `line ${i + 1}`));
    expect(got.filter((l) => l.startsWith('err'))).toEqual(['err 3', 'err 6', 'err 9', 'err 12', 'err 15']);
    expect(t.sim.counters.snapshot().logs.bytes).toBeGreaterThan(before);
    // sinceTime is honoured at whole seconds, as the API server forwards it.
    const all = (await call(t.sim, 'GET', logPath('resume', 'timestamps=true'))).text.trim().split('\n');
    const third = stamped.exec(all[all.length - 1] ?? '')?.[1] ?? '';
    const since = (await call(t.sim, 'GET', logPath('resume', `timestamps=true&sinceTime=${encodeURIComponent(third)}`))).text.trim().split('\n');
    expect(since.every((l) => (stamped.exec(l)?.[1] ?? '') >= `${third.slice(0, 19)}.000000000Z`)).toBe(true);
    await t.core.deleteNamespacedPod({ namespace: ns, name: 'resume', gracePeriodSeconds: 0 });
  });

  it('serves the previous container after an image patch restarted it', async () => {
    await t.core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'prev' },
        spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: pause, args: ['sh', '-c', 'echo second run'] }] },
      },
    });
    await waitFor('running', async () => (await t.core.readNamespacedPod({ namespace: ns, name: 'prev' })).status?.containerStatuses?.[0]?.state?.running);
    await t.core.patchNamespacedPod(
      { namespace: ns, name: 'prev', body: { spec: { containers: [{ name: 'main', image: busybox }] } } },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );
    await waitFor(
      'terminated',
      async () => (await t.core.readNamespacedPod({ namespace: ns, name: 'prev' })).status?.containerStatuses?.[0]?.state?.terminated,
    );
    expect(await t.core.readNamespacedPodLog({ namespace: ns, name: 'prev' })).toBe('second run\n');
    expect((await call(t.sim, 'GET', `/api/v1/namespaces/${ns}/pods/prev/log?previous=true`)).status).toBe(200);
    await t.core.deleteNamespacedPod({ namespace: ns, name: 'prev', gracePeriodSeconds: 0 });
  });
});
