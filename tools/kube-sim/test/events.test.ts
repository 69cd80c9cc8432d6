// The kubelet's event correlation: client-go's EventCorrelator
// (kubernetes/kubernetes staging/src/k8s.io/client-go/tools/record/events_cache.go): spam filter
// (EventSourceObjectSpamFilter, burst 25 then one per 5 min per source + object), aggregation
// (EventAggregator, "(combined from similar events)") and deduplication (eventLogger, count).

import { type V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { EventRecorder } from '../src/agent/event-recorder.ts';
import { Store } from '../src/store.ts';
import { type CoreEvent, type Pod } from '../src/types.ts';
import { busybox, startTestSim, waitFor, type TestSim, useTestSim } from './helpers.ts';

function fixture(): { store: Store; recorder: EventRecorder; pod: Pod; advance: (ms: number) => void; events: () => CoreEvent[] } {
  let now = Date.parse('2026-12-03T08:00:00Z');
  const store = new Store(1000);
  const recorder = new EventRecorder(store, 'node-1', undefined, () => now);
  const pod: Pod = { metadata: { name: 'p', namespace: 'default', uid: 'uid-1' }, spec: { containers: [] } };
  const events = (): CoreEvent[] => store.list('events', { labels: [], fields: [] }).items as CoreEvent[];
  return { store, recorder, pod, advance: (ms) => (now += ms), events };
}

describe('event spam filter (events_cache.go EventSourceObjectSpamFilter, defaultSpamBurst 25, defaultSpamQPS 1/300)', () => {
  it('writes 25 events about one object from one source, then one per 5 minutes; other sources and objects have their own bucket', () => {
    const { recorder, pod, advance, events } = fixture();
    for (let i = 0; i < 40; i++) recorder.record(pod, { type: 'Normal', reason: `R${i}`, message: `m${i}`, fieldPath: `spec.containers{c${i % 8}}` });
    expect(events()).toHaveLength(25);
    expect(events().map((e) => e.reason)).not.toContain('R25');
    // Another source about the same pod, and the same source about another pod: not throttled.
    recorder.record(pod, { type: 'Normal', reason: 'Scheduled', message: 'assigned', component: 'default-scheduler' });
    recorder.record({ ...pod, metadata: { ...pod.metadata, name: 'q', uid: 'uid-2' } }, { type: 'Normal', reason: 'Started', message: 'x' });
    expect(events()).toHaveLength(27);
    advance(299_000);
    recorder.record(pod, { type: 'Warning', reason: 'Failed', message: 'Error: ErrImagePull' });
    expect(events()).toHaveLength(27);
    advance(2_000);
    recorder.record(pod, { type: 'Warning', reason: 'Failed', message: 'Error: ErrImagePull' });
    expect(events()).toHaveLength(28);
    // The dropped repeat was still counted (eventObserve runs before the filter).
    const failed = events().find((e) => e.reason === 'Failed');
    expect(failed?.count).toBe(2);
  });

  it('with no spam filter (lenient) writes them all', () => {
    const store = new Store(1000);
    const recorder = new EventRecorder(store, 'node-1', null);
    const pod: Pod = { metadata: { name: 'p', namespace: 'default', uid: 'uid-1' }, spec: { containers: [] } };
    for (let i = 0; i < 40; i++) recorder.record(pod, { type: 'Normal', reason: `R${i}`, message: `m${i}` });
    expect(store.list('events', { labels: [], fields: [] }).items).toHaveLength(40);
  });

  it('names events <object>.<Unix nanoseconds in hex> (client-go tools/record/event.go, makeEvent): a list returns them in the order they were made', () => {
    const { recorder, pod, events, advance } = fixture();
    // Two in the same millisecond, then 10 ms later: still in order.
    for (const reason of ['Pulling', 'Pulled']) recorder.record(pod, { type: 'Normal', reason, message: reason });
    advance(10);
    recorder.record(pod, { type: 'Normal', reason: 'Created', message: 'Created' });
    const listed = events();
    expect(listed.map((e) => e.reason)).toEqual(['Pulling', 'Pulled', 'Created']);
    expect(listed[0]?.metadata.name).toBe(`p.${(BigInt(Date.parse('2026-12-03T08:00:00Z')) * 1_000_000n).toString(16)}`);
  });
});

describe('event aggregation and deduplication (events_cache.go EventAggregator.EventAggregate, eventLogger.eventObserve)', () => {
  it('counts identical events in one object; the 10th distinct message of a reason becomes "(combined from similar events)"', () => {
    const { recorder, pod, events } = fixture();
    for (let i = 0; i < 3; i++)
      recorder.record(pod, { type: 'Normal', reason: 'BackOff', message: 'Back-off pulling image "x"', fieldPath: 'spec.containers{a}' });
    expect(events().map((e) => [e.reason, e.count])).toEqual([['BackOff', 3]]);
    for (let i = 0; i < 12; i++) recorder.record(pod, { type: 'Normal', reason: 'Created', message: `Created container: c${i}` });
    const created = events().filter((e) => e.reason === 'Created');
    const combined = created.filter((e) => e.message?.startsWith('(combined from similar events): '));
    expect(created).toHaveLength(10);
    expect(combined).toHaveLength(1);
    expect(combined[0]).toMatchObject({ count: 3, message: '(combined from similar events): Created container: c11' });
  });
});

describe('event spam filter on a running pod', () => {
  let t: TestSim;
  useTestSim((sim) => (t = sim));

  const tenSteps = (name: string): V1Pod => ({
    metadata: { name },
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 1,
      containers: Array.from({ length: 10 }, (_, i) => ({ name: `c${i}`, image: busybox, args: ['true'] })),
    },
  });
  const kubeletEvents = async (sim: TestSim, name: string): Promise<{ count: number; text: string[] }> => {
    const items = (await sim.core.listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.name=${name}` })).items;
    const kubelet = items.filter((e) => e.source?.component === 'kubelet');
    return { count: kubelet.reduce((n, e) => n + (e.count ?? 1), 0), text: items.map((e) => `${e.reason ?? ''} ${e.message ?? ''}`) };
  };

  it('a pod with 10 containers (30 kubelet events) loses the last 5; the scheduler`s event is kept', async () => {
    await t.core.createNamespacedPod({ namespace: 'default', body: tenSteps('ten') });
    await waitFor('done', async () => (await t.core.readNamespacedPod({ namespace: 'default', name: 'ten' })).status?.phase === 'Succeeded');
    const { count, text } = await kubeletEvents(t, 'ten');
    expect(count).toBe(25);
    expect(text).toContain('Scheduled Successfully assigned default/ten to kube-sim-node');
    expect(text.filter((e) => e.startsWith('Started'))).not.toContain('Started Started container c9');
    await t.core.deleteNamespacedPod({ namespace: 'default', name: 'ten', gracePeriodSeconds: 0 });
  });

  it('with lenient.noEventSpamFilter every event is written', async () => {
    const lenient = await startTestSim({ lenient: { noEventSpamFilter: true } });
    try {
      await lenient.core.createNamespacedPod({ namespace: 'default', body: tenSteps('ten') });
      await waitFor('done', async () => (await lenient.core.readNamespacedPod({ namespace: 'default', name: 'ten' })).status?.phase === 'Succeeded');
      expect((await kubeletEvents(lenient, 'ten')).count).toBe(30);
    } finally {
      await lenient.sim.close();
    }
  });
});
