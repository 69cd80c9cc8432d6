import { createHash } from 'node:crypto';
import type { Writable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { background, withCancel, withTimeout } from '@berth/context';
import { parseImageReference, type Build, type Container } from '@berth/pipeline';
import { isRuntimeError, type ReapReport, type Runtime, type RuntimeConfig } from '@berth/runtime';
import { expect } from 'vitest';
import { conformanceBuild, conformanceService, conformanceStep, type ConformanceContainerFields } from './builders.ts';
import { collectStream, runToCompletion, setupBuildResources, teardownBuild, waitForExit } from './drive.ts';
import { describeError, describeOutcome, pollUntil, rejectedWith, settleWithin, type CaseHarness } from './harness.ts';
import type { ConformanceCapability } from './options.ts';

/** One case of the suite: its group, the expectation it states, and the capability it needs, if any. */
export interface ConformanceCase {
  readonly group: string;
  readonly name: string;
  readonly capability?: ConformanceCapability;
  /** How many times the suite's case timeout this case may take (default 1). */
  readonly timeoutFactor?: number;
  run(h: CaseHarness): Promise<void>;
}

/** A runtime, a tracked one-step build already set up, and its step. */
interface OneStep {
  runtime: Runtime;
  build: Build;
  step: Container;
}

async function oneStep(h: CaseHarness, fields: ConformanceContainerFields, config: Partial<RuntimeConfig> = {}): Promise<OneStep> {
  const runtime = await h.runtime(config);
  const build = conformanceBuild();
  const step = conformanceStep(build, 'test', 1, { image: h.options.image, ...fields });
  build.steps = [step];
  h.track(runtime, build);
  await setupBuildResources(h.ctx(), runtime, build);
  return { runtime, build, step };
}

async function runOne(h: CaseHarness, fields: ConformanceContainerFields, config: Partial<RuntimeConfig> = {}) {
  const { runtime, build, step } = await oneStep(h, fields, config);
  const result = await runToCompletion(runtime, build, step, { timeoutMs: h.options.timeouts.case });
  await teardownBuild(h.ctx(), runtime, build);
  return result;
}

/** The effective capabilities of the process that printed `status` (a /proc/self/status). */
function capEff(status: string): bigint {
  const match = /^CapEff:\s*([0-9a-f]+)\s*$/m.exec(status);
  if (!match?.[1]) throw new Error(`no CapEff line in /proc/self/status output: ${JSON.stringify(status.slice(0, 400))}`);
  return BigInt(`0x${match[1]}`);
}
const CAP_SYS_ADMIN = 1n << 21n;
const hasSysAdmin = (status: string): boolean => (capEff(status) & CAP_SYS_ADMIN) !== 0n;

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
async function firstRejection(
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
      if (outcome.status !== 'fulfilled') return { operation, outcome: describeOutcome(outcome), error: outcome.status === 'rejected' ? outcome.reason : undefined };
    }
    return undefined;
  } finally {
    cancel();
  }
}

/** An exit-code case: `script` must end with `code`. */
function exitCase(name: string, script: string[], code: number, logs?: string): ConformanceCase {
  return {
    group: 'container',
    name,
    async run(h) {
      const result = await runOne(h, { script });
      expect(result.exit.exitCode, `exit code; logs: ${JSON.stringify(result.logs)}`).toBe(code);
      if (logs !== undefined) expect(result.logs).toBe(logs);
    },
  };
}

/** A logs case: `script` must produce exactly `logs`. */
function logsCase(name: string, script: string[], logs: string, exitCode = 0): ConformanceCase {
  return {
    group: 'logs',
    name,
    async run(h) {
      const result = await runOne(h, { script });
      expect(result.logs).toBe(logs);
      expect(result.exit.exitCode).toBe(exitCode);
    },
  };
}

const LARGE_LOG_PATTERN = 'berth conformance large log 0123456789abcdefghijklmnopqrstuvwxyz';
/** The most a tail stream may hold while its reader pauses for a second (a few chunks, not the log). */
const LARGE_LOG_MAX_BUFFERED = 8 * 1024 * 1024;

/** The sha256 of `total` bytes of `yes PATTERN` output, computed in slices. */
function expectedYesHash(pattern: string, total: number): string {
  const line = Buffer.from(`${pattern}\n`);
  const block = Buffer.concat(Array.from({ length: Math.ceil(65_536 / line.length) }, () => line));
  const hash = createHash('sha256');
  let left = total;
  while (left > 0) {
    const piece = left >= block.length ? block : block.subarray(0, left);
    hash.update(piece);
    left -= piece.length;
  }
  return hash.digest('hex');
}

/** Every case of the suite, in the order they run. */
export function conformanceCases(): ConformanceCase[] {
  return [
    // ---- container ----------------------------------------------------------------------------
    {
      group: 'container',
      name: 'runs the commands as the command line when there is no entrypoint, exit code 0',
      async run(h) {
        const result = await runOne(h, { commands: ['echo', 'hello', 'from', 'commands'] });
        expect(result.logs).toBe('hello from commands\n');
        expect(result.exit.exitCode).toBe(0);
      },
    },
    {
      group: 'container',
      name: 'runs the entrypoint with the commands as its arguments',
      async run(h) {
        const result = await runOne(h, { entrypoint: ['echo', 'entry'], commands: ['one', 'two'] });
        expect(result.logs).toBe('entry one two\n');
        expect(result.exit.exitCode).toBe(0);
      },
    },
    {
      group: 'container',
      name: 'runs a Vela build script (VELA_BUILD_SCRIPT through /bin/sh -e) line by line',
      async run(h) {
        const result = await runOne(h, { script: ['echo first', 'echo second'] });
        expect(result.logs).toBe('first\nsecond\n');
        expect(result.exit.exitCode).toBe(0);
      },
    },
    exitCase('reports exit code 1 and stops the script at its first failing command', ['echo before', 'false', 'echo after'], 1, 'before\n'),
    exitCase('reports another exit code (3) as is', ['exit 3'], 3),
    exitCase("reports exit code 137 when the step's command is killed with SIGKILL", ["sh -c 'kill -9 $$'"], 137),
    {
      group: 'container',
      name: "passes the container's environment to its process, values verbatim",
      async run(h) {
        const special = `a=b c 'single' "double" $NOT_EXPANDED \\ end`;
        const result = await runOne(h, {
          script: ['echo "value=$BERTH_CONFORMANCE_VALUE"', `printf '%s\\n' "$BERTH_CONFORMANCE_SPECIAL"`],
          environment: { BERTH_CONFORMANCE_VALUE: 'hello conformance', BERTH_CONFORMANCE_SPECIAL: special },
        });
        expect(result.logs).toBe(`value=hello conformance\n${special}\n`);
      },
    },
    {
      group: 'container',
      name: "runs in the container's working directory",
      async run(h) {
        const directory = `${h.options.workspacePath}/src/conformance`;
        const result = await runOne(h, { script: ['pwd'], directory });
        expect(result.logs).toBe(`${directory}\n`);
      },
    },
    {
      group: 'container',
      name: "runs as the container's user",
      capability: 'user',
      async run(h) {
        const result = await runOne(h, { script: ['id -u'], user: '1000' });
        expect(result.logs).toBe('1000\n');
      },
    },
    {
      group: 'container',
      name: 'inspectContainer reports created before the run and exited with the exit code after it',
      async run(h) {
        const { runtime, build, step } = await oneStep(h, { script: ['exit 5'] });
        const before = await runtime.inspectContainer(h.ctx(), step);
        expect(before.state).toBe('created');
        const result = await runToCompletion(runtime, build, step);
        expect(result.exit.exitCode).toBe(5);
        const after = await runtime.inspectContainer(h.ctx(), step);
        expect(after).toMatchObject({ state: 'exited', exitCode: 5 });
      },
    },

    // ---- logs ---------------------------------------------------------------------------------
    logsCase(
      'delivers stdout and stderr interleaved in the order they were written',
      ['echo out-1', 'sleep 0.2', 'echo err-1 >&2', 'sleep 0.2', 'echo out-2', 'sleep 0.2', 'echo err-2 >&2', 'sleep 0.2', 'echo out-3'],
      'out-1\nerr-1\nout-2\nerr-2\nout-3\n',
    ),
    logsCase('delivers output without a trailing newline', ['echo first', 'printf no-newline'], 'first\nno-newline'),
    logsCase('delivers output under 5 bytes', ['printf ab'], 'ab'),
    logsCase(
      'delivers the output written just before the process exits',
      ['echo start', 'sleep 0.5', 'echo last-line-before-exit', 'exit 4'],
      'start\nlast-line-before-exit\n',
      4,
    ),
    {
      group: 'logs',
      name: 'a tail opened after the container exited returns all its output, every time',
      async run(h) {
        // Pauses between stream switches: engines stamp stdout and stderr from separate readers, so
        // lines written back to back on different streams have no order to keep (the ordering case
        // above checks interleaving); this case is about getting everything after the exit.
        const { runtime, build, step } = await oneStep(h, { script: ['echo a', 'sleep 0.2', 'echo b >&2', 'sleep 0.2', 'printf c'] });
        await runtime.runContainer(h.ctx(), step, build);
        const exit = await waitForExit(runtime, step, h.options.timeouts.case);
        expect(exit.exitCode).toBe(0);
        for (let attempt = 0; attempt < 2; attempt++) {
          const ctx = h.ctx();
          const logs = await collectStream(ctx, await runtime.tailContainer(ctx, step));
          expect(logs.toString()).toBe('a\nb\nc');
        }
      },
    },
    {
      group: 'logs',
      name: 'delivers 50 MiB of output completely and in order while the reader holds little memory',
      capability: 'largeLogs',
      timeoutFactor: 3,
      async run(h) {
        const total = h.options.largeLogBytes;
        const { runtime, build, step } = await oneStep(h, { script: [`yes '${LARGE_LOG_PATTERN}' | head -c ${total}`] });
        const ctx = h.ctx(h.options.timeouts.case * 3);
        const rssBefore = process.memoryUsage().rss;
        let rssPeak = rssBefore;
        let bytes = 0;
        let nextPause = 1 << 20;
        let bufferedWhilePaused: number | undefined;
        const hash = createHash('sha256');
        await runtime.runContainer(ctx, step, build);
        const stream = await runtime.tailContainer(ctx, step);
        await collectStream(ctx, stream, async (chunk) => {
          hash.update(chunk);
          bytes += chunk.length;
          if (bytes >= nextPause) {
            // A slow-ish reader: the runtime must hold back, not buffer the whole log for us.
            nextPause += 1 << 20;
            rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
            if (bufferedWhilePaused === undefined) {
              // Once, a reader that stops for a second: what piles up in the stream is the proof.
              await delay(1_000);
              bufferedWhilePaused = stream.readableLength + ((stream as unknown as Partial<Writable>).writableLength ?? 0);
            }
            await delay(2);
          }
        });
        const exit = await waitForExit(runtime, step, h.options.timeouts.case);
        expect(exit.exitCode).toBe(0);
        expect(bytes).toBe(total);
        expect(hash.digest('hex'), 'sha256 of the log').toBe(expectedYesHash(LARGE_LOG_PATTERN, total));
        expect(bufferedWhilePaused, 'bytes buffered in the tail stream while its reader paused for 1 s (the runtime must apply backpressure)').toBeLessThan(LARGE_LOG_MAX_BUFFERED);
        const growth = rssPeak - rssBefore;
        expect(growth, `RSS grew by ${Math.round(growth / 1e6)} MB while reading`).toBeLessThan(h.options.largeLogMemoryLimitBytes);
      },
    },
    {
      group: 'logs',
      name: "a log stream is destroyed with Canceled within 1 s of its ctx being cancelled",
      async run(h) {
        const { runtime, build, step } = await oneStep(h, { script: ['echo started', 'sleep 30'] });
        await runtime.runContainer(h.ctx(), step, build);
        const [ctx, cancel] = withCancel(h.ctx());
        const stream = await runtime.tailContainer(ctx, step);
        let seen = '';
        const ended = new Promise<unknown>((resolve) => {
          stream.on('data', (chunk: Buffer) => (seen += chunk.toString()));
          stream.on('error', resolve);
          stream.on('close', () => resolve(undefined));
        });
        expect(await pollUntil(() => Promise.resolve(seen.includes('started')), 10_000), 'the first line arrives while the container runs').toBe(true);
        const started = performance.now();
        cancel();
        const outcome = await settleWithin(ended, h.options.timeouts.cancel + 4_000, started);
        stream.destroy();
        expect(outcome.status, describeOutcome(outcome)).toBe('fulfilled');
        expect(outcome.ms, describeOutcome(outcome)).toBeLessThan(h.options.timeouts.cancel);
        const error = outcome.status === 'fulfilled' ? outcome.value : undefined;
        expect(isRuntimeError(error, 'Canceled'), `stream error: ${describeError(error)}`).toBe(true);
        expect(stream.destroyed).toBe(true);
      },
    },

    // ---- cancellation -------------------------------------------------------------------------
    {
      group: 'cancellation',
      name: 'waitContainer rejects with Canceled within 1 s of its ctx being cancelled and leaves the container running; removal then leaves nothing',
      async run(h) {
        const { runtime, build, step } = await oneStep(h, { script: ['sleep 30'] });
        await runtime.runContainer(h.ctx(), step, build);
        const running = await pollUntil(async () => (await runtime.inspectContainer(h.ctx(), step)).state === 'running', 10_000);
        expect(running, 'the container runs').toBe(true);
        const [ctx, cancel] = withCancel(background());
        const waiting = runtime.waitContainer(ctx, step);
        await delay(200);
        const started = performance.now();
        cancel();
        const outcome = await settleWithin(waiting, h.options.timeouts.cancel + 4_000, started);
        expect(rejectedWith(outcome, 'Canceled'), describeOutcome(outcome)).toBe(true);
        expect(outcome.ms, describeOutcome(outcome)).toBeLessThan(h.options.timeouts.cancel);
        expect((await runtime.inspectContainer(h.ctx(), step)).state, 'the container still runs').toBe('running');

        await runtime.removeContainer(h.ctx(), step);
        await runtime.removeBuild(h.ctx(), build);
        const gone = await settleWithin(runtime.inspectContainer(h.ctx(), step), 10_000);
        expect(rejectedWith(gone, 'NotFound'), describeOutcome(gone)).toBe(true);
        expectNothingLeft(await runtime.reap(h.ctx(), h.workerIdOf(runtime)));
      },
    },
    {
      group: 'cancellation',
      name: 'waitContainer rejects with DeadlineExceeded within 1 s of its ctx deadline',
      async run(h) {
        const { runtime, build, step } = await oneStep(h, { script: ['sleep 30'] });
        await runtime.runContainer(h.ctx(), step, build);
        const [ctx, cancel] = withTimeout(background(), 300);
        const started = performance.now();
        const outcome = await settleWithin(runtime.waitContainer(ctx, step), 300 + h.options.timeouts.cancel + 4_000, started);
        cancel();
        expect(rejectedWith(outcome, 'DeadlineExceeded'), describeOutcome(outcome)).toBe(true);
        expect(outcome.ms - 300, describeOutcome(outcome)).toBeLessThan(h.options.timeouts.cancel);
      },
    },
    {
      group: 'cancellation',
      name: 'removeContainer stops a running container, a pending waitContainer then settles, and the container is gone',
      async run(h) {
        const { runtime, build, step } = await oneStep(h, { script: ['sleep 30'] }, { stopGraceMs: 1_000 });
        await runtime.runContainer(h.ctx(), step, build);
        const waiting = settleWithin(runtime.waitContainer(h.ctx(), step), 20_000);
        await pollUntil(async () => (await runtime.inspectContainer(h.ctx(), step)).state === 'running', 10_000);
        await runtime.removeContainer(h.ctx(), step);
        const outcome = await waiting;
        const settled =
          (outcome.status === 'fulfilled' && outcome.value.exitCode !== 0) || rejectedWith(outcome, 'NotFound', 'ContainerFailed');
        expect(settled, `waitContainer ${describeOutcome(outcome)}`).toBe(true);
        const gone = await settleWithin(runtime.inspectContainer(h.ctx(), step), 10_000);
        expect(rejectedWith(gone, 'NotFound'), describeOutcome(gone)).toBe(true);
        await runtime.removeContainer(h.ctx(), step);
      },
    },

    // ---- images -------------------------------------------------------------------------------
    {
      group: 'images',
      name: 'a missing image with pull policy never is reported as ImageNotFound, promptly',
      async run(h) {
        const fields: ConformanceContainerFields = { image: h.options.missingImage, pull: 'never', script: ['echo should-not-run'] };
        const started = performance.now();
        const failure = await firstRejection(h, fields, h.options.timeouts.imageError);
        expect(failure, 'some lifecycle method must reject').toBeDefined();
        expect(isRuntimeError(failure?.error, 'ImageNotFound'), `${failure?.operation} ${failure?.outcome}`).toBe(true);
        expect(performance.now() - started).toBeLessThan(h.options.timeouts.imageError);
      },
    },
    {
      group: 'images',
      name: 'an invalid image reference is reported as InvalidConfig, promptly',
      async run(h) {
        const fields: ConformanceContainerFields = { image: h.options.invalidImage, script: ['echo should-not-run'] };
        const started = performance.now();
        const failure = await firstRejection(h, fields, h.options.timeouts.imageError);
        expect(failure, 'some lifecycle method must reject').toBeDefined();
        expect(isRuntimeError(failure?.error, 'InvalidConfig'), `${failure?.operation} ${failure?.outcome}`).toBe(true);
        expect(performance.now() - started).toBeLessThan(h.options.timeouts.imageError);
      },
    },

    // ---- builds -------------------------------------------------------------------------------
    {
      group: 'builds',
      name: 'a detached service is reachable by its name from a step of the same build',
      capability: 'serviceNetworking',
      async run(h) {
        const runtime = await h.runtime();
        const build = conformanceBuild();
        const service = conformanceService(build, 'conformance-echo', 1, {
          image: h.options.image,
          script: ['nc -ll -p 8080 -e echo hello-from-service'],
        });
        const attempts = Array.from({ length: 60 }, (_, i) => i + 1).join(' ');
        const step = conformanceStep(build, 'client', 1, {
          image: h.options.image,
          script: [
            `for attempt in ${attempts}; do`,
            '  if nc conformance-echo 8080 </dev/null 2>/dev/null; then exit 0; fi',
            '  sleep 0.25',
            'done',
            'echo service-unreachable',
            'exit 1',
          ],
        });
        build.services = [service];
        build.steps = [step];
        h.track(runtime, build);
        await setupBuildResources(h.ctx(), runtime, build);
        await runtime.runContainer(h.ctx(), service, build);
        const result = await runToCompletion(runtime, build, step, { timeoutMs: h.options.timeouts.case });
        expect(result.logs).toContain('hello-from-service');
        expect(result.exit.exitCode).toBe(0);
        await teardownBuild(h.ctx(), runtime, build);
      },
    },
    {
      group: 'builds',
      name: 'the steps of one build share its workspace',
      async run(h) {
        const runtime = await h.runtime();
        const ws = h.options.workspacePath;
        const build = conformanceBuild();
        const writer = conformanceStep(build, 'writer', 1, { image: h.options.image, script: [`echo shared-marker > ${ws}/x`] });
        const reader = conformanceStep(build, 'reader', 2, { image: h.options.image, script: [`cat ${ws}/x`] });
        build.steps = [writer, reader];
        h.track(runtime, build);
        await setupBuildResources(h.ctx(), runtime, build);
        expect((await runToCompletion(runtime, build, writer)).exit.exitCode).toBe(0);
        const read = await runToCompletion(runtime, build, reader);
        expect(read.logs).toBe('shared-marker\n');
        expect(read.exit.exitCode).toBe(0);
        await teardownBuild(h.ctx(), runtime, build);
      },
    },
    {
      group: 'builds',
      name: "two builds running at the same time do not see each other's workspace",
      capability: 'parallelBuilds',
      async run(h) {
        const runtime = await h.runtime();
        const ws = h.options.workspacePath;
        const one = async (mine: string, theirs: string) => {
          const build = conformanceBuild();
          const step = conformanceStep(build, 'marker', 1, {
            image: h.options.image,
            script: [
              `echo ${mine} > ${ws}/marker-${mine}`,
              'sleep 1',
              `cat ${ws}/marker-${mine}`,
              `if [ -e ${ws}/marker-${theirs} ]; then echo saw-${theirs}; else echo no-${theirs}; fi`,
            ],
          });
          build.steps = [step];
          h.track(runtime, build);
          await setupBuildResources(h.ctx(), runtime, build);
          const result = await runToCompletion(runtime, build, step);
          await teardownBuild(h.ctx(), runtime, build);
          return result;
        };
        const [a, b] = await Promise.all([one('a', 'b'), one('b', 'a')]);
        expect(a.logs).toBe('a\nno-b\n');
        expect(b.logs).toBe('b\nno-a\n');
      },
    },

    // ---- cleanup ------------------------------------------------------------------------------
    {
      group: 'cleanup',
      name: 'removeBuild alone removes every container of the build, running or exited, and is idempotent',
      async run(h) {
        const runtime = await h.runtime();
        const build = conformanceBuild();
        const service = conformanceService(build, 'sleeper', 1, { image: h.options.image, script: ['sleep 300'] });
        const step = conformanceStep(build, 'done', 1, { image: h.options.image, script: ['echo done'] });
        build.services = [service];
        build.steps = [step];
        h.track(runtime, build);
        await setupBuildResources(h.ctx(), runtime, build);
        await runtime.runContainer(h.ctx(), service, build);
        expect((await runToCompletion(runtime, build, step)).exit.exitCode).toBe(0);

        await runtime.removeBuild(h.ctx(), build);
        for (const container of [service, step]) {
          const outcome = await settleWithin(runtime.inspectContainer(h.ctx(), container), 10_000);
          expect(rejectedWith(outcome, 'NotFound'), `inspectContainer ${container.name} ${describeOutcome(outcome)}`).toBe(true);
        }
        expectNothingLeft(await runtime.reap(h.ctx(), h.workerIdOf(runtime)));
        await runtime.removeBuild(h.ctx(), build);
        await runtime.removeContainer(h.ctx(), step);
      },
    },
    {
      group: 'cleanup',
      name: "reap removes what a crashed worker left behind, sparing the builds in keep and other workers' builds",
      capability: 'reap',
      timeoutFactor: 2,
      async run(h) {
        const workerId = h.newWorkerId();
        const crashed = await h.runtime({ workerId });
        const leftBuilds: Build[] = [];
        for (const name of ['first', 'second']) {
          const build = conformanceBuild();
          const service = conformanceService(build, `left-${name}`, 1, { image: h.options.image, script: ['sleep 300'] });
          build.services = [service];
          await setupBuildResources(h.ctx(), crashed, build);
          await crashed.runContainer(h.ctx(), service, build);
          leftBuilds.push(build);
        }
        // The worker "crashes": nothing is removed; its process's own sockets go away.
        await crashed.close().catch(() => undefined);

        const other = await h.runtime();
        const otherBuild = conformanceBuild();
        const otherService = conformanceService(otherBuild, 'other', 1, { image: h.options.image, script: ['sleep 300'] });
        otherBuild.services = [otherService];
        h.track(other, otherBuild);
        await setupBuildResources(h.ctx(), other, otherBuild);
        await other.runContainer(h.ctx(), otherService, otherBuild);

        const successor = await h.runtime({ workerId });
        const [first, second] = leftBuilds as [Build, Build];
        h.track(successor, first);
        h.track(successor, second);
        const removed = await successor.reap(h.ctx(), workerId, new Set([second.id]));
        expect(removed.containers.length + removed.pods.length, `first reap: ${JSON.stringify(removed)}`).toBeGreaterThan(0);
        expectNothingLeft(await successor.reap(h.ctx(), workerId, new Set([second.id])));
        const rest = await successor.reap(h.ctx(), workerId);
        expect(rest.containers.length + rest.pods.length, `reap without keep: ${JSON.stringify(rest)}`).toBeGreaterThan(0);
        expectNothingLeft(await successor.reap(h.ctx(), workerId));

        expect((await other.inspectContainer(h.ctx(), otherService)).state, "the other worker's service").toBe('running');
        await teardownBuild(h.ctx(), other, otherBuild);
      },
    },

    // ---- privileged ---------------------------------------------------------------------------
    {
      group: 'privileged',
      name: 'a container asking for privileged with an image not in privilegedImages runs unprivileged',
      async run(h) {
        const result = await runOne(h, { privileged: true, script: ['cat /proc/self/status'] }, { privilegedImages: ['berth/not-this-image'] });
        expect(result.exit.exitCode).toBe(0);
        expect(hasSysAdmin(result.logs), 'CAP_SYS_ADMIN in CapEff').toBe(false);
      },
    },
    {
      group: 'privileged',
      name: 'a container not asking for privileged runs unprivileged even with an allowlisted image',
      async run(h) {
        const result = await runOne(h, { privileged: false, script: ['cat /proc/self/status'] }, { privilegedImages: [imageNameWithoutTag(h.options.image)] });
        expect(result.exit.exitCode).toBe(0);
        expect(hasSysAdmin(result.logs), 'CAP_SYS_ADMIN in CapEff').toBe(false);
      },
    },
    {
      group: 'privileged',
      name: 'a container asking for privileged with an allowlisted image runs privileged',
      capability: 'privileged',
      async run(h) {
        const result = await runOne(h, { privileged: true, script: ['cat /proc/self/status'] }, { privilegedImages: [imageNameWithoutTag(h.options.image)] });
        expect(result.exit.exitCode).toBe(0);
        expect(hasSysAdmin(result.logs), 'CAP_SYS_ADMIN in CapEff').toBe(true);
      },
    },
  ];
}

/** Asserts a reap report removed nothing. */
function expectNothingLeft(report: ReapReport): void {
  const { containers, networks, volumes, pods } = report;
  expect({ containers, networks, volumes, pods }, 'reap found resources left behind').toEqual({ containers: [], networks: [], volumes: [], pods: [] });
}
