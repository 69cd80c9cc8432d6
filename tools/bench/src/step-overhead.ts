/**
 * Per-step overhead (issue 24 item 6, issue 28 item 2): a build of N quick steps (BENCH_STEPS, 10;
 * each sleeps BENCH_STEP_SECONDS, 0 by default, between its first and last stamp)
 * run by the executor (`runBuild`, as a worker runs it) on Docker, kube-sim and, when
 * BERTH_REAL_KUBECONFIG names it, the real cluster (tools/kube-cluster); BENCH_BUILDS (2) builds per
 * runtime, BENCH_RUNTIMES (comma list of docker, docker-created, docker-assemble, kube-sim, real) to
 * pick (BENCH_RUNTIMES=docker,docker-created for Docker alone). docker starts each step's container
 * ahead, held until its step runs (the runtime's heldStart); docker-created only creates it ahead and
 * starts it when the step runs, as before the held start; docker-assemble sets every container up in
 * assembleBuild, as before issue 28 item 2.
 *
 * What is measured, for each pair of consecutive steps i → i+1:
 *
 * - Each step runs `cat /proc/uptime; echo step-i; cat /proc/uptime`. /proc/uptime is the kernel's
 *   clock since boot in 10 ms units, the same in every container and on the host (containers share
 *   the kernel; no time namespace), so its first line is when the step's process started and its
 *   last one is when it was about to exit, both turned into ms since the epoch with the host's own
 *   /proc/uptime read at the bench's start. They reach the bench in the step's log.
 * - The reporter records when each log chunk arrived (`appendLog`, logs flushed at once:
 *   `flushIntervalMs: 0`) and the executor's `finished` time of each step (set when the runtime's
 *   `waitContainer` returned: the worker saw the exit).
 * - Overhead = the next step's first log chunk at the reporter − the step's exit (its last uptime
 *   stamp). The reporter-only figure (first chunk − the step's reported `finished`) is printed too:
 *   it leaves out the time the runtime took to see the exit.
 *
 * Where the time goes on Kubernetes, with nothing in the runtime instrumented: the bench watches the
 * namespace's pods itself (a watch of its own beside the runtime's: when the pod status first shows
 * the step terminated); on the real cluster it also reads the apiserver's audit log (when the
 * runtime's patch of each step, the pause → step image swap, and its log request were received) and
 * containerd's log (the kubelet's CRI calls: when it stopped the step's pause container and when
 * the step's container started). A quick step is never seen `running` in the pod status (the
 * kubelet's status update comes after it ended), hence the CRI calls. On the real cluster the
 * builds run in a namespace of their own (created and deleted here), so that the audit events of
 * other users of the shared cluster are not counted.
 */
import { readFileSync } from 'node:fs';
import { background, withTimeout } from '@berth/context';
import { type Reporter, runBuild } from '@berth/executor';
import { readAudit, realCluster } from '@berth/kube-cluster';
import { startKubeSim } from '@berth/kube-sim';
import { emptyBuild, emptyContainer, prepareBuild } from '@berth/pipeline';
import type { Runtime } from '@berth/runtime';
import { dockerRuntime } from '@berth/runtime-docker';
import { createKubernetesRuntime } from '@berth/runtime-kubernetes';
import { KubeConfig, type V1ContainerStatus, type V1Pod, Watch } from '@kubernetes/client-node';
import { setupInAssemble, withoutHeldStart } from './docker-common.ts';
import { createNamespace, deleteNamespace } from './kube-namespace.ts';

const STEPS = Number(process.env.BENCH_STEPS ?? 10);
const BUILDS = Number(process.env.BENCH_BUILDS ?? 2);
/** How long each step runs (`sleep`), in seconds: 0 (quick steps) by default. */
const STEP_SECONDS = Number(process.env.BENCH_STEP_SECONDS ?? 0);
/** BENCH_OUTPUTS=1: outputs on, as `berth exec` runs a build (each step's outputs read after it). */
const OUTPUTS = process.env.BENCH_OUTPUTS === '1';
const IMAGE = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';
const PAUSE = process.env.BERTH_PAUSE_IMAGE ?? 'berth/pause:1';
const CONTAINERD_LOG = process.env.BERTH_KUBE_CONTAINERD_LOG ?? '/var/lib/berth-kube/logs/containerd.log';
const AUDIT_LOG = process.env.BERTH_KUBE_AUDIT_LOG ?? '/var/lib/berth-kube/logs/audit.log';
const GOAL_DOCKER_MS = 100;
const cluster = realCluster();
const RUNTIMES = (process.env.BENCH_RUNTIMES ?? 'docker,docker-created,docker-assemble,kube-sim,real')
  .split(',')
  .filter((r) => r !== 'real' || cluster.kubeconfig !== undefined);

/** ms since the epoch of the host's boot, from /proc/uptime (10 ms units). */
function bootEpochMs(): number {
  return Date.now() - Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * 1000;
}
const BOOT = bootEpochMs();

/** What the bench saw of one step. */
interface StepTimes {
  name: string;
  /** Reported by the executor: when it marked the step running and when it saw the exit. */
  started?: number;
  finished?: number;
  firstChunk?: number;
  log: string;
  /** From the step's own /proc/uptime lines. */
  processStart?: number;
  processEnd?: number;
  /** Kubernetes: the bench's own pod watch; the runtime's patch from the audit log (real cluster). */
  statusTerminated?: number;
  patch?: number;
  /** Real cluster, from containerd's log: the kubelet's CRI calls for this step's container. */
  criStopPause?: number;
  criStarted?: number;
  /** Real cluster: when the apiserver received the runtime's log request for this step (audit log). */
  logRequest?: number;
  closeLog?: number;
}

/** One transition i → i+1, in ms; undefined where the runtime gives no such figure. */
interface Transition {
  overhead: number;
  reporterOverhead: number;
  exitSeen: number;
  seenToStart: number;
  startToChunk: number;
  exitToStatus?: number;
  statusToSeen?: number;
  seenToPatch?: number;
  patchToStart?: number;
  exitToLogClosed: number;
  patchToStopPause?: number;
  stopPauseToStarted?: number;
  startedToProcess?: number;
  startToLogRequest?: number;
  logRequestToChunk?: number;
}

function recorder(steps: Map<string, StepTimes>): Reporter {
  const of = (name: string): StepTimes => {
    let s = steps.get(name);
    if (s === undefined) steps.set(name, (s = { name, log: '' }));
    return s;
  };
  return {
    buildStatus: () => Promise.resolve(),
    stepStatus(_ctx, step) {
      if (step.kind !== 'step') return Promise.resolve();
      const s = of(step.name);
      if (step.started !== undefined) s.started = step.started;
      if (step.finished !== undefined) s.finished = step.finished;
      return Promise.resolve();
    },
    appendLog(_ctx, target, chunk) {
      if (target.kind !== 'step') return Promise.resolve();
      const s = of(target.name);
      s.firstChunk ??= Date.now();
      s.log += Buffer.from(chunk).toString('utf8');
      return Promise.resolve();
    },
    closeLog(_ctx, target) {
      if (target.kind === 'step') of(target.name).closeLog = Date.now();
      return Promise.resolve();
    },
  };
}

function makeBuild(n: number) {
  const steps = Array.from({ length: STEPS }, (_, i) =>
    emptyContainer({
      name: `s${i}`,
      image: IMAGE,
      pull: 'not_present',
      commands: ['cat /proc/uptime', `echo step-${i}`, ...(STEP_SECONDS > 0 ? [`sleep ${STEP_SECONDS}`] : []), 'cat /proc/uptime'],
    }),
  );
  return prepareBuild(emptyBuild({ steps }), { org: 'bench', repo: 'overhead', number: n });
}

/** Follows the pods of `namespace` with a watch of the bench's own; `stop` ends it. */
async function watchPods(kc: KubeConfig, namespace: string, steps: () => Map<string, StepTimes>): Promise<{ stop: () => void }> {
  const imageTail = IMAGE.split('/').at(-1) ?? IMAGE;
  const isStep = (status: V1ContainerStatus): boolean => status.image.endsWith(imageTail);
  const request = await new Watch(kc).watch(
    `/api/v1/namespaces/${namespace}/pods`,
    {},
    (_type: string, pod: V1Pod) => {
      const now = Date.now();
      for (const status of pod.status?.containerStatuses ?? []) {
        const name = /-(s\d+)(?:-[a-z0-9]+)?$/.exec(status.name)?.[1];
        const s = name === undefined ? undefined : steps().get(name);
        if (s === undefined) continue;
        if (s.statusTerminated === undefined && status.state?.terminated !== undefined && isStep(status)) s.statusTerminated = now;
      }
    },
    () => undefined,
  );
  return { stop: () => request.abort() };
}

interface Lane {
  runtime: Runtime;
  watch?: (steps: () => Map<string, StepTimes>) => Promise<{ stop: () => void }>;
  audit?: { namespace: string };
  close(): Promise<void>;
}

async function openLane(name: string): Promise<Lane> {
  const workerId = `bench-overhead-${name}-${process.pid}`;
  const [ctx, cancel] = withTimeout(background(), 60_000);
  try {
    if (name === 'docker' || name === 'docker-created' || name === 'docker-assemble') {
      const runtime = await dockerRuntime().create(ctx, { workerId });
      // docker-created: each step's container created ahead and started when the step runs, as before
      // the held start (heldStart hidden); docker-assemble: every container set up in assembleBuild,
      // as before issue 28 (setupWhileRunning hidden too).
      const lane = name === 'docker' ? runtime : name === 'docker-created' ? withoutHeldStart(runtime) : setupInAssemble(withoutHeldStart(runtime));
      return { runtime: lane, close: () => runtime.close() };
    }
    const options = { pauseImage: PAUSE, pendingTimeoutMs: 120_000 };
    if (name === 'kube-sim') {
      const sim = await startKubeSim({ imagePullBackoff: { initialMs: 200, maxMs: 1_000 } });
      const runtime = await createKubernetesRuntime(ctx, { workerId }, { kubeconfig: sim.kubeconfig, ...options });
      const kc = new KubeConfig();
      kc.loadFromString(sim.kubeconfig);
      return {
        runtime,
        watch: (steps) => watchPods(kc, 'default', steps),
        close: async () => {
          await runtime.close();
          await sim.close();
        },
      };
    }
    if (cluster.kubeconfig === undefined) throw new Error(cluster.skip);
    const kc = new KubeConfig();
    kc.loadFromString(cluster.kubeconfig);
    const namespace = await createNamespace(kc, `berth-bench-overhead-${process.pid}`);
    const runtime = await createKubernetesRuntime(ctx, { workerId }, { kubeconfig: cluster.kubeconfig, namespace, ...options });
    return {
      runtime,
      watch: (steps) => watchPods(kc, namespace, steps),
      audit: { namespace },
      close: async () => {
        await runtime.reap(background(), workerId).catch(() => undefined);
        await runtime.close();
        await deleteNamespace(kc, namespace);
      },
    };
  } finally {
    cancel();
  }
}

async function measure(name: string): Promise<Transition[]> {
  const lane = await openLane(name);
  const transitions: Transition[] = [];
  try {
    for (let n = 1; n <= BUILDS; n++) {
      const steps = new Map<string, StepTimes>();
      const watcher = await lane.watch?.(() => steps);
      const since = Date.now();
      const [ctx, cancel] = withTimeout(background(), 600_000);
      try {
        const result = await runBuild(ctx, {
          build: makeBuild(n),
          runtime: lane.runtime,
          reporter: recorder(steps),
          logs: { flushIntervalMs: 0 },
          logStreamingGraceMs: 5_000,
          outputs: OUTPUTS,
        });
        if (result.status !== 'success')
          throw new Error(`${name}: build ${n} ended ${result.status}: ${result.build.error ?? result.steps.map((s) => s.error).join('; ')}`);
      } finally {
        cancel();
        watcher?.stop();
      }
      if (lane.audit !== undefined) {
        // The audit log is written as requests complete: give it a moment.
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        const audit = readAudit(AUDIT_LOG, since).filter(
          (e) => e.user.username === 'berth' && e.objectRef?.resource === 'pods' && e.objectRef.namespace === lane.audit?.namespace,
        );
        for (const e of audit) {
          const container = e.objectRef?.subresource === 'log' ? /[?&]container=[^&]*-(s\d+)-[a-z0-9]+(?:&|$)/.exec(e.requestURI)?.[1] : undefined;
          const s = container === undefined ? undefined : steps.get(container);
          if (s !== undefined) s.logRequest ??= e.receivedMs;
        }
        const patches = audit
          .filter((e) => e.verb === 'patch' && e.objectRef?.subresource === undefined)
          .map((e) => e.receivedMs)
          .sort((a, b) => a - b);
        for (const s of steps.values()) s.patch = patches.find((t) => s.started !== undefined && t >= s.started);
        const cri = kubeletCriCalls(since);
        for (const [name, calls] of cri) {
          const s = steps.get(/-(s\d+)-[a-z0-9]+$/.exec(name)?.[1] ?? '');
          if (s === undefined) continue;
          s.criStopPause = calls.stopPause;
          s.criStarted = calls.started;
        }
      }
      for (const s of steps.values()) {
        const stamps = [...s.log.matchAll(/^(\d+\.\d+) \d+\.\d+$/gm)].map((m) => BOOT + Number(m[1]) * 1000);
        s.processStart = stamps[0];
        s.processEnd = stamps.at(-1);
      }
      for (let i = 0; i + 1 < STEPS; i++) {
        const a = steps.get(`s${i}`);
        const b = steps.get(`s${i + 1}`);
        const t = a && b ? transition(a, b) : undefined;
        if (t === undefined) throw new Error(`${name}: build ${n}: missing timestamps for s${i} → s${i + 1}`);
        transitions.push(t);
      }
      console.error(`[step-overhead] ${name} build ${n}: ${((Date.now() - since) / 1000).toFixed(1)} s`);
    }
  } finally {
    await lane.close();
  }
  return transitions;
}

function transition(a: StepTimes, b: StepTimes): Transition | undefined {
  const { processEnd: exit, finished } = a;
  const { processStart: start, firstChunk } = b;
  if (exit === undefined || finished === undefined || start === undefined || firstChunk === undefined) return undefined;
  const diff = (x: number | undefined, y: number | undefined): number | undefined => (x === undefined || y === undefined ? undefined : x - y);
  return {
    overhead: firstChunk - exit,
    reporterOverhead: firstChunk - finished,
    exitSeen: finished - exit,
    seenToStart: start - finished,
    startToChunk: firstChunk - start,
    exitToStatus: diff(a.statusTerminated, exit),
    statusToSeen: diff(finished, a.statusTerminated),
    seenToPatch: diff(b.patch, finished),
    patchToStart: diff(start, b.patch),
    exitToLogClosed: (a.closeLog ?? NaN) - exit,
    patchToStopPause: diff(b.criStopPause, b.patch),
    stopPauseToStarted: diff(b.criStarted, b.criStopPause),
    startedToProcess: diff(start, b.criStarted),
    startToLogRequest: diff(b.logRequest, start),
    logRequestToChunk: diff(firstChunk, b.logRequest),
  };
}

/**
 * The kubelet's CRI calls in containerd's log (info level, on this machine's clock) since `since`,
 * by container name: when it asked containerd to stop the container's first attempt (the pause the
 * pod started it on; the image patch makes the kubelet kill it and create attempt 1 with the step's
 * image: pkg/kubelet/kuberuntime/kuberuntime_manager.go, computePodActions, containerChanged) and
 * when attempt 1 started. A step patched before the kubelet created its container (the first step)
 * has neither.
 */
function kubeletCriCalls(since: number): Map<string, { stopPause?: number; started?: number }> {
  const byId = new Map<string, { name: string; attempt: number }>();
  const calls = new Map<string, { stopPause?: number; started?: number }>();
  let text: string;
  try {
    text = readFileSync(CONTAINERD_LOG, 'utf8');
  } catch {
    return calls;
  }
  for (const line of text.split('\n')) {
    const at = /^time="([^"]+)"/.exec(line);
    if (at?.[1] === undefined) continue;
    const ms = Date.parse(at[1]);
    if (ms < since) continue;
    const created = /ContainerMetadata\{Name:([^,]+),Attempt:(\d+),\} returns container id \\"([0-9a-f]+)/.exec(line);
    if (created?.[1] !== undefined && created[3] !== undefined) {
      byId.set(created[3], { name: created[1], attempt: Number(created[2]) });
      continue;
    }
    const stop = /msg="StopContainer for \\"([0-9a-f]+)\\" with timeout/.exec(line);
    const start = /msg="StartContainer for \\"([0-9a-f]+)\\" returns successfully/.exec(line);
    const id = stop?.[1] ?? start?.[1];
    const container = id === undefined ? undefined : byId.get(id);
    if (container === undefined) continue;
    const entry = calls.get(container.name) ?? {};
    calls.set(container.name, entry);
    if (stop !== null && container.attempt === 0) entry.stopPause ??= ms;
    if (start !== null && container.attempt === 1) entry.started ??= ms;
  }
  return calls;
}

function percentile(values: number[], p: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

function p50p95(ts: Transition[], key: keyof Transition): string {
  const values = ts.map((t) => t[key]).filter((v): v is number => v !== undefined && !Number.isNaN(v));
  const p50 = percentile(values, 50);
  const p95 = percentile(values, 95);
  return p50 === undefined || p95 === undefined ? '-' : `${Math.round(p50)} / ${Math.round(p95)}`;
}

const results = new Map<string, Transition[]>();
for (const name of RUNTIMES) results.set(name, await measure(name));

const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
console.log(
  `\nPer-step overhead: builds of ${STEPS} ${STEP_SECONDS > 0 ? `${STEP_SECONDS} s` : 'quick'} steps through the executor${OUTPUTS ? ' with outputs' : ''}, ${BUILDS} builds per runtime, ms p50 / p95 (load average ${load})\n`,
);
console.log("| runtime | transitions | exit → next step's first log chunk | reported finished → next first chunk | goal |");
console.log('| --- | ---: | ---: | ---: | --- |');
for (const [name, ts] of results) {
  const goal =
    name === 'docker' && STEP_SECONDS === 0
      ? `≤ ${GOAL_DOCKER_MS} ms (issue 28) is judged on steps of 1 s (BENCH_STEP_SECONDS=1): quick steps end before the next container is held, and the engine's work per container bounds them`
      : name === 'docker'
        ? `≤ ${GOAL_DOCKER_MS} ms (issue 28): ${
            (percentile(
              ts.map((t) => t.overhead),
              50,
            ) ?? Infinity) <= GOAL_DOCKER_MS
              ? 'met'
              : 'NOT met'
          } at p50`
        : '';
  console.log(`| ${name} | ${ts.length} | ${p50p95(ts, 'overhead')} | ${p50p95(ts, 'reporterOverhead')} | ${goal} |`);
}
console.log('\nwhere it goes (ms p50 / p95; "seen" = the runtime\'s waitContainer returned; the log stream closed = the reporter\'s closeLog)\n');
console.log('| runtime | exit → seen | exit → log stream closed | seen → next process starts | process start → first chunk at reporter |');
console.log('| --- | ---: | ---: | ---: | ---: |');
for (const [name, ts] of results)
  console.log(`| ${name} | ${p50p95(ts, 'exitSeen')} | ${p50p95(ts, 'exitToLogClosed')} | ${p50p95(ts, 'seenToStart')} | ${p50p95(ts, 'startToChunk')} |`);
const kube = [...results].filter(([name]) => !name.startsWith('docker'));
if (kube.length > 0) {
  console.log(
    "\nKubernetes: the bench's own pod watch; on the real cluster the runtime's patch (audit log) and the kubelet's CRI calls (containerd's log); ms p50 / p95\n",
  );
  console.log(
    '| runtime | exit → pod status terminated | status → seen | seen → patch received | patch → kubelet stops the pause | stop → StartContainer returned | process start − StartContainer returned | patch → process start | process start → log request received | log request → first chunk |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const [name, ts] of kube)
    console.log(
      `| ${name} | ${p50p95(ts, 'exitToStatus')} | ${p50p95(ts, 'statusToSeen')} | ${p50p95(ts, 'seenToPatch')} | ${p50p95(ts, 'patchToStopPause')} | ${p50p95(ts, 'stopPauseToStarted')} | ${p50p95(ts, 'startedToProcess')} | ${p50p95(ts, 'patchToStart')} | ${p50p95(ts, 'startToLogRequest')} | ${p50p95(ts, 'logRequestToChunk')} |`,
    );
}
if (cluster.skip !== undefined) console.log(`\nreal cluster not run: ${cluster.skip}`);
