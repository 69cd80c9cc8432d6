import { background, withTimeout } from '@berth/context';
import { parseImageReference, type Build, type Container } from '@berth/pipeline';
import type { ContainerStatus, ReapReport, Runtime, RuntimeCapability, RuntimeConfig } from '@berth/runtime';
import { expect } from '../expect.ts';
import { conformanceBuild, conformanceStep, type ConformanceContainerFields } from '../builders.ts';
import { logSoFar, runToCompletion, setupBuildResources, teardownBuild, type RunResult } from '../drive.ts';
import { describeOutcome, rejectedWith, settleWithin, type CaseHarness } from '../harness.ts';
import type { ConformanceCapability } from '../options.ts';

/** One case of the suite: its group, the expectation it states, and what it needs. */
export interface ConformanceCase {
  readonly group: string;
  readonly name: string;
  /** The capabilities the case needs; a runtime that declares it lacks one of them skips the case. */
  readonly capabilities?: readonly ConformanceCapability[];
  /**
   * The optional contract capability the case checks: it runs only when the plugin declares it
   * (the suite's `capabilities` option), and is reported as optional.
   */
  readonly optional?: RuntimeCapability;
  /**
   * Programs the case's scripts call, besides `sh`, `echo` and `base64` (which every script needs).
   * The preflight checks them; a case whose program is missing is skipped, naming it.
   */
  readonly tools?: readonly string[];
  /** The case reads a log stream while its container runs (skipped when the preflight saw the live tail end early). */
  readonly liveTail?: boolean;
  /** How many times the suite's case timeout this case may take (default 1). */
  readonly timeoutFactor?: number;
  run(h: CaseHarness): Promise<void>;
}

/** A runtime, a tracked one-step build already set up, and its step. */
export interface OneStep {
  runtime: Runtime;
  build: Build;
  step: Container;
}

/** Creates a runtime and sets up a tracked build with one step of the suite's image. */
export async function oneStep(h: CaseHarness, fields: ConformanceContainerFields, config: Partial<RuntimeConfig> = {}): Promise<OneStep> {
  const runtime = await h.runtime(config);
  const build = conformanceBuild();
  const step = conformanceStep(build, 'test', 1, { image: h.options.image, ...fields });
  build.steps = [step];
  h.track(runtime, build);
  await setupBuildResources(h.ctx(), runtime, build);
  return { runtime, build, step };
}

/** Runs one step to its end as the executor does (a live tail re-read after the exit if it ended early). */
export function run(h: CaseHarness, runtime: Runtime, build: Build, step: Container): Promise<RunResult> {
  return runToCompletion(runtime, build, step, { timeoutMs: h.options.timeouts.case, earlyEnd: 'reread' });
}

/** Sets up, runs and tears down a one-step build. */
export async function runOne(h: CaseHarness, fields: ConformanceContainerFields, config: Partial<RuntimeConfig> = {}): Promise<RunResult> {
  const { runtime, build, step } = await oneStep(h, fields, config);
  const result = await run(h, runtime, build, step);
  await teardownBuild(h.ctx(), runtime, build);
  return result;
}

/** Asserts a run's exit code, showing the container's log when it differs. */
export function expectExit(result: Pick<RunResult, 'exit' | 'logs'>, code: number, what = 'exit code'): void {
  expect(result.exit.exitCode, `${what}; the container's log:\n${result.logs}`).toBe(code);
}

/** Asserts a container's state (and exit code), showing its log (read for at most 2 s) when it differs. */
export async function expectState(
  h: CaseHarness,
  runtime: Runtime,
  container: Container,
  state: ContainerStatus['state'],
  exitCode?: number,
  what = `the state of ${container.name}`,
): Promise<void> {
  const status = await runtime.inspectContainer(h.ctx(), container);
  if (status.state === state && (exitCode === undefined || status.exitCode === exitCode)) return;
  const log = await logSoFar(runtime, container);
  const expected = exitCode === undefined ? { state } : { state, exitCode };
  expect(status, `${what}; the container's log:\n${log}`).toMatchObject(expected);
}

/** Asserts that inspecting a removed container rejects `NotFound` within 10 s. */
export async function expectGone(h: CaseHarness, runtime: Runtime, container: Container): Promise<void> {
  const gone = await settleWithin(runtime.inspectContainer(h.ctx(), container), 10_000);
  expect(rejectedWith(gone, 'NotFound'), `inspectContainer ${container.name} after removal ${describeOutcome(gone)}`).toBe(true);
}

/** The effective capabilities of the process that printed `status` (a /proc/self/status). */
function capEff(status: string): bigint {
  const match = /^CapEff:\s*([0-9a-f]+)\s*$/m.exec(status);
  if (!match?.[1]) throw new Error(`no CapEff line in /proc/self/status output: ${JSON.stringify(status.slice(0, 400))}`);
  return BigInt(`0x${match[1]}`);
}
const CAP_SYS_ADMIN = 1n << 21n;
/** Whether the `/proc/self/status` text shows CAP_SYS_ADMIN in the effective set. */
export const hasSysAdmin = (status: string): boolean => (capEff(status) & CAP_SYS_ADMIN) !== 0n;

/** `berth/busybox:1.35` → `berth/busybox`: the familiar name an allowlist entry matches. */
export function imageNameWithoutTag(image: string): string {
  const parsed = parseImageReference(image);
  if (!parsed.ok) return image;
  const { domain, path, name } = parsed.reference;
  return domain === 'docker.io' ? path.replace(/^library\/(?=[^/]+$)/, '') : name;
}

/**
 * Drives a build holding `step` through the lifecycle until some method rejects; returns the
 * operation that rejected with its error, or `undefined` when everything resolved.
 */
export async function firstRejection(
  h: CaseHarness,
  fields: ConformanceContainerFields,
  limitMs: number,
): Promise<{ operation: string; outcome: string; error: unknown } | undefined> {
  const runtime = await h.runtime();
  const build = conformanceBuild();
  const step = conformanceStep(build, 'test', 1, fields);
  build.steps = [step];
  h.track(runtime, build);
  const started = performance.now();
  const [ctx, cancel] = withTimeout(background(), limitMs);
  const steps: [string, () => Promise<unknown>][] = [
    ['setupBuild', () => runtime.setupBuild(ctx, build)],
    ['createNetwork', () => runtime.createNetwork(ctx, build)],
    ['createVolume', () => runtime.createVolume(ctx, build)],
    ['setupContainer', () => runtime.setupContainer(ctx, step, build)],
    ['assembleBuild', () => runtime.assembleBuild(ctx, build)],
    ['runContainer', () => runtime.runContainer(ctx, step, build)],
    ['waitContainer', () => runtime.waitContainer(ctx, step)],
  ];
  try {
    for (const [operation, call] of steps) {
      const outcome = await settleWithin(call(), limitMs + 2_000, started);
      if (outcome.status !== 'fulfilled')
        return { operation, outcome: describeOutcome(outcome), error: outcome.status === 'rejected' ? outcome.reason : undefined };
    }
    return undefined;
  } finally {
    cancel();
  }
}

/** Asserts a reap report removed nothing. */
export function expectNothingLeft(report: ReapReport): void {
  const { containers, networks, volumes, pods } = report;
  expect({ containers, networks, volumes, pods }, 'reap found resources left behind').toEqual({ containers: [], networks: [], volumes: [], pods: [] });
}

/**
 * Thrown by a case that finds, once it has a runtime, that it does not apply (an optional
 * capability the plugin neither declared nor implements): the suite reports the case as skipped
 * with this reason.
 */
export class CaseSkipped extends Error {
  override readonly name = 'CaseSkipped';
}
