// The runtime against kube-sim where a real kubelet is inconvenient (issue 14): a service stopped by
// swapping the pause image back in, a removal whose destroy ctx ran out, pull failures under
// restartPolicy Never. Each case cites the kubelet source it depends on.
import { describe, expect, it } from 'vitest';
import { background, withCancel, withTimeout } from '@berth/context';
import { isRuntimeError, type RuntimeErrorCode } from '@berth/runtime';
import { conformanceStep, setupBuildResources, teardownBuild } from '@berth/runtime-conformance';
import { containerNameOf, podNameOf } from '../src/index.ts';
import { buildOf, PAUSE, useSim } from './helpers.ts';

const fx = useSim();
const { runtimeFor } = fx;

function podNames(): Promise<string[]> {
  return fx
    .core()
    .listNamespacedPod({ namespace: 'default' })
    .then((list) => list.items.map((pod) => pod.metadata?.name ?? ''));
}

/** Collects a Readable's text and notes when it ended (or failed). */
function collect(stream: NodeJS.ReadableStream): { text: () => string; ended: Promise<'end' | Error> } {
  let text = '';
  stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
  const ended = new Promise<'end' | Error>((resolve) => {
    stream.on('end', () => resolve('end'));
    stream.on('error', (error: Error) => resolve(error));
  });
  return { text: () => text, ended };
}

describe('a running service removed by swapping the pause image back in', () => {
  // The kubelet restarts a container whose spec (image) changed regardless of restartPolicy
  // (pkg/kubelet/kuberuntime/kuberuntime_manager.go, computePodActions: "Restart regardless of the
  // restart policy because the container spec changed"), so after removeContainer the container of
  // that name is the pause image; its log (pkg/kubelet/kubelet_pods.go, validateContainerLogStatus)
  // is the pause's, and the service's is only reachable with previous=true.
  it('ends its log stream once the container is replaced, with every line the service wrote', async () => {
    const stopGraceMs = 1_000;
    const runtime = await runtimeFor({ stopGraceMs });
    const { build, steps } = buildOf(1, () => ['echo service-up', 'i=0; while true; do i=$((i+1)); echo "tick $i"; sleep 0.2; done'], { detach: true });
    const service = steps[0]!;
    const ctx = background();
    await setupBuildResources(ctx, runtime, build);
    await runtime.runContainer(ctx, service, build);
    const log = collect(await runtime.tailContainer(ctx, service));
    for (let waited = 0; !log.text().includes('tick 3') && waited < 30_000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(log.text()).toContain('tick 3');
    await runtime.removeContainer(ctx, service);
    const removedAt = performance.now();
    // Bound: the pod's grace (stopGraceMs) is already spent inside removeContainer; what remains is
    // one status update and one non-following log read. Without the fix the stream follows the pause
    // container forever.
    const outcome = await Promise.race([log.ended, new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 10_000))]);
    expect(outcome, 'the service log stream ended after its removal').toBe('end');
    console.log(`service log ended ${Math.round(performance.now() - removedAt)} ms after removeContainer`);
    const ticks = [...log.text().matchAll(/^tick (\d+)$/gm)].map((m) => Number(m[1]));
    expect(log.text().startsWith('service-up\n'), 'the first line came through').toBe(true);
    expect(ticks, 'every tick once, in order').toEqual(ticks.map((_, i) => i + 1));
    await teardownBuild(ctx, runtime, build);
    expect(await podNames()).not.toContain(podNameOf(build.id));
  });
});

describe('a pull failure in step 2 of 3 under restartPolicy Never', () => {
  // Step 2 starts by switching its container's image from pause to the step's. Under
  // restartPolicy Never the kubelet does not restart a container that exited
  // (kubernetes/kubernetes pkg/kubelet/container/helpers.go, ShouldContainerBeRestarted: "Never"
  // → false), so when the new image cannot be pulled the status keeps the terminated pause container
  // with its old restart count and no ErrImagePull waiting state ever shows: only the kubelet's
  // Warning event says why. Waiting out the pull grace for a retry would wait for nothing.
  const pullGraceMs = 30_000;
  const cases: [string, string, RuntimeErrorCode, RegExp, string | undefined][] = [
    [
      'a missing image',
      'berth/step2-missing:1',
      'ImageNotFound',
      /restartPolicy Never.*restart count still 0.*docker\.io\/berth\/step2-missing:1.*not found/,
      undefined,
    ],
    [
      'an injected ErrImagePull',
      'berth/step2-fault:1',
      'ImagePullFailed',
      /restartPolicy Never.*restart count still 0.*registry unreachable \(injected\)/,
      'docker.io/berth/step2-fault:1',
    ],
  ];
  it.each(cases)(
    "%s fails step 2 before the pull grace, with the kubelet's message; step 3 is never started",
    async (_name, image, code, message, fault) => {
      if (fault !== undefined) fx.sim().faults.set({ imagePullFailures: { [fault]: { reason: 'ErrImagePull', message: 'registry unreachable (injected)' } } });
      const runtime = await runtimeFor({}, { pullGraceMs });
      const { build, steps } = buildOf(3, (i) => [`echo step-${i + 1}`]);
      steps[1] = conformanceStep(build, 's1', 2, { image, script: ['echo never'] });
      build.steps = steps;
      const ctx = background();
      await setupBuildResources(ctx, runtime, build);
      await runtime.runContainer(ctx, steps[0]!, build);
      expect(await runtime.waitContainer(ctx, steps[0]!)).toMatchObject({ exitCode: 0 });
      const started = performance.now();
      const [run, wait] = await Promise.allSettled([runtime.runContainer(ctx, steps[1], build), runtime.waitContainer(ctx, steps[1])]);
      const elapsed = performance.now() - started;
      for (const outcome of [run, wait]) {
        const reason = outcome.status === 'rejected' ? (outcome.reason as Error) : undefined;
        expect(isRuntimeError(reason, code), String(reason)).toBe(true);
        expect(reason?.message).toMatch(message);
      }
      console.log(`step 2 failed ${Math.round(elapsed)} ms after runContainer (pull grace ${pullGraceMs} ms)`);
      expect(elapsed, 'no wait for a retry that never comes').toBeLessThan(pullGraceMs);
      // Step 3's container is still the pause container: nothing of it ran.
      const pod = await runtime.api.core.readNamespacedPod(
        { name: podNameOf(build.id), namespace: 'default' },
        runtime.api.requestOptions(new AbortController().signal),
      );
      const third = containerNameOf(steps[2]!.id);
      expect(pod.spec?.containers.find((c) => c.name === third)?.image, 'step 3 still has the pause image').toBe(PAUSE);
      expect(pod.status?.containerStatuses?.find((c) => c.name === third)?.restartCount, 'step 3 never restarted').toBe(0);
      await teardownBuild(ctx, runtime, build);
      expect(await podNames(), 'no pod left').not.toContain(podNameOf(build.id));
    },
    120_000,
  );
});

describe('removeBuild', () => {
  it('deletes the pod even when the destroy ctx already ran out', async () => {
    const runtime = await runtimeFor();
    const { build, steps } = buildOf(1, () => ['sleep 60']);
    const ctx = background();
    await setupBuildResources(ctx, runtime, build);
    await runtime.runContainer(ctx, steps[0]!, build);
    const [expired, cancel] = withCancel(background());
    cancel();
    await expect(runtime.removeBuild(expired, build)).rejects.toMatchObject({ code: 'Canceled' });
    // The delete request went out: the pod disappears without a reap.
    const [bounded, done] = withTimeout(background(), 20_000);
    try {
      while ((await podNames()).includes(podNameOf(build.id))) {
        if (bounded.signal.aborted) break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    } finally {
      done();
    }
    expect(await podNames(), 'no pod left').not.toContain(podNameOf(build.id));
  });
});

describe("the pod events of a worker in a namespace shared with other workers' builds", () => {
  // Events carry no labels the kubelet would copy from the pod, and their field selectors
  // (kubernetes/kubernetes pkg/registry/core/event/strategy.go, EventToSelectableFields:
  // involvedObject.kind/namespace/name/uid/apiVersion/resourceVersion/fieldPath, reason, source,
  // type) name no worker: a namespace-wide events watch receives every pod's events, W workers' worth
  // (issue 25 item 7). The worker lists its own pod's events by name instead, and only when something
  // needs explaining: here a step whose image cannot be pulled (under restartPolicy Never a start
  // failure, explained by the kubelet's Failed event).
  it("receives none of 1,000 foreign pods' events, and still reports its own pod's as notices when a step needs explaining", async () => {
    const events: string[] = [];
    const runtime = await runtimeFor({ onEvent: (event) => events.push(event.type === 'notice' ? event.message : '') });
    const { build, steps } = buildOf(1, () => ['true'], { image: 'berth/tracked-missing:1' });
    const ctx = background();
    await setupBuildResources(ctx, runtime, build);
    // The runtime's own client: its shared dispatcher keeps connections alive (one TLS handshake, not 1,000).
    const core = runtime.api.core;
    const options = runtime.api.requestOptions(new AbortController().signal);
    const post = (podName: string, i: number, message: string) =>
      core.createNamespacedEvent(
        {
          namespace: 'default',
          body: {
            metadata: { name: `${podName}.${i}`, namespace: 'default' },
            involvedObject: { kind: 'Pod', name: podName, namespace: 'default' },
            reason: 'Pulled',
            message,
            type: 'Normal',
            source: { component: 'kubelet' },
          },
        },
        options,
      );
    fx.sim().counters.reset();
    // 1,000 pods of other workers (9 workers' worth of builds with their events).
    const foreignPods = 1_000;
    const posting = performance.now();
    for (let batch = 0; batch < foreignPods; batch += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, k) => post(`foreign-${batch + k}`, 0, 'Container image "x" already present on machine')));
    }
    console.log(`posted ${foreignPods} foreign events in ${Math.round(performance.now() - posting)} ms`);
    await post(podNameOf(build.id), 0, 'tracked pod event');
    const step = steps[0]!;
    await expect(runtime.runContainer(ctx, step, build)).rejects.toMatchObject({ code: 'ImageNotFound' });
    await expect(runtime.waitContainer(ctx, step)).rejects.toThrow(/berth\/tracked-missing:1.*not found/);
    for (let waited = 0; !events.includes('tracked pod event') && waited < 10_000; waited += 100) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const counters = fx.sim().counters.snapshot();
    const eventBytes = (counters.bytesByVerbResource['watch events'] ?? 0) + (counters.bytesByVerbResource['list events'] ?? 0);
    const foreignBytes = counters.bytesByVerbResource['create events'] ?? 0;
    console.log(
      `events sent to the worker: ${counters.watchEventsByResource.events ?? 0} on watches, ${eventBytes} bytes (watch + list); the posted events were ${foreignBytes} bytes`,
    );
    // Old design: the namespace-wide watch carried all 1,001 events (about as many bytes as were posted).
    expect(counters.watchEventsByResource.events ?? 0, 'no foreign event reached the worker').toBeLessThan(50);
    expect(eventBytes, 'event bytes sent to the worker: its own pod only').toBeLessThan(foreignBytes / 20);
    expect(events, "the tracked pod's event still arrives").toContain('tracked pod event');
    expect(
      events.some((message) => /Failed to pull image .*berth\/tracked-missing:1/.test(message)),
      `the kubelet's pull error is a notice: ${JSON.stringify(events)}`,
    ).toBe(true);
    expect(runtime.podTracker.eventLists.lists, 'listed for the failure only (the start failure and its settle)').toBeLessThanOrEqual(3);
    await teardownBuild(ctx, runtime, build);
  }, 120_000);
});
