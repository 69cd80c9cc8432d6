import type { CoreV1Event } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { PodEventLister } from './pod-events.ts';

function event(name: string, first: string): CoreV1Event {
  return { metadata: { name }, involvedObject: { kind: 'Pod', name: 'pod' }, firstTimestamp: new Date(first) };
}

describe('PodEventLister', () => {
  it('runs one list at a time: requests while one runs make one more list after it, not a queue', async () => {
    const fed: string[] = [];
    const lister = new PodEventLister((e) => fed.push(e.metadata?.name ?? ''));
    let calls = 0;
    let release: () => void = () => undefined;
    lister.use(() => {
      calls++;
      return new Promise((resolve) => (release = () => resolve([event(`e${calls}`, '2026-12-04T00:00:00Z')])));
    });
    const first = lister.refresh();
    const second = lister.refresh();
    const third = lister.refresh();
    expect(calls).toBe(1);
    release();
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(calls, 'one more for the two requests made while the first ran').toBe(2);
    release();
    await Promise.all([first, second, third]);
    expect(calls).toBe(2);
    expect(fed).toEqual(['e1', 'e2']);
  });

  it('feeds events in the order they were first recorded, whatever the order of the list', async () => {
    const fed: string[] = [];
    const lister = new PodEventLister((e) => fed.push(e.metadata?.name ?? ''));
    lister.use(() => Promise.resolve([event('b', '2026-12-04T00:00:02Z'), event('a', '2026-12-04T00:00:01Z')]));
    await lister.refresh();
    expect(fed).toEqual(['a', 'b']);
  });

  it('refresh(bound) resolves after the bound when the list hangs, and a failed list feeds nothing', async () => {
    const lister = new PodEventLister(() => undefined);
    lister.use(() => new Promise(() => undefined));
    const started = performance.now();
    await lister.refresh(50);
    expect(performance.now() - started).toBeLessThan(1_000);
    const failing = new PodEventLister(() => {
      throw new Error('fed');
    });
    failing.use(() => Promise.reject(new Error('503')));
    await expect(failing.refresh()).resolves.toBeUndefined();
    failing.dispose();
    lister.dispose();
  });
});
