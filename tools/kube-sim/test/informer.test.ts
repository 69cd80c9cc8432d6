import { ListWatch, Watch, type V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { pod, waitFor, type TestSim, useTestSim } from './helpers.ts';

describe('client-node informer against kube-sim', () => {
  let t: TestSim;
  useTestSim((sim) => (t = sim));

  it('a ListWatch informer sees add, update (running, then terminated with exit code) and delete', async () => {
    const selector = 'suite=informer';
    const listFn = () => t.core.listNamespacedPod({ namespace: 'default', labelSelector: selector });
    const informer = new ListWatch<V1Pod>('/api/v1/namespaces/default/pods', new Watch(t.kc), listFn, false, selector);
    const seen: string[] = [];
    const updates: V1Pod[] = [];
    informer.on('add', (p) => seen.push(`add ${p.metadata?.name}`));
    informer.on('update', (p) => updates.push(p));
    informer.on('delete', (p) => seen.push(`delete ${p.metadata?.name}`));
    informer.on('error', (err) => seen.push(`error ${String(err)}`));
    await informer.start();
    try {
      // Not matching the selector: never seen.
      await t.core.createNamespacedPod({ namespace: 'default', body: pod('other', { args: ['true'], labels: { suite: 'elsewhere' } }) });
      const created = await t.core.createNamespacedPod({
        namespace: 'default',
        body: {
          ...pod('', { args: ['sh', '-c', 'echo hi; sleep 1; exit 3'], labels: { suite: 'informer' } }),
          metadata: { generateName: 'inf-', labels: { suite: 'informer' } },
        },
      });
      const name = created.metadata?.name ?? '';
      expect(name).toMatch(/^inf-[a-z0-9]{5}$/);
      await waitFor('add', () => seen.includes(`add ${name}`));
      const running = await waitFor('running', () => updates.find((p) => p.status?.containerStatuses?.[0]?.state?.running));
      expect(running.status?.phase).toBe('Running');
      expect(running.status?.podIP).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      const failed = await waitFor('failed', () => updates.find((p) => p.status?.phase === 'Failed'));
      const term = failed.status?.containerStatuses?.[0]?.state?.terminated;
      expect(term?.exitCode).toBe(3);
      expect(term?.reason).toBe('Error');
      expect(term?.finishedAt).toBeTruthy();
      await t.core.deleteNamespacedPod({ namespace: 'default', name });
      await waitFor('delete', () => seen.includes(`delete ${name}`));
      expect(seen.filter((s) => s.includes('other'))).toEqual([]);
      expect(seen.filter((s) => s.startsWith('error'))).toEqual([]);
      // Resource versions the informer saw only grow.
      const rvs = updates.map((p) => Number(p.metadata?.resourceVersion));
      expect([...rvs].sort((a, b) => a - b)).toEqual(rvs);
    } finally {
      await informer.stop();
      await t.core.deleteNamespacedPod({ namespace: 'default', name: 'other', gracePeriodSeconds: 0 }).catch(() => undefined);
    }
  });
});
