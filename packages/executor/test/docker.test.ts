/**
 * The executor on the real Docker engine (local images berth/busybox and berth/pause; never a pull).
 */
import { execFileSync } from 'node:child_process';
import { background, type Context } from '@berth/context';
import type { Container } from '@berth/pipeline';
import type { Runtime } from '@berth/runtime';
import { dockerRuntime } from '@berth/runtime-docker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runBuild } from '../src/run-build.ts';
import { BUSYBOX, ctn, makeBuild, RecordingReporter, secret, stage } from './helpers.ts';

const WORKER = `executor-test-${process.pid}`;
const STOP_GRACE_MS = 1000;
let runtime: Runtime;

function leftovers(): string {
  return execFileSync('docker', ['ps', '-aq', '--filter', `label=berth.dev/worker=${WORKER}`], { encoding: 'utf8' }).trim();
}

beforeAll(async () => {
  runtime = await dockerRuntime().create(background(), { workerId: WORKER, stopGraceMs: STOP_GRACE_MS });
});

afterAll(async () => {
  await runtime.reap(background(), WORKER).catch(() => undefined);
  await runtime.close();
});

const t0 = Date.now();
const trace = () =>
  process.env.BERTH_TRACE ? { debug: (m: string) => console.log(Date.now() - t0, m), warn: (m: string) => console.log(Date.now() - t0, 'WARN', m) } : undefined;
const never = { pull: 'never' as const };

// Creating and starting a container takes seconds on a loaded 2-core machine.
describe('runBuild on Docker', { timeout: 180_000 }, () => {
  it('runs a pipeline: a service reached by name, stages with needs, a failing step with continue, secrets masked', async () => {
    const reporter = new RecordingReporter();
    const failing = ctn('flaky', { ...never, commands: ['echo about to fail', 'exit 5'] });
    failing.ruleset.continue = true;
    const build = makeBuild({
      secrets: [secret('token', 's3cr3t-Tok3n-value'), secret('key', 'multi\nline-key')],
      services: [
        ctn('web', {
          ...never,
          entrypoint: ['sh', '-c'],
          commands: ['mkdir -p /www && echo pong > /www/index.html && echo serving && exec httpd -f -p 8080 -h /www'],
        }),
      ],
      stages: [
        stage('prepare', [ctn('write', { ...never, commands: ['echo from-prepare > /vela/shared.txt'] })]),
        stage(
          'check',
          [
            ctn('read', { ...never, commands: ['cat /vela/shared.txt'] }),
            failing,
            ctn('client', { ...never, commands: ['for i in 1 2 3 4 5 6 7 8 9 10; do wget -q -O - http://web:8080/ && exit 0; sleep 0.5; done; exit 1'] }),
            ctn('secrets', {
              ...never,
              commands: ['echo "token is $TOKEN"', 'printf "%s\\n" "$KEY"', 'echo "$TOKEN" | cut -c1-6'],
              secrets: [
                { source: 'token', target: 'TOKEN' },
                { source: 'key', target: 'KEY' },
              ],
            }),
          ],
          { needs: ['prepare'] },
        ),
      ],
    });
    const result = await runBuild(background(), { build, runtime, reporter, logStreamingGraceMs: 60_000, logs: { flushIntervalMs: 100 }, logger: trace() });
    expect(result.build.error).toBeUndefined();
    expect(result.status).toBe('success');
    expect(reporter.log('read')).toContain('from-prepare');
    expect(reporter.last('flaky')).toMatchObject({ status: 'failure', exitCode: 5 });
    expect(reporter.log('flaky')).toContain('about to fail');
    expect(reporter.log('client')).toContain('pong');
    expect(reporter.log('web')).toContain('serving');
    expect(reporter.last('web')).toMatchObject({ kind: 'service', status: 'success' });
    const log = reporter.log('secrets');
    expect(log).toContain('token is ***');
    expect(log).toContain('***\n');
    expect(log).not.toContain('s3cr3t-Tok3n-value');
    expect(log).not.toContain('line-key');
    expect(log).toContain('s3cr3t\n'); // a part of a secret is not the secret
    expect(reporter.log('init')).toContain('> Inspecting runtime network...');
    expect(leftovers()).toBe('');
  });

  it('times out: the running step fails with 137, the build errors, nothing is left', async () => {
    const reporter = new RecordingReporter();
    const build = makeBuild({ steps: [ctn('sleepy', { ...never, commands: ['echo start', 'sleep 60'] }), ctn('after', { ...never, commands: ['true'] })] });
    const started = Date.now();
    // Generous: on a loaded 2-core machine creating the network and starting a container take seconds.
    const result = await runBuild(background(), { build, runtime, reporter, timeoutMs: 10_000, logger: trace() });
    const took = Date.now() - started;
    expect(result.status).toBe('error');
    expect(result.build.error).toBe('the build timed out after 10s');
    expect(reporter.last('sleepy')).toMatchObject({ status: 'failure', exitCode: 137 });
    expect(reporter.last('after')).toMatchObject({ status: 'killed', exitCode: 137 });
    expect(reporter.log('sleepy')).toContain('start');
    expect(took).toBeLessThan(10_000 + STOP_GRACE_MS + 8000);
    expect(leftovers()).toBe('');
  });

  it('a cancel ends the build within 2 s after the stop grace', async () => {
    const reporter = new RecordingReporter();
    const build = makeBuild({
      services: [ctn('db', { image: process.env.BERTH_PAUSE_IMAGE ?? 'berth/pause:1', ...never })],
      steps: [ctn('long', { ...never, commands: ['echo running', 'sleep 60'] })],
    });
    let canceledAt = 0;
    // The engine's own time to stop and remove the step (its stop grace and its latency).
    let engineMs = 0;
    const timed = new Proxy(runtime, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop, target);
        if (prop !== 'removeContainer' || typeof value !== 'function') return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
        return async (ctx: Context, container: Container) => {
          const started = Date.now();
          try {
            await target.removeContainer(ctx, container);
          } finally {
            if (container.name === 'long') engineMs = Date.now() - started;
          }
        };
      },
    });
    const result = await runBuild(background(), {
      build,
      runtime: timed,
      reporter,
      logger: trace(),
      onStart: (executor) => {
        const poll = setInterval(() => {
          if (reporter.log('long').includes('running')) {
            clearInterval(poll);
            canceledAt = Date.now();
            executor.cancelBuild(new Error('canceled from the test'));
          }
        }, 50);
      },
    });
    const afterCancel = Date.now() - canceledAt;
    expect(canceledAt).toBeGreaterThan(0);
    expect(result.status).toBe('canceled');
    expect(reporter.last('long')).toMatchObject({ status: 'canceled', exitCode: 137 });
    // Within 2 s after the stop grace, not counting the engine's latency beyond the grace, which
    // on a loaded machine is itself seconds (`docker stop -t 1` of a sleeping shell: 2.5 s at load 9).
    expect(engineMs).toBeGreaterThanOrEqual(STOP_GRACE_MS);
    expect(afterCancel - (engineMs - STOP_GRACE_MS)).toBeLessThan(STOP_GRACE_MS + 2000);
    expect(afterCancel).toBeLessThan(STOP_GRACE_MS + 8000);
    console.log(
      `cancel: build ended ${afterCancel} ms after the cancel; the engine took ${engineMs} ms to stop and remove the step (grace ${STOP_GRACE_MS} ms)`,
    );
    expect(leftovers()).toBe('');
  });

  it('reports a missing image clearly, without pulling', async () => {
    const reporter = new RecordingReporter();
    const build = makeBuild({ steps: [ctn('ghost', { image: 'berth/does-not-exist:1', ...never, commands: ['true'] })] });
    const result = await runBuild(background(), { build, runtime, reporter });
    expect(result.status).toBe('error');
    expect(reporter.last('ghost')?.error).toMatch(/berth\/does-not-exist:1/);
    expect(reporter.last('init')?.status).toBe('failure');
    expect(leftovers()).toBe('');
  });

  // Docker creates a container with its environment: a lazy secret (pull: step_start, loaded in
  // planStep, go-vela/worker executor/linux/step.go PlanStep) must be loaded before the create.
  it('a lazy secret (pull: step_start) reaches the step on Docker', async () => {
    const reporter = new RecordingReporter();
    const build = makeBuild({
      secrets: [secret('lazy', 'lazy-docker-value-7')],
      steps: [
        ctn('first', { ...never, commands: ['echo first'] }),
        ctn('uses-lazy', { ...never, commands: ['echo "lazy=[$LAZY]"'], secrets: [{ source: 'lazy', target: 'LAZY' }] }),
      ],
    });
    build.secrets[0]!.pull = 'step_start';
    const result = await runBuild(background(), { build, runtime, reporter });
    expect(result.status).toBe('success');
    expect(reporter.log('uses-lazy')).toContain('lazy=[***]');
    expect(leftovers()).toBe('');
  });

  it('uses the busybox image the tests expect', () => {
    expect(BUSYBOX).toMatch(/busybox/);
  });
  // Vela's outputs (go-vela/worker executor/linux/outputs.go poll, internal/outputs/process.go Process)
  // on Docker: a step set up at assemble is set up again with the outputs; one whose image needs an
  // output is set up when it starts; the outputs volume goes with the build.
  it('outputs: later steps get them, in their environment and image tag; masked ones masked; nothing left behind', async () => {
    const reporter = new RecordingReporter();
    const tag = BUSYBOX.split(':').at(-1) ?? '1.35';
    const repo = BUSYBOX.slice(0, BUSYBOX.lastIndexOf(':'));
    const token = 'docker-out-s3cret';
    const build = makeBuild({
      steps: [
        ctn('write', {
          ...never,
          commands: [
            `echo "TAG=${tag}" > /vela/outputs/.env`,
            `echo "TOKEN=$(echo ${Buffer.from(token).toString('base64')} | base64 -d)" > /vela/outputs/masked.env`,
            `echo "WORD=$(printf 'from base64' | base64)" > /vela/outputs/base64.env`,
          ],
        }),
        ctn('read', { ...never, commands: ['echo "tag=$TAG word=$WORD token=$TOKEN"'] }),
        ctn('tagged', { ...never, image: `${repo}:\${TAG}`, commands: ['echo "tagged on $TAG"'] }),
      ],
    });
    const result = await runBuild(background(), { build, runtime, reporter, outputs: true, logger: trace() });
    expect(result.status, JSON.stringify(result.steps)).toBe('success');
    expect(reporter.log('read')).toContain(`tag=${tag} word=from base64 token=***\n`);
    expect(reporter.log('tagged')).toContain(`tagged on ${tag}\n`);
    expect(reporter.last('tagged')?.image).toBe(BUSYBOX);
    for (const name of ['init', 'write', 'read', 'tagged']) expect(reporter.log(name)).not.toContain(token);
    expect(leftovers()).toBe('');
    const volumes = execFileSync('docker', ['volume', 'ls', '-q', '--filter', `label=berth.dev/worker=${WORKER}`], { encoding: 'utf8' }).trim();
    expect(volumes).toBe('');
  });
});
