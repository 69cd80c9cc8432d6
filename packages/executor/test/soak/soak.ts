/**
 * The seeded fault soak: N random builds on one runtime wrapped in {@link faultRuntime}, each
 * checked against the invariants of issue #13 (bounded end, nothing left, one final status per
 * step and Vela's build status, no secret form anywhere, no async resource or listener left).
 *
 * Build `i` of seed `S` depends only on (S, i): `SOAK_SEED=S SOAK_ONLY=i` replays it alone.
 */
import { background, type Context, withCancel } from '@berth/context';
import { listenerCount, trackAsyncResources } from '@berth/context/testing';
import type { Runtime } from '@berth/runtime';
import type { Executor } from '../../src/executor.ts';
import { runBuild } from '../../src/run-build.ts';
import { RecordingReporter } from '../helpers.ts';
import { CLEANUP_CALLS, type FaultOptions, faultRuntime, type StreamFault } from '../kit/fault-runtime.ts';
import { int, prng } from '../prng.ts';
import { checkLeftovers, checkSecrets, checkStatuses } from './invariants.ts';
import { type PipelineOptions, randomPipeline } from './pipeline.ts';

/** The runtime a soak runs on. */
export interface SoakTarget {
  /** `dummy`, `docker`, … for the summary. */
  name: string;
  runtime: Runtime;
  /** The worker id the runtime labels with: `reap` by it finds what a build left. */
  workerId: string;
  /** Slack over the computed bound for this runtime's own latency (a loaded 2-core machine). */
  slackMs: number;
  /** Bounds of the generated builds' budgets. */
  budgets: { timeoutMs: [number, number]; graceMs: [number, number]; cleanupMs: [number, number] };
  /** Whether the async-resource check runs (off where the engine client pools sockets). */
  trackResources: boolean;
  /** Resource types a runtime's client keeps alive across builds by design (sockets of an agent). */
  ignoreResources?: readonly string[];
  pipeline: PipelineOptions;
}

/** Settings of a soak run. */
export interface SoakOptions {
  seed: number;
  n: number;
  /** Run only build `only` of the seed. */
  only?: number;
  /**
   * Also inject the faults that hit issue #13's open executor bugs (a log stream that never ends:
   * item 2, unbounded drain). Off until that fix is merged.
   */
  knownBugs: boolean;
  /** Called with each violation line as it is found, and with progress. */
  print?: (line: string) => void;
}

/** One broken invariant. */
interface Violation {
  seed: number;
  build: number;
  message: string;
}

/** The outcome of a soak. */
export interface SoakResult {
  builds: number;
  violations: Violation[];
  /** Milliseconds from each cancel to the end of its build. */
  endAfterCancel: number[];
  statuses: Record<string, number>;
  faults: Record<string, number>;
  summary: string;
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
}

function between(rand: () => number, [min, max]: [number, number]): number {
  return int(rand, min, max);
}

/** The faults of build `rand`'s turn. */
function faultsFor(rand: () => number, seed: number, knownBugs: boolean): FaultOptions {
  const streamFaults: StreamFault[] = ['stall', 'shred', 'end-early', 'error'];
  if (knownBugs) streamFaults.push('never-end');
  const calm = rand() < 0.25;
  return {
    seed,
    delayRate: calm ? 0 : rand() * 0.3,
    maxDelayMs: 150,
    errorRate: calm || rand() < 0.5 ? 0 : rand() * 0.03,
    lostReplyRate: calm || rand() < 0.5 ? 0 : rand() * 0.02,
    cleanupErrors: rand() < 0.1,
    streamRate: calm ? 0 : rand() * 0.5,
    streamFaults,
    maxStallMs: 250,
    ...(!calm && rand() < 0.08 ? { outage: { at: int(rand, 3, 40), calls: int(rand, 1, 12) } } : {}),
  };
}

/** Runs the soak on `target`. Never throws for a violation: they are in the result. */
export async function soak(target: SoakTarget, options: SoakOptions): Promise<SoakResult> {
  const violations: Violation[] = [];
  const endAfterCancel: number[] = [];
  const statuses: Record<string, number> = {};
  const faults: Record<string, number> = {};
  const print = options.print ?? (() => undefined);
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => {
    unhandled.push(reason);
  };
  process.on('unhandledRejection', onUnhandled);
  // The worker's root ctx: long-lived, shared by every build.
  const [root, cancelRoot] = withCancel(background());
  let builds = 0;
  try {
    for (let i = options.only ?? 0; i < (options.only === undefined ? options.n : options.only + 1); i++) {
      const found = await soakBuild(target, options, root, i, { endAfterCancel, statuses, faults, unhandled });
      builds++;
      for (const message of found) {
        const violation = { seed: options.seed, build: i, message };
        violations.push(violation);
        print(`soak violation: seed ${options.seed} build ${i} on ${target.name} (replay: SOAK_SEED=${options.seed} SOAK_ONLY=${i}): ${message}`);
      }
      if (builds % 50 === 0) print(`soak: ${builds} builds on ${target.name}, ${violations.length} violations so far`);
    }
  } finally {
    cancelRoot();
    process.off('unhandledRejection', onUnhandled);
  }
  const p99 = percentile(endAfterCancel, 99);
  const summary = `soak: ${builds} builds, seed ${options.seed}, ${violations.length} violations, p99 end-after-cancel ${Math.round(p99)} ms (${target.name}, ${endAfterCancel.length} cancels)`;
  return { builds, violations, endAfterCancel, statuses, faults, summary };
}

interface Tally {
  endAfterCancel: number[];
  statuses: Record<string, number>;
  faults: Record<string, number>;
  unhandled: unknown[];
}

async function soakBuild(target: SoakTarget, options: SoakOptions, root: Context, i: number, tally: Tally): Promise<string[]> {
  const rand = prng((options.seed ^ Math.imul(i + 1, 0x9e3779b1)) >>> 0);
  const pipeline = randomPipeline(rand, i + 1, target.pipeline);
  const timeoutMs = between(rand, target.budgets.timeoutMs);
  const graceMs = between(rand, target.budgets.graceMs);
  const cleanupMs = between(rand, target.budgets.cleanupMs);
  const faultOptions = faultsFor(rand, (options.seed + i) >>> 0, options.knownBugs);
  const cancelAtCall = rand() < 0.3 ? int(rand, 0, 20) : undefined;
  const cancelVia = rand() < 0.5 ? 'parent' : 'cancelBuild';
  const cancelDelayMs = int(rand, 0, 40);

  const faulty = faultRuntime(target.runtime, faultOptions);
  const reporter = new RecordingReporter();
  const warnings: string[] = [];
  const found: string[] = [];
  const listenersBefore = listenerCount(root.signal);
  const unhandledBefore = tally.unhandled.length;
  const tracker = target.trackResources ? trackAsyncResources({ ignore: target.ignoreResources ?? [], settleMs: 300, frames: 4 }) : undefined;

  const [ctx, cancelParent] = withCancel(root);
  let executor: Executor | undefined;
  let canceledAt: number | undefined;
  let cancelTimer: NodeJS.Timeout | undefined;
  const cancel = (): void => {
    if (canceledAt !== undefined) return;
    canceledAt = performance.now();
    if (cancelVia === 'parent') cancelParent(new Error('soak cancel'));
    else executor?.cancelBuild(new Error('soak cancel'));
  };
  faulty.onCall = (n) => {
    if (n === cancelAtCall) cancelTimer = setTimeout(cancel, cancelDelayMs);
  };
  const started = performance.now();
  // The bound every build must end within, computed from its config: the build timeout, the
  // log-streaming grace, the cleanup limit, plus the injected stalls and delays and the runtime's slack.
  const boundMs = timeoutMs + graceMs + cleanupMs + (faultOptions.maxStallMs ?? 0) + (faultOptions.maxDelayMs ?? 0) + target.slackMs;
  let watchdog: NodeJS.Timeout | undefined;
  const hung = new Promise<'hung'>((resolve) => {
    watchdog = setTimeout(() => resolve('hung'), boundMs * 2 + 5_000);
  });
  const running = runBuild(ctx, {
    build: pipeline.build,
    runtime: faulty.runtime,
    reporter,
    timeoutMs,
    logStreamingGraceMs: graceMs,
    cleanupTimeoutMs: cleanupMs,
    logs: { flushIntervalMs: 5 },
    host: 'soak',
    onStart: (e) => (executor = e),
    logger: { warn: (m) => warnings.push(m) },
  });
  const outcome = await Promise.race([running, hung]);
  const ended = performance.now();
  clearTimeout(watchdog);
  clearTimeout(cancelTimer);
  if (outcome === 'hung') {
    found.push(`the build did not end within twice its bound (${boundMs} ms): it hangs (faults: ${describeFaults(faulty.injected)})`);
    // Unstick it so the soak can go on: cancel, then give it its grace and cleanup again.
    cancelParent(new Error('soak watchdog'));
    let lateTimer: NodeJS.Timeout | undefined;
    const late = await Promise.race([
      running.then(() => 'ended' as const),
      new Promise<'still'>((r) => (lateTimer = setTimeout(() => r('still'), graceMs + cleanupMs + 5_000))),
    ]);
    clearTimeout(lateTimer);
    if (late === 'still') found.push('the build did not end even after a cancel');
  }
  cancelParent();
  const elapsed = ended - started;
  if (outcome !== 'hung') {
    tally.statuses[outcome.status] = (tally.statuses[outcome.status] ?? 0) + 1;
    if (process.env.SOAK_VERBOSE === '1')
      options.print?.(`build ${i}: ${outcome.status} in ${Math.round(elapsed)} ms${outcome.build.error ? `: ${outcome.build.error}` : ''}`);
    if (elapsed > boundMs)
      found.push(
        `ended after ${Math.round(elapsed)} ms, over its bound of ${boundMs} ms (timeout ${timeoutMs} + grace ${graceMs} + cleanup ${cleanupMs} + faults and slack)`,
      );
    if (canceledAt !== undefined && canceledAt < ended) {
      const after = ended - canceledAt;
      tally.endAfterCancel.push(after);
      const cancelBound = graceMs + cleanupMs + (faultOptions.maxStallMs ?? 0) + (faultOptions.maxDelayMs ?? 0) + target.slackMs;
      if (after > cancelBound) found.push(`ended ${Math.round(after)} ms after the cancel, over grace ${graceMs} + cleanup ${cleanupMs} + slack`);
    }
    found.push(...checkStatuses(pipeline.build, reporter, outcome, canceledAt !== undefined && canceledAt < ended));
    found.push(...checkSecrets(pipeline.secretValues, reporter, outcome, warnings));
  }
  for (const f of faulty.injected) tally.faults[f.kind] = (tally.faults[f.kind] ?? 0) + 1;

  // Ask the runtime what the build left: reap by worker removes it and says what it was.
  const cleanupFaulted = faulty.injected.some((f) => CLEANUP_CALLS.has(f.operation) && f.kind !== 'delay');
  try {
    const report = await target.runtime.reap(background(), target.workerId);
    found.push(...checkLeftovers(report, cleanupFaulted));
  } catch (error) {
    found.push(`reap failed: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (listenerCount(root.signal) !== listenersBefore) found.push(`${listenerCount(root.signal) - listenersBefore} listener(s) left on the worker's root ctx`);
  if (tracker !== undefined) {
    const report = await tracker.stop();
    if (!report.ok) found.push(`async resources left: ${report.format()}`);
  }
  for (const reason of tally.unhandled.slice(unhandledBefore))
    found.push(`unhandled rejection: ${reason instanceof Error ? (reason.stack ?? reason.message) : String(reason)}`);
  if (found.length > 0 && process.env.SOAK_VERBOSE === '1') found.push(`(warnings: ${warnings.join(' | ') || 'none'})`);
  if (found.length > 0)
    found.push(
      `(pipeline: ${describePipeline(pipeline.build)}; timeout ${timeoutMs} grace ${graceMs} cleanup ${cleanupMs}; cancel ${cancelAtCall === undefined ? 'none' : `at call ${cancelAtCall} via ${cancelVia}`}; faults: ${describeFaults(faulty.injected)})`,
    );
  return found;
}

function describeFaults(faults: ReturnType<typeof faultRuntime>['injected']): string {
  if (faults.length === 0) return 'none';
  return faults.map((f) => `#${f.call} ${f.operation}${f.subject ? `(${f.subject})` : ''} ${f.kind}${f.detail ? ` ${f.detail}` : ''}`).join(', ');
}

function describePipeline(build: {
  services: { name: string }[];
  steps: { name: string; detach: boolean }[];
  stages: { name: string; needs: string[]; steps: { name: string }[] }[];
}): string {
  const parts = [`services [${build.services.map((s) => s.name).join(' ')}]`];
  if (build.steps.length > 0) parts.push(`steps [${build.steps.map((s) => s.name + (s.detach ? '(detach)' : '')).join(' ')}]`);
  for (const st of build.stages) parts.push(`${st.name}${st.needs.length > 0 ? `<-${st.needs.join(',')}` : ''} [${st.steps.map((s) => s.name).join(' ')}]`);
  return parts.join(', ');
}
