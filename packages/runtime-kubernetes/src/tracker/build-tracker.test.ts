import type { CoreV1Event, V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { background, withCancel } from '@berth/context';
import { isRuntimeError, type RuntimeEvent } from '@berth/runtime';
import { BuildTracker } from './build-tracker.ts';
import { sameImage, START_FAILURE_LIST_BOUND_MS, START_FAILURE_SETTLE_MS } from './container-tracker.ts';

const PAUSE = 'berth/pause:1';
const STEP = 'docker.io/library/alpine:3.20';
const trackers: BuildTracker[] = [];
afterEach(() => {
  for (const t of trackers.splice(0)) t.dispose();
});

function tracker(options: { pullGraceMs?: number; pendingTimeoutMs?: number; slowStartMs?: number; events?: RuntimeEvent[] } = {}): BuildTracker {
  const t = new BuildTracker({
    buildId: 'org_repo_1',
    podName: 'pod',
    pauseImage: PAUSE,
    pullGraceMs: options.pullGraceMs ?? 60_000,
    pendingTimeoutMs: options.pendingTimeoutMs ?? 60_000,
    slowStartMs: options.slowStartMs,
    onEvent: options.events ? (e) => options.events?.push(e) : undefined,
  });
  trackers.push(t);
  return t;
}

function status(
  name: string,
  image: string,
  state: V1ContainerStatus['state'],
  restartCount = 0,
  lastState: V1ContainerStatus['lastState'] = {},
): V1ContainerStatus {
  return { name, image, imageID: '', ready: false, restartCount, state, lastState };
}

function pod(statuses: V1ContainerStatus[], phase = 'Running', uid = 'u1'): V1Pod {
  return { metadata: { name: 'pod', namespace: 'ns', uid }, status: { phase, containerStatuses: statuses } };
}

const pauseRunning = { running: { startedAt: new Date() } };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('ContainerTracker (through BuildTracker)', () => {
  it('ignores the pause container, then reports the step running and its exit', () => {
    const t = tracker();
    const c = t.addContainer('step_a', 'a');
    t.observePod(pod([status('a', PAUSE, pauseRunning)]));
    expect(c.status()).toEqual({ state: 'created' });
    c.markRequested(STEP);
    // The kubelet kills the pause container first: a terminated pause is not the step's exit.
    t.observePod(pod([status('a', PAUSE, { terminated: { exitCode: 0, reason: 'Completed' } })]));
    expect(c.finished).toBe(false);
    t.observePod(pod([status('a', 'alpine:3.20', { running: { startedAt: new Date() } }, 1, { terminated: { exitCode: 0 } })]));
    expect(c.status()).toEqual({ state: 'running' });
    t.observePod(pod([status('a', 'alpine:3.20', { terminated: { exitCode: 3, reason: 'Error' } }, 1)]));
    expect(c.exit).toEqual({ exitCode: 3, reason: 'Error' });
    expect(c.status()).toMatchObject({ state: 'exited', exitCode: 3 });
  });

  it('recognises the step by restart count when the status shows a digest instead of the name', () => {
    const t = tracker();
    const c = t.addContainer('step_a', 'a');
    t.observePod(pod([status('a', PAUSE, pauseRunning)]));
    c.markRequested(STEP);
    t.observePod(pod([status('a', 'sha256:0123abcd', { terminated: { exitCode: 7, reason: 'Error' } }, 1)]));
    expect(c.exit?.exitCode).toBe(7);
  });

  it("reads the exit from lastState when the pause image took the step container's place", () => {
    const t = tracker();
    const c = t.addContainer('step_a', 'a');
    c.markRequested(STEP);
    t.observePod(pod([status('a', STEP, { running: { startedAt: new Date() } }, 1)]));
    t.observePod(pod([status('a', PAUSE, pauseRunning, 2, { terminated: { exitCode: 137, reason: 'Error' } })]));
    expect(c.exit).toEqual({ exitCode: 137, reason: 'Error' });
  });

  it('fails InvalidImageName at once with InvalidConfig and the kubelet message', () => {
    const t = tracker();
    const c = t.addContainer('step_a', 'a');
    c.markRequested(STEP);
    t.observePod(pod([status('a', STEP, { waiting: { reason: 'InvalidImageName', message: 'Failed to apply default image tag' } })]));
    expect(isRuntimeError(c.failure, 'InvalidConfig')).toBe(true);
    expect(c.failure?.message).toContain('Failed to apply default image tag');
  });

  it.each([
    ['ErrImagePull', 'rpc error: failed to resolve reference: not found', 'ImageNotFound'],
    ['ImagePullBackOff', 'Back-off pulling image', 'ImagePullFailed'],
    ['ErrImagePull', 'dial tcp: i/o timeout', 'ImagePullFailed'],
    ['ErrImageNeverPull', 'Container image is not present with pull policy of Never', 'ImageNotFound'],
    ['CreateContainerConfigError', 'secret "x" not found', 'InvalidConfig'],
  ] as const)('fails %s after the grace as %s', async (reason, message, code) => {
    const t = tracker({ pullGraceMs: 80 });
    const c = t.addContainer('step_a', 'a');
    c.markRequested(STEP);
    t.observePod(pod([status('a', STEP, { waiting: { reason, message } })]));
    expect(c.finished).toBe(false);
    await sleep(200);
    expect(isRuntimeError(c.failure, code), String(c.failure)).toBe(true);
    expect(c.failure?.message).toContain(message);
  });

  it('does not fail a pull that recovers within the grace', async () => {
    const t = tracker({ pullGraceMs: 150 });
    const c = t.addContainer('step_a', 'a');
    c.markRequested(STEP);
    t.observePod(pod([status('a', STEP, { waiting: { reason: 'ErrImagePull', message: 'timeout' } })]));
    await sleep(30);
    t.observePod(pod([status('a', STEP, { running: { startedAt: new Date() } }, 1)]));
    await sleep(250);
    expect(c.failure).toBeUndefined();
    expect(c.phase).toBe('running');
  });

  it('starts the grace from a pull event and words the failure with the event message', async () => {
    const t = tracker({ pullGraceMs: 80 });
    const c = t.addContainer('step_a', 'a');
    t.observePod(pod([status('a', PAUSE, pauseRunning)]));
    c.markRequested(STEP);
    t.observeEvent(event('e1', 'Failed', 'Failed to pull image "alpine:3.20": manifest unknown', 'spec.containers{a}'));
    t.observeEvent(event('e2', 'Failed', 'Error: ErrImagePull', 'spec.containers{a}'));
    await sleep(200);
    expect(isRuntimeError(c.failure, 'ImageNotFound')).toBe(true);
    expect(c.failure?.message).toContain('manifest unknown');
  });

  it('until() rejects with Canceled when its ctx is cancelled', async () => {
    const t = tracker();
    const c = t.addContainer('step_a', 'a');
    const [ctx, cancel] = withCancel(background());
    const waiting = c.until(ctx, { operation: 'waitContainer' }, () => c.finished);
    cancel();
    await expect(waiting).rejects.toMatchObject({ code: 'Canceled' });
  });

  it('compares images by their normalised reference', () => {
    expect(sameImage('alpine', 'docker.io/library/alpine:latest')).toBe(true);
    expect(sameImage('berth/pause:1', 'docker.io/berth/pause:1')).toBe(true);
    expect(sameImage('alpine:3.19', 'alpine:3.20')).toBe(false);
  });
});

function event(uid: string, reason: string, message: string, fieldPath?: string, type = 'Warning', at = new Date()): CoreV1Event {
  return {
    metadata: { name: uid, uid },
    involvedObject: { kind: 'Pod', name: 'pod', namespace: 'ns', uid: 'u1', ...(fieldPath ? { fieldPath } : {}) },
    reason,
    message,
    type,
    count: 1,
    lastTimestamp: at,
  };
}

describe('restartPolicy Never and containerd (issue 14)', () => {
  const pauseRunningWithId = (restartCount = 0): V1ContainerStatus => ({
    ...status('a', PAUSE, pauseRunning, restartCount),
    imageID: 'docker.io/berth/pause@sha256:' + 'a'.repeat(64),
    containerID: 'containerd://pause0',
  });
  const pauseTerminated = (restartCount = 0): V1ContainerStatus => ({
    ...status('a', PAUSE, { terminated: { exitCode: 2, reason: 'Error', containerID: 'containerd://pause0' } }, restartCount),
    imageID: 'docker.io/berth/pause@sha256:' + 'a'.repeat(64),
  });

  // kuberuntime_manager.go computePodActions kills the pause (spec changed) and starts the new image in
  // one sync; when the pull fails, ShouldContainerBeRestarted (pkg/kubelet/container/helpers.go) says no
  // under Never and convertToAPIContainerStatuses shows the terminated pause, no waiting reason.
  it("a terminated pause with its restart count unchanged after the request is a start failure with the event's message, before any grace", () => {
    const t = tracker({ pullGraceMs: 60_000 });
    const c = t.addContainer('step_a', 'a');
    t.markCreated('u1');
    t.observePod(pod([pauseRunningWithId()]));
    c.markRequested('alpine:3.20');
    t.observeEvent(event('e1', 'Failed', 'Failed to pull image "alpine:3.20": rpc error: code = NotFound desc = manifest unknown', 'spec.containers{a}'));
    t.observePod(pod([pauseTerminated()]));
    expect(isRuntimeError(c.failure, 'ImageNotFound'), String(c.failure)).toBe(true);
    expect(c.failure?.message).toContain('manifest unknown');
    expect(c.failure?.message).toContain('restartPolicy Never');
  });

  it('without an event (dropped by the spam filter) the start failure comes after a short settle, not the pull grace', async () => {
    const t = tracker({ pullGraceMs: 60_000 });
    const c = t.addContainer('step_a', 'a');
    t.observePod(pod([pauseRunningWithId()]));
    c.markRequested('alpine:3.20');
    t.observePod(pod([pauseTerminated()]));
    expect(c.finished, 'waits a moment for the event').toBe(false);
    await sleep(START_FAILURE_SETTLE_MS + 200);
    expect(isRuntimeError(c.failure, 'ContainerFailed'), String(c.failure)).toBe(true);
    expect(c.failure?.message).toContain('no kubelet event said why');
  });

  it("matches pull events on the image they name, whatever the node's clock says", async () => {
    const t = tracker({ pullGraceMs: 80 });
    const c = t.addContainer('step_a', 'a');
    t.observePod(pod([pauseRunningWithId()]));
    c.markRequested(STEP);
    // The node's clock is 10 minutes behind the worker's.
    const skewed = new Date(Date.now() - 600_000);
    t.observeEvent(event('e0', 'Failed', 'Failed to pull image "berth/pause:1": not found', 'spec.containers{a}', 'Warning', skewed));
    expect(c.eventMessage, "an event about another image is not the step's").toBeUndefined();
    t.observeEvent(event('e1', 'Failed', 'Failed to pull image "alpine:3.20": manifest unknown', 'spec.containers{a}', 'Warning', skewed));
    await sleep(200);
    expect(isRuntimeError(c.failure, 'ImageNotFound'), String(c.failure)).toBe(true);
    expect(c.failure?.message).toContain('manifest unknown');
  });

  it('CreateContainerConfigError (secret not found) is a configuration error, not a missing image', async () => {
    const t = tracker({ pullGraceMs: 80 });
    const c = t.addContainer('step_a', 'a');
    t.observePod(pod([pauseRunningWithId()]));
    c.markRequested(STEP);
    t.observeEvent(event('e1', 'Pulled', 'Container image "alpine:3.20" already present on machine', 'spec.containers{a}', 'Normal'));
    t.observeEvent(event('e2', 'Failed', 'Error: secret "x" not found', 'spec.containers{a}'));
    t.observePod(pod([pauseTerminated()]));
    await sleep(200);
    expect(isRuntimeError(c.failure, 'InvalidConfig'), String(c.failure)).toBe(true);
    expect(c.failure?.message).toContain('secret "x" not found');
  });

  it('containerd naming: a digest-pinned step shown under a tag is the step; a pause shown under another tag is still the pause', () => {
    const t = tracker();
    const digest = `sha256:${'b'.repeat(64)}`;
    const c = t.addContainer('step_a', 'a');
    t.observePod(pod([pauseRunningWithId()]));
    c.markRequested(`alpine@${digest}`);
    // containerd: the pause image's first tag is another name; its imageID is unchanged.
    t.observePod(
      pod([{ ...status('a', 'docker.io/library/other-tag-of-pause:1', pauseRunning, 0), imageID: 'docker.io/berth/pause@sha256:' + 'a'.repeat(64) }]),
    );
    expect(c.started, 'the pause under another name is not the step').toBe(false);
    // The step, restart count unchanged in this status, shown as docker.io/library/alpine:3.19.
    t.observePod(
      pod([
        {
          ...status('a', 'docker.io/library/alpine:3.19', { running: { startedAt: new Date() } }, 0),
          imageID: `docker.io/library/alpine@${digest}`,
          containerID: 'containerd://step1',
        },
      ]),
    );
    expect(c.started).toBe(true);
    t.observePod(
      pod([
        {
          ...status('a', 'docker.io/library/alpine:3.19', { terminated: { exitCode: 4, reason: 'Error', containerID: 'containerd://step1' } }, 0),
          imageID: `docker.io/library/alpine@${digest}`,
        },
      ]),
    );
    expect(c.exit).toEqual({ exitCode: 4, reason: 'Error' });
  });
});

describe('BuildTracker', () => {
  it('fails unfinished containers when the pod is deleted, keeping exits already seen', () => {
    const t = tracker();
    const done = t.addContainer('step_a', 'a');
    const running = t.addContainer('step_b', 'b');
    t.markCreating();
    t.markCreated('u1');
    done.markRequested(STEP);
    running.markRequested(STEP);
    t.observePod(pod([status('a', STEP, { terminated: { exitCode: 0 } }, 1), status('b', STEP, { running: {} }, 1)]));
    t.observePodDeleted(pod([], 'Running'));
    expect(done.exit?.exitCode).toBe(0);
    expect(isRuntimeError(running.failure, 'ContainerFailed')).toBe(true);
    expect(t.gone).toBe(true);
  });

  it('treats a pod of the same name with another uid as the deletion of ours', () => {
    const t = tracker();
    const c = t.addContainer('step_a', 'a');
    t.markCreating();
    t.markCreated('u1');
    t.observePod(pod([status('a', PAUSE, pauseRunning)], 'Running', 'u1'));
    t.observePod(pod([status('a', PAUSE, pauseRunning)], 'Running', 'u2'));
    expect(t.gone).toBe(true);
    expect(c.failure?.message).toContain('another pod');
  });

  it('ignores a deletion of a pod with another uid', () => {
    const t = tracker();
    t.addContainer('step_a', 'a');
    t.markCreating();
    t.markCreated('u2');
    t.observePodDeleted(pod([], 'Running', 'u1'));
    expect(t.gone).toBe(false);
  });

  it('fails the build when the pod stays Pending past the timeout, saying why', async () => {
    const t = tracker({ pendingTimeoutMs: 100 });
    const c = t.addContainer('step_a', 'a');
    t.markCreating();
    t.observePod({
      metadata: { name: 'pod', uid: 'u1' },
      status: { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/3 nodes are available' }] },
    });
    await sleep(250);
    expect(isRuntimeError(c.failure, 'ContainerFailed')).toBe(true);
    expect(c.failure?.message).toContain('Pending');
    expect(c.failure?.message).toContain('0/3 nodes are available');
  });

  it('does not time out a pod that left Pending', async () => {
    const t = tracker({ pendingTimeoutMs: 100 });
    const c = t.addContainer('step_a', 'a');
    t.markCreating();
    t.observePod(pod([status('a', PAUSE, pauseRunning)], 'Running'));
    await sleep(200);
    expect(c.failure).toBeUndefined();
  });

  it("stops the pending timeout once the sandbox is ready: the first step's pull, with the pod still Pending, does not count", async () => {
    // The kubelet pulls images one after another (serialised per node) while the pod stays Pending;
    // PodReadyToStartContainers is True once the sandbox exists (pkg/kubelet/status/generate.go,
    // GeneratePodReadyToStartContainersCondition).
    const t = tracker({ pendingTimeoutMs: 100 });
    const c = t.addContainer('step_a', 'a');
    t.markCreating();
    const now = new Date();
    t.observePod({
      metadata: { name: 'pod', uid: 'u1' },
      status: {
        phase: 'Pending',
        conditions: [
          { type: 'PodScheduled', status: 'True', lastTransitionTime: now },
          { type: 'PodReadyToStartContainers', status: 'True', lastTransitionTime: now },
        ],
        containerStatuses: [status('a', PAUSE, { waiting: { reason: 'ContainerCreating' } })],
      },
    });
    await sleep(250);
    expect(c.failure, String(c.failure)).toBeUndefined();
  });

  it('keeps the pending timeout while the pod is only scheduled (the node never started it)', async () => {
    const t = tracker({ pendingTimeoutMs: 100 });
    const c = t.addContainer('step_a', 'a');
    t.markCreating();
    t.observePod({
      metadata: { name: 'pod', uid: 'u1' },
      status: { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'True', lastTransitionTime: new Date() }] },
    });
    await sleep(250);
    expect(c.failure?.message).toContain('stayed Pending');
  });

  it('fails containers of a pod that failed (eviction), with the reason', () => {
    const t = tracker();
    const c = t.addContainer('step_a', 'a');
    c.markRequested(STEP);
    t.observePod({ metadata: { name: 'pod', uid: 'u1' }, status: { phase: 'Failed', reason: 'Evicted', message: 'The node was low on resource: memory.' } });
    expect(c.failure?.message).toContain('Evicted');
  });

  it("routes events to notices by container, skips the pause container's, and deduplicates", () => {
    const events: RuntimeEvent[] = [];
    const t = tracker({ events });
    const c = t.addContainer('step_a', 'a');
    t.markCreated('u1');
    t.observeEvent(event('p1', 'Started', 'Started container a', 'spec.containers{a}', 'Normal', new Date(Date.now() - 60_000)));
    t.observeEvent(event('s1', 'Scheduled', 'Successfully assigned ns/pod to node', undefined, 'Normal'));
    c.markRequested(STEP);
    t.observeEvent(event('p2', 'Pulling', 'Pulling image "alpine:3.20"', 'spec.containers{a}', 'Normal'));
    t.observeEvent(event('p2', 'Pulling', 'Pulling image "alpine:3.20"', 'spec.containers{a}', 'Normal'));
    t.observeEvent({
      ...event('x1', 'Pulling', 'other pod', 'spec.containers{a}', 'Normal'),
      involvedObject: { kind: 'Pod', name: 'pod', uid: 'u9', fieldPath: 'spec.containers{a}' },
    });
    expect(events).toEqual([
      { type: 'notice', buildId: 'org_repo_1', containerId: '', reason: 'Scheduled', message: 'Successfully assigned ns/pod to node' },
      { type: 'notice', buildId: 'org_repo_1', containerId: 'step_a', reason: 'Pulling', message: 'Pulling image "alpine:3.20"' },
    ]);
  });
});

describe("the pod's events, listed only when something needs explaining (issue 25 item 7)", () => {
  /** A tracker whose event source counts lists and returns `listed`. */
  /** A tracker listing `listed` as its pod's events; each list answers after `listMs` (the apiserver's latency). */
  function listing(options: { slowStartMs?: number; listMs?: number } = {}) {
    const events: RuntimeEvent[] = [];
    const { listMs = 0, ...trackerOptions } = options;
    const t = tracker({ ...trackerOptions, events });
    const listed: CoreV1Event[] = [];
    const counter = { lists: 0 };
    t.useEventSource(async () => {
      counter.lists++;
      const answer = [...listed];
      if (listMs > 0) await sleep(listMs);
      return answer;
    });
    t.markCreated('u1');
    const reasons = (): string[] => events.map((e) => (e.type === 'notice' ? e.reason : ''));
    return { t, events, listed, counter, reasons };
  }
  const running = () => ({ running: { startedAt: new Date() } });
  /** A listing tracker with one container on the pause image whose step (`image`) was just asked to run. */
  function requested(slowStartMs: number, image = STEP) {
    const fixture = listing({ slowStartMs });
    const a = fixture.t.addContainer('step_a', 'a');
    fixture.t.observePod(pod([status('a', PAUSE, pauseRunning)]));
    a.markRequested(image);
    return { ...fixture, a };
  }

  it('lists none for a build whose steps start and end as they should, whatever their exit codes, nor for its Succeeded or all-exited Failed pod', async () => {
    const { t, listed, counter, events } = listing();
    const a = t.addContainer('step_a', 'a');
    const b = t.addContainer('step_b', 'b');
    t.observePod(pod([status('a', PAUSE, pauseRunning), status('b', PAUSE, pauseRunning)], 'Pending'));
    listed.push(event('e1', 'Pulled', 'Container image "alpine:3.20" already present on machine', 'spec.containers{a}', 'Normal'));
    a.markRequested(STEP);
    t.observePod(pod([status('a', STEP, { waiting: { reason: 'ContainerCreating' } }, 1), status('b', PAUSE, pauseRunning)]));
    t.observePod(pod([status('a', STEP, running(), 1), status('b', PAUSE, pauseRunning)]));
    t.observePod(pod([status('a', STEP, { terminated: { exitCode: 0 } }, 1), status('b', PAUSE, pauseRunning)]));
    b.markRequested(STEP);
    t.observePod(pod([status('a', STEP, { terminated: { exitCode: 0 } }, 1), status('b', STEP, running(), 1)]));
    t.observePod(pod([status('a', STEP, { terminated: { exitCode: 0 } }, 1), status('b', STEP, { terminated: { exitCode: 1, reason: 'Error' } }, 1)]));
    // Every container ended, one of them non-zero: the kubelet's getPhase says Failed.
    t.observePod(
      pod([status('a', STEP, { terminated: { exitCode: 0 } }, 1), status('b', STEP, { terminated: { exitCode: 1, reason: 'Error' } }, 1)], 'Failed'),
    );
    await sleep(20);
    expect(b.exit?.exitCode).toBe(1);
    expect(counter.lists, 'no step needed explaining').toBe(0);
    expect(events).toEqual([]);
    const { t: t2, counter: counter2 } = listing();
    const c = t2.addContainer('step_a', 'a');
    c.markRequested(STEP);
    t2.observePod(pod([status('a', STEP, running(), 1)]));
    t2.observePod(pod([status('a', STEP, { terminated: { exitCode: 0 } }, 1)], 'Succeeded'));
    await sleep(20);
    expect(counter2.lists, 'a Succeeded pod explains itself').toBe(0);
  });

  it('lists once per failing waiting reason, and gives the step the pull error and its notices', async () => {
    const { t, listed, counter, reasons } = listing();
    const a = t.addContainer('step_a', 'a');
    t.observePod(pod([status('a', PAUSE, pauseRunning)]));
    a.markRequested('berth/missing:1');
    listed.push(event('e1', 'Pulling', 'Pulling image "berth/missing:1"', 'spec.containers{a}', 'Normal'));
    listed.push(event('e2', 'Failed', 'Failed to pull image "berth/missing:1": not found', 'spec.containers{a}', 'Warning'));
    const waiting = (reason: string) => pod([status('a', 'berth/missing:1', { waiting: { reason, message: 'not found' } }, 1)]);
    t.observePod(waiting('ErrImagePull'));
    t.observePod(waiting('ErrImagePull'));
    await sleep(10);
    expect(counter.lists, 'one list when the step waits for ErrImagePull').toBe(1);
    expect(a.eventMessage).toBe('Failed to pull image "berth/missing:1": not found');
    expect(reasons()).toEqual(['Pulling', 'Failed']);
    t.observePod(waiting('ImagePullBackOff'));
    t.observePod(waiting('ErrImagePull'));
    t.observePod(waiting('ImagePullBackOff'));
    await sleep(10);
    expect(counter.lists, 'one more for ImagePullBackOff, none for reasons listed already').toBe(2);
  });

  it('lists when a start fails and again before the settle ends: an event recorded after the first list still says why', async () => {
    const { t, listed, counter, reasons } = listing();
    const a = t.addContainer('step_a', 'a');
    const pauseImageId = 'docker.io/berth/pause@sha256:' + 'a'.repeat(64);
    t.observePod(pod([{ ...status('a', PAUSE, pauseRunning), imageID: pauseImageId }]));
    a.markRequested('alpine:3.20');
    t.observePod(pod([{ ...status('a', PAUSE, { terminated: { exitCode: 2, reason: 'Error' } }), imageID: pauseImageId }]));
    await sleep(10);
    expect(counter.lists, 'one list at the start failure').toBe(1);
    expect(a.finished, 'waits for the event').toBe(false);
    listed.push(event('e1', 'Failed', 'Failed to pull image "alpine:3.20": manifest unknown', 'spec.containers{a}'));
    await sleep(START_FAILURE_SETTLE_MS);
    expect(counter.lists, 'the second list before the settle ends').toBe(2);
    expect(isRuntimeError(a.failure, 'ImageNotFound'), String(a.failure)).toBe(true);
    expect(a.failure?.message).toContain('manifest unknown');
    expect(reasons()).toEqual(['Failed']);
  });

  it("a start failure waits for the list it sent when the apiserver answers after the settle: the kubelet's reason, not 'no event said why'", async () => {
    // A namespace with many events makes a list slower than the 1 s settle (about 14 µs per event on
    // the test apiserver: 100,000 events, 1.4 s).
    const { t, listed, counter } = listing({ listMs: START_FAILURE_SETTLE_MS + 500 });
    const a = t.addContainer('step_a', 'a');
    const pauseImageId = 'docker.io/berth/pause@sha256:' + 'a'.repeat(64);
    t.observePod(pod([{ ...status('a', PAUSE, pauseRunning), imageID: pauseImageId }]));
    a.markRequested('alpine:3.20');
    listed.push(event('e1', 'Failed', 'Failed to pull image "alpine:3.20": manifest unknown', 'spec.containers{a}'));
    t.observePod(pod([{ ...status('a', PAUSE, { terminated: { exitCode: 2, reason: 'Error' } }), imageID: pauseImageId }]));
    await sleep(START_FAILURE_SETTLE_MS + 100);
    expect(a.finished, 'still waiting for the list in flight').toBe(false);
    await sleep(600);
    expect(counter.lists).toBeGreaterThanOrEqual(1);
    expect(isRuntimeError(a.failure, 'ImageNotFound'), String(a.failure)).toBe(true);
    expect(a.failure?.message).toContain('manifest unknown');
  });

  it('a start failure whose list never answers still fails after the bound, saying no event said why', async () => {
    const { t } = listing({ listMs: 60_000 });
    const a = t.addContainer('step_a', 'a');
    const pauseImageId = 'docker.io/berth/pause@sha256:' + 'a'.repeat(64);
    t.observePod(pod([{ ...status('a', PAUSE, pauseRunning), imageID: pauseImageId }]));
    a.markRequested('alpine:3.20');
    t.observePod(pod([{ ...status('a', PAUSE, { terminated: { exitCode: 2, reason: 'Error' } }), imageID: pauseImageId }]));
    await sleep(START_FAILURE_LIST_BOUND_MS + 300);
    expect(a.finished, 'failed after the bound').toBe(true);
    expect(a.failure?.message).toContain('no kubelet event said why');
    t.dispose();
  }, 15_000);

  it('lists once when the pod failed with a step unfinished, and reports why', async () => {
    const { t, listed, counter, reasons } = listing();
    const a = t.addContainer('step_a', 'a');
    a.markRequested(STEP);
    t.observePod(pod([status('a', STEP, running(), 1)]));
    listed.push({ ...event('k1', 'Evicted', 'The node was low on resource: memory.'), involvedObject: { kind: 'Pod', name: 'pod', uid: 'u1' } });
    const failed: V1Pod = { metadata: { name: 'pod', uid: 'u1' }, status: { phase: 'Failed', reason: 'Evicted', message: 'low on memory' } };
    t.observePod(failed);
    t.observePod(failed);
    await sleep(10);
    expect(a.failure?.message).toContain('Evicted');
    expect(counter.lists).toBe(1);
    expect(reasons()).toEqual(['Evicted']);
  });

  it('lists a slow start after the bound, then at growing intervals, and stops once the step runs', async () => {
    const { t, listed, counter, reasons } = requested(100);
    listed.push(event('e1', 'Pulling', 'Pulling image "alpine:3.20"', 'spec.containers{a}', 'Normal'));
    t.observePod(pod([status('a', STEP, { waiting: { reason: 'ContainerCreating' } }, 1)]));
    await sleep(60);
    expect(counter.lists, 'none before the bound').toBe(0);
    await sleep(90);
    expect(counter.lists, 'one at the bound (100 ms)').toBe(1);
    expect(reasons(), 'the step is told why it waits').toEqual(['Pulling']);
    await sleep(200);
    expect(counter.lists, 'the next one three times the bound later (400 ms)').toBe(1);
    await sleep(150);
    expect(counter.lists, 'the next one at 400 ms').toBe(2);
    t.observePod(pod([status('a', STEP, running(), 1)]));
    await sleep(1_000);
    expect(counter.lists, 'none once the step runs').toBe(2);
  });

  it('lists no slow start for a step that waits for a reason that fails steps: that wait was listed for already', async () => {
    const { t, counter } = requested(50, 'berth/missing:1');
    t.observePod(pod([status('a', 'berth/missing:1', { waiting: { reason: 'ErrImagePull', message: 'not found' } }, 1)]));
    await sleep(300);
    expect(counter.lists, 'the one for ErrImagePull only').toBe(1);
  });

  it('lists no slow start for a step that starts within the bound', async () => {
    const { t, counter } = requested(100);
    await sleep(50);
    t.observePod(pod([status('a', STEP, running(), 1)]));
    await sleep(200);
    expect(counter.lists).toBe(0);
  });

  it('lists them before saying why a pod stayed Pending', async () => {
    const t = tracker({ pendingTimeoutMs: 50 });
    const c = t.addContainer('step_a', 'a');
    t.useEventSource(() =>
      Promise.resolve([
        {
          ...event('w1', 'FailedScheduling', '0/1 nodes are available: 1 Insufficient cpu.', undefined, 'Warning'),
          involvedObject: { kind: 'Pod', name: 'pod', uid: 'u1' },
        },
      ]),
    );
    t.markCreating();
    t.observePod({ metadata: { name: 'pod', uid: 'u1' }, status: { phase: 'Pending' } });
    await sleep(200);
    expect(c.failure?.message).toContain('last warning FailedScheduling: 0/1 nodes are available: 1 Insufficient cpu.');
  });
});
