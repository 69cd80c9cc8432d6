/**
 * What one pod's events list costs the real apiserver as its namespace fills with other pods' events
 * (issue 25 item 7): the worker lists `involvedObject.kind=Pod,involvedObject.name=<pod>` when a
 * build needs explaining (a failing pull or start, a slow start, a failed pod). Events have no index by involved object in the apiserver's watch cache (the events
 * registry sets no Indexers: pkg/registry/core/event/storage/storage.go), so a field-selected list,
 * served from the cache (ConsistentListFromCache, GA in 1.34), filters every event of the namespace.
 *
 * In a namespace of its own: posts N events about N other pods, then times `rounds` lists of one
 * pod's events; the namespace is deleted after.
 */
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { createNamespace, deleteNamespace } from './kube-namespace.ts';

/** The time of one pod's events list with `events` other events in the namespace. */
export interface ListCost {
  events: number;
  /** Milliseconds per list, median and 95th percentile. */
  p50: number;
  p95: number;
}

/** Measures list latency at each size in `sizes` (cumulative: the namespace keeps what was posted). */
export async function measureListCost(kubeconfig: string, sizes: readonly number[], rounds = 30): Promise<ListCost[]> {
  const kc = new KubeConfig();
  kc.loadFromString(kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  const namespace = await createNamespace(kc, `berth-bench-events-${process.pid}`);
  const results: ListCost[] = [];
  let posted = 0;
  try {
    for (const size of sizes) {
      while (posted < size) {
        const batch = Math.min(50, size - posted);
        await Promise.all(
          Array.from({ length: batch }, (_, k) => {
            const pod = `other-${posted + k}`;
            return core.createNamespacedEvent({
              namespace,
              body: {
                metadata: { name: `${pod}.0`, namespace },
                involvedObject: { kind: 'Pod', name: pod, namespace },
                reason: 'Pulled',
                message: 'Container image "berth/busybox:1.35" already present on machine',
                type: 'Normal',
                source: { component: 'kubelet' },
              },
            });
          }),
        );
        posted += batch;
      }
      const times: number[] = [];
      for (let i = 0; i < rounds; i++) {
        const started = performance.now();
        await core.listNamespacedEvent({ namespace, fieldSelector: 'involvedObject.kind=Pod,involvedObject.name=the-build-pod' });
        times.push(performance.now() - started);
      }
      times.sort((a, b) => a - b);
      results.push({ events: size, p50: times[Math.floor(rounds / 2)] ?? 0, p95: times[Math.floor(rounds * 0.95)] ?? 0 });
      console.error(`[kube-fleet-scaling] real apiserver, ${size} events in the namespace: list p50 ${results.at(-1)?.p50.toFixed(1)} ms`);
    }
  } finally {
    await deleteNamespace(kc, namespace);
  }
  return results;
}
