import { background, withCancel } from '@berth/context';
import { describe, expect, it } from 'vitest';
import { Executor } from '../src/executor.ts';
import { RuntimeEventRouter } from '../src/events.ts';
import { runBuild } from '../src/run-build.ts';
import { BUSYBOX, ctn, dummy, makeBuild, RecordingReporter, secret, stage } from './helpers.ts';
import { failing, setupInAssemble } from './slow-runtime.ts';
import { RuntimeError } from '@berth/runtime';

const sh = (script: string) => ({ entrypoint: ['sh', '-c'], commands: [script] });
/**
 * The sleep of a service or detached step, and the log-streaming grace where one is set: a build
 * that ends sooner did not wait for them. Bounds come from the configuration, not the machine.
 */
const LONG_MS = 60_000;

describe('steps', () => {
  it('run in order and the build succeeds; the init step holds the setup log', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({ steps: [ctn('one', { commands: ['echo hello one'] }), ctn('two', { commands: ['echo hello two'] })] });
    const result = await runBuild(background(), { build, runtime, reporter, host: 'test-host', version: '1.2.3' });
    expect(result.status).toBe('success');
    expect(reporter.statuses('one')).toEqual(['running', 'success']);
    expect(reporter.statuses('two')).toEqual(['running', 'success']);
    const one = reporter.last('one');
    const two = reporter.last('two');
    expect(one?.exitCode).toBe(0);
    expect((one?.finished ?? Infinity) <= (two?.started ?? 0)).toBe(true);
    expect(reporter.log('one')).toContain('$ echo hello one\nhello one\n');
    expect(reporter.log('two')).toContain('hello two');
    const init = reporter.log('init');
    expect(init).toContain('host: test-host');
    expect(init).toContain('runtime: dummy');
    expect(init).toContain('> Inspecting runtime network...');
    expect(init).toContain('> Inspecting runtime volume...');
    expect(init).toContain('> Preparing step image');
    expect(reporter.statuses('init')).toEqual(['running', 'success']);
    expect(reporter.builds.map((b) => b.status)).toEqual(['running', 'success']);
    // Every log was closed exactly once.
    expect([...reporter.closed].sort()).toEqual(['init', 'one', 'two']);
  });

  it('a failing step fails the build; later steps are skipped; its exit code is reported', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({ steps: [ctn('bad', { commands: ['echo failing', 'exit 3'] }), ctn('after', { commands: ['echo never'] })] });
    const result = await runBuild(background(), { build, runtime, reporter });
    expect(result.status).toBe('failure');
    expect(reporter.last('bad')).toMatchObject({ status: 'failure', exitCode: 3, error: 'exited with code 3' });
    expect(reporter.statuses('after')).toEqual(['skipped']);
    expect(reporter.log('after')).toBe('');
  });

  it('a failing step with continue does not fail the build', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const bad = ctn('bad', { commands: ['exit 1'] });
    bad.ruleset.continue = true;
    const build = makeBuild({ steps: [bad, ctn('after', { commands: ['echo after'] })] });
    const result = await runBuild(background(), { build, runtime, reporter });
    expect(result.status).toBe('success');
    expect(reporter.last('bad')).toMatchObject({ status: 'failure', exitCode: 1, continueOnFailure: true });
    expect(reporter.last('after')?.status).toBe('success');
  });

  it('status rules are evaluated when the step is reached, against the status so far', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const onFailure = ctn('notify', { commands: ['echo notifying'] });
    onFailure.ruleset.if.status = ['failure'];
    const onSuccess = ctn('deploy', { commands: ['echo deploying'] });
    onSuccess.ruleset.if.status = ['success'];
    const always = ctn('always', { commands: ['echo always'] });
    always.ruleset.if.status = ['success', 'failure'];
    const earlyNotify = ctn('early-notify', { commands: ['echo early'] });
    earlyNotify.ruleset.if.status = ['failure'];
    const build = makeBuild({ steps: [earlyNotify, ctn('bad', { commands: ['exit 2'] }), onFailure, onSuccess, always] });
    const result = await runBuild(background(), { build, runtime, reporter });
    expect(result.status).toBe('failure');
    expect(reporter.last('early-notify')?.status).toBe('skipped');
    expect(reporter.last('notify')?.status).toBe('success');
    expect(reporter.last('deploy')?.status).toBe('skipped');
    expect(reporter.last('always')?.status).toBe('success');
  });

  it('branch and event rules use the rule data', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const onMain = ctn('on-main', { commands: ['echo main'] });
    onMain.ruleset.if.branch = ['main'];
    onMain.ruleset.if.status = ['success'];
    const onDev = ctn('on-dev', { commands: ['echo dev'] });
    onDev.ruleset.if.branch = ['dev'];
    onDev.ruleset.if.status = ['success'];
    const build = makeBuild({ steps: [onMain, onDev] });
    const result = await runBuild(background(), { build, runtime, reporter, ruleData: { branch: 'main', event: 'push' } });
    expect(result.status).toBe('success');
    expect(reporter.last('on-main')?.status).toBe('success');
    expect(reporter.last('on-dev')?.status).toBe('skipped');
  });

  it('a ruleset that cannot be evaluated errors the step and the build', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const odd = ctn('odd', { commands: ['echo x'] });
    // Outside the expr-lang subset @berth/pipeline evaluates (a function call it does not know).
    odd.ruleset.if.eval = 'len(VELA_BUILD_EVENT) > 3';
    odd.ruleset.if.status = ['success'];
    const result = await runBuild(background(), { build: makeBuild({ steps: [odd, ctn('next', { commands: ['true'] })] }), runtime, reporter });
    expect(result.status).toBe('error');
    expect(reporter.last('odd')?.status).toBe('error');
    expect(reporter.last('odd')?.error).toMatch(/eval/);
    expect(reporter.last('next')).toMatchObject({ status: 'killed', exitCode: 137 });
  });

  it('a container that cannot start errors the step and the build; steps not reached are killed', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({
      steps: [ctn('broken', { commands: ['true'], environment: { DUMMY_START_FAIL: 'no such device' } }), ctn('after', { commands: ['true'] })],
    });
    const result = await runBuild(background(), { build, runtime, reporter });
    expect(result.status).toBe('error');
    expect(result.build.error).toMatch(/broken.*no such device/);
    expect(reporter.last('broken')).toMatchObject({ status: 'error' });
    expect(reporter.last('broken')?.error).toMatch(/could not start: no such device/);
    expect(reporter.last('after')).toMatchObject({ status: 'killed', exitCode: 137 });
  });

  it('a missing image fails the init step and errors the build before anything runs', async () => {
    const { runtime, engine } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({ steps: [ctn('one', { commands: ['true'] }), ctn('missing', { image: 'berth/none:1', pull: 'never', commands: ['true'] })] });
    const result = await runBuild(background(), { build, runtime, reporter });
    expect(result.status).toBe('error');
    expect(reporter.last('init')).toMatchObject({ status: 'failure' });
    expect(reporter.last('init')?.error).toMatch(/berth\/none:1.*not found locally/);
    expect(reporter.log('init')).toMatch(/not found locally/);
    expect(reporter.last('missing')?.status).toBe('error');
    expect(reporter.last('one')?.status).toBe('killed');
    // Nothing is left on the engine.
    expect(engine.containers.size).toBe(0);
    expect(engine.networks.size).toBe(0);
    expect(engine.volumes.size).toBe(0);
  });

  it('a detached step runs in the background and is stopped at the end', async () => {
    const { runtime, engine } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({
      steps: [
        ctn('bg', { detach: true, ...sh('echo bg started; sleep 60') }),
        ctn('fg', { commands: ['echo fg'] }),
        ctn('bg-fail', { detach: true, ...sh('exit 4') }),
        ctn('wait', { commands: ['sleep 0.1'] }),
      ],
    });
    const started = performance.now();
    const result = await runBuild(background(), { build, runtime, reporter });
    expect(performance.now() - started).toBeLessThan(LONG_MS);
    expect(result.status).toBe('success');
    expect(reporter.last('bg')).toMatchObject({ status: 'success', detached: true });
    expect(reporter.log('bg')).toContain('bg started');
    // A detached step that failed reports it without failing the build.
    expect(reporter.last('bg-fail')).toMatchObject({ status: 'failure', exitCode: 4 });
    expect(engine.containers.size).toBe(0);
  });
});

describe('services', () => {
  it('run detached, are reached by name, and are stopped at the end without holding the build up', async () => {
    const { runtime, engine } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({
      services: [ctn('web', sh('mkdir -p /www && echo pong > /www/index.html && echo serving && httpd -f -p 8080 -h /www'))],
      steps: [ctn('client', { commands: ['for i in 1 2 3 4 5 6 7 8 9 10; do wget -q -O - http://web:8080/index.html && exit 0; sleep 0.1; done; exit 1'] })],
    });
    const started = performance.now();
    // A long log-streaming grace: the build must not wait for it (Vela community issue 890).
    const result = await runBuild(background(), { build, runtime, reporter, logStreamingGraceMs: LONG_MS });
    expect(performance.now() - started).toBeLessThan(LONG_MS);
    expect(result.status).toBe('success');
    expect(reporter.log('client')).toContain('pong');
    expect(reporter.statuses('web')).toEqual(['running', 'success']);
    expect(reporter.last('web')).toMatchObject({ kind: 'service', detached: true });
    expect(reporter.log('web')).toContain('serving');
    expect(reporter.closed).toContain('web');
    expect(engine.containers.size).toBe(0);
  });

  it('a service that keeps logging does not hold the build up', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({
      services: [ctn('chatty', sh('while true; do echo tick; sleep 0.01; done'))],
      steps: [ctn('work', { commands: ['sleep 0.2'] })],
    });
    const started = performance.now();
    const result = await runBuild(background(), { build, runtime, reporter, logStreamingGraceMs: LONG_MS });
    expect(result.status).toBe('success');
    expect(performance.now() - started).toBeLessThan(LONG_MS);
    expect(reporter.log('chatty')).toContain('tick\ntick\n');
  });
});

describe('stages', () => {
  it('run as a DAG on needs', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({
      stages: [
        // compile ends only once lint has started: they must run side by side (else the build
        // would hold until its timeout). A handshake through the workspace, not a sleep.
        stage('build', [ctn('compile', { commands: ['until [ -f /vela/lint-started ]; do sleep 0.01; done', 'echo compiled'] })]),
        stage('lint', [ctn('lint', { commands: ['touch /vela/lint-started'] })]),
        stage('test', [ctn('unit', { commands: ['echo unit'] }), ctn('integration', { commands: ['echo integration'] })], { needs: ['build'] }),
        stage('publish', [ctn('push', { commands: ['echo push'] })], { needs: ['test', 'lint', 'not-a-stage'] }),
      ],
    });
    const result = await runBuild(background(), { build, runtime, reporter, timeoutMs: LONG_MS });
    expect(result.status).toBe('success');
    expect(reporter.log('compile')).toContain('compiled');
    const at = (name: string, key: 'started' | 'finished') => reporter.last(name)?.[key] ?? NaN;
    expect(at('unit', 'started')).toBeGreaterThanOrEqual(at('compile', 'finished'));
    expect(at('integration', 'started')).toBeGreaterThanOrEqual(at('unit', 'finished'));
    expect(at('push', 'started')).toBeGreaterThanOrEqual(at('integration', 'finished'));
    expect(at('push', 'started')).toBeGreaterThanOrEqual(at('lint', 'finished'));
    // build and lint ran side by side.
    expect(at('lint', 'started')).toBeLessThan(at('compile', 'finished'));
    expect(reporter.last('unit')?.stage).toBe('test');
  });

  it('a failure stops later steps of stages that are not independent, and not of independent ones', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({
      stages: [
        stage('a', [ctn('a-fail', { commands: ['exit 1'] })]),
        stage('b', [ctn('b-wait', { commands: ['sleep 0.3'] }), ctn('b-next', { commands: ['echo b'] })]),
        stage('c', [ctn('c-wait', { commands: ['sleep 0.3'] }), ctn('c-next', { commands: ['echo c'] })], { independent: true }),
      ],
    });
    const result = await runBuild(background(), { build, runtime, reporter });
    expect(result.status).toBe('failure');
    expect(reporter.last('a-fail')?.status).toBe('failure');
    // The step that was running goes on; the next is skipped (Vela: the build's status is failure).
    expect(reporter.last('b-wait')?.status).toBe('success');
    expect(reporter.last('b-next')?.status).toBe('skipped');
    expect(reporter.last('c-next')?.status).toBe('success');
  });

  it('stages that need each other in a cycle error the build at create', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({
      stages: [stage('x', [ctn('x1', { commands: ['true'] })], { needs: ['y'] }), stage('y', [ctn('y1', { commands: ['true'] })], { needs: ['x'] })],
    });
    const result = await runBuild(background(), { build, runtime, reporter });
    expect(result.status).toBe('error');
    expect(result.build.error).toMatch(/cycle \((x → y → x|y → x → y)\)/);
    expect(reporter.last('init')?.status).toBe('failure');
  });

  it('a stage that errors stops the others and its dependents', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({
      stages: [
        stage('broken', [ctn('cannot-start', { commands: ['true'], environment: { DUMMY_START_FAIL: 'boom' } })]),
        stage('slow', [ctn('slow-1', { commands: ['sleep 30'] })]),
        stage('after', [ctn('after-1', { commands: ['true'] })], { needs: ['broken'] }),
      ],
    });
    const started = performance.now();
    const result = await runBuild(background(), { build, runtime, reporter });
    // It did not wait for slow-1's 30 s sleep.
    expect(performance.now() - started).toBeLessThan(30_000);
    expect(result.status).toBe('error');
    expect(reporter.last('cannot-start')?.status).toBe('error');
    expect(reporter.last('slow-1')).toMatchObject({ status: 'killed', exitCode: 137 });
    expect(reporter.last('after-1')).toMatchObject({ status: 'killed', exitCode: 137 });
  });
});

describe('secrets and logs', () => {
  // Error messages and the init log: see "masks secrets and credentials in the error messages it builds" below.
  it('masks secret values in step and service logs; the init log names secrets, never their values', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const multi = 'line-one\nline-two';
    const build = makeBuild({
      secrets: [secret('token', 'hunter2-token'), secret('cert', multi), secret('lazy', 'lazy-value-42')],
      services: [ctn('svc', { ...sh('echo service sees $TOKEN; sleep 60'), secrets: [{ source: 'token', target: 'TOKEN' }] })],
      steps: [
        ctn('show', {
          commands: ['echo "token=$TOKEN"', 'printf "%s\\n" "$CERT"', 'echo "lazy=$LAZY"', 'echo done'],
          secrets: [
            { source: 'token', target: 'TOKEN' },
            { source: 'cert', target: 'CERT' },
            { source: 'lazy', target: 'LAZY' },
          ],
        }),
      ],
    });
    build.secrets[2]!.pull = 'step_start';
    const loaded: string[] = [];
    const result = await runBuild(background(), {
      build,
      runtime,
      reporter,
      loadSecret: (_ctx, s) => {
        loaded.push(s.name);
        return Promise.resolve(s.value);
      },
    });
    expect(result.status).toBe('success');
    const log = reporter.log('show');
    expect(log).toContain('token=***');
    expect(log).toContain('lazy=***');
    expect(log).toContain('***\n');
    expect(log).not.toContain('hunter2');
    expect(log).not.toContain('line-one');
    expect(log).not.toContain('lazy-value');
    expect(reporter.log('svc')).toContain('service sees ***');
    expect(reporter.log('init')).toContain('> Loaded secret <token>');
    expect(reporter.log('init')).toContain('secret <lazy> lazy loaded');
    expect(reporter.log('init')).not.toContain('hunter2');
    expect(loaded.sort()).toEqual(['cert', 'lazy', 'token']);
  });

  // Issue #13 item 1: every form of a multi-line secret (go-vela/worker executor/linux/step.go
  // getSecretValues masks newline→space; GitHub Actions masks each line).
  const CERT = 'line-one\nline-two\n';
  const NETRC = 'netrc-pass-9431';
  const forms = ['line-one', 'line-two', NETRC, 'netrc-pass'];

  it('masks every form of a multi-line secret in a step log: echo unquoted, each line, CRLF, JSON-escaped', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({
      secrets: [secret('cert', CERT)],
      steps: [
        ctn('show', {
          commands: [
            'echo unquoted=$CERT',
            "echo 'commas=line-one,line-two'",
            "printf 'crlf=line-one\\r\\nline-two\\r\\n'",
            `echo '{"cert":"line-one\\nline-two\\n"}'`,
            'cat $HOME/.netrc',
          ],
          secrets: [{ source: 'cert', target: 'CERT' }],
        }),
      ],
    });
    const result = await runBuild(background(), { build, runtime, reporter, environment: () => ({ VELA_NETRC_PASSWORD: NETRC }) });
    expect(result.status).toBe('success');
    const log = reporter.log('show');
    expect(log).toContain('unquoted=***\n');
    expect(log).toContain('commas=***,***\n');
    expect(log).toContain('crlf=***');
    expect(log).toContain('{"cert":"***"}');
    // The build script writes the netrc file (and unsets the variable), as Vela's does.
    expect(log).toContain('password ***');
    for (const form of forms) expect(log).not.toContain(form);
  });

  it('masks secrets and credentials in the error messages it builds and in the init log (a failing setup quotes them)', async () => {
    const { runtime: base } = await dummy();
    // The engine's error quotes a line of the secret and the netrc password: a mount or a login gone wrong.
    // Set up in assemble, so that the init log quotes it.
    const runtime = failing(
      setupInAssemble(base),
      'setupContainer',
      () => new RuntimeError('InvalidConfig', `bad mount line-one line-two, login ${NETRC}`, { runtime: 'dummy', operation: 'setupContainer' }),
    );
    const reporter = new RecordingReporter();
    const warnings: string[] = [];
    let thrown: unknown;
    const build = makeBuild({ secrets: [secret('cert', CERT)], steps: [ctn('one', { commands: ['true'], secrets: [{ source: 'cert', target: 'CERT' }] })] });
    const result = await runBuild(background(), {
      build,
      runtime,
      reporter,
      environment: () => ({ VELA_NETRC_PASSWORD: NETRC }),
      logger: { warn: (m) => warnings.push(m), debug: (m) => warnings.push(m) },
      onStart: (executor) => {
        // The error assembleBuild rejects with, as a caller driving the lifecycle sees it.
        const assemble = executor.assembleBuild.bind(executor);
        executor.assembleBuild = (ctx) =>
          assemble(ctx).catch((error: unknown) => {
            thrown = error;
            throw error;
          });
      },
    });
    expect(result.status).toBe('error');
    const texts = [
      result.build.error ?? '',
      ...result.steps.map((s) => s.error ?? ''),
      ...reporter.steps.map((s) => s.error ?? ''),
      ...reporter.builds.map((b) => b.error ?? ''),
      reporter.log('init'),
      ...warnings,
      String(thrown),
      thrown instanceof Error && thrown.cause instanceof Error ? thrown.cause.message : '',
    ];
    // The messages are there, masked.
    expect(result.build.error).toContain('bad mount ***, login ***');
    expect(reporter.log('init')).toMatch(/> \[berth\] assemble step "one": .*bad mount \*\*\*, login \*\*\*\n/);
    expect(reporter.last('one')?.error).toContain('bad mount ***');
    for (const form of forms) for (const text of texts) expect(text).not.toContain(form);
  });

  it('substitutes ${NAME} with secrets that allow it, sets the others after substitution, and withholds restricted ones with a note', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const refs = [
      { source: 'open', target: 'OPEN' },
      { source: 'closed', target: 'CLOSED' },
      { source: 'elsewhere', target: 'ELSEWHERE' },
    ];
    const build = makeBuild({
      secrets: [secret('open', 'open-value-1'), secret('closed', 'closed-value-2'), secret('elsewhere', 'elsewhere-value-3')],
      steps: [
        ctn('use', {
          environment: { FROM_OPEN: 'x${OPEN}x', FROM_CLOSED: 'y${CLOSED}y' },
          commands: ['echo "open=$FROM_OPEN closed=$FROM_CLOSED env=$CLOSED elsewhere=[$ELSEWHERE]"'],
          secrets: refs,
        }),
      ],
    });
    const result = await runBuild(background(), {
      build,
      runtime,
      reporter,
      loadSecret: (_ctx, s) =>
        Promise.resolve({
          value: s.value,
          substitution: s.name !== 'closed',
          ...(s.name === 'elsewhere' ? { deniedFor: (c: { image: string }) => `it is restricted to the images plugins/deploy, not ${c.image}` } : {}),
        }),
    });
    expect(result.status).toBe('success');
    const log = reporter.log('use');
    expect(log).toContain(`> secret <elsewhere> was not set as ELSEWHERE: it is restricted to the images plugins/deploy, not ${BUSYBOX}\n`);
    // OPEN was substituted into FROM_OPEN; CLOSED was not (empty there) but is in the environment.
    expect(log).toContain('open=x***x closed=yy env=*** elsewhere=[]');
    expect(log).not.toMatch(/value-[123]/);
    // The note heads the log, before the output.
    expect(log.indexOf('> secret <elsewhere>')).toBeLessThan(log.indexOf('open='));
  });

  it('a lazy secret reaches every step that asks for it, loaded once; a withheld secret is noted once per step', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const refs = [
      { source: 'lazy', target: 'LAZY' },
      { source: 'kept', target: 'KEPT' },
    ];
    const show = ['echo "lazy=[$LAZY] kept=[$KEPT]"'];
    const build = makeBuild({
      secrets: [secret('lazy', 'lazy-value-7'), secret('kept', 'kept-value-8')],
      steps: [ctn('first', { commands: show, secrets: refs }), ctn('second', { commands: show, secrets: refs })],
    });
    build.secrets[0]!.pull = 'step_start';
    const loads: string[] = [];
    const result = await runBuild(background(), {
      build,
      runtime,
      reporter,
      loadSecret: (_ctx, s) => {
        loads.push(s.name);
        return Promise.resolve(s.name === 'kept' ? { value: s.value, deniedFor: () => 'not for this step' } : s.value);
      },
    });
    expect(result.status).toBe('success');
    expect(loads.sort()).toEqual(['kept', 'lazy']);
    for (const step of ['first', 'second']) {
      const log = reporter.log(step);
      expect(log).toContain('lazy=[***] kept=[]');
      expect(log.split('\n').filter((line) => line.startsWith('> secret <kept>'))).toEqual(['> secret <kept> was not set as KEPT: not for this step']);
    }
  });

  it('caps a step log, with a marker, keeping the tail', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({ steps: [ctn('loud', { commands: ['seq 1 20000', 'echo last-line'] })] });
    const result = await runBuild(background(), { build, runtime, reporter, logs: { limits: { maxBytes: 8192, tailBytes: 1024 } } });
    expect(result.status).toBe('success');
    const log = reporter.log('loud');
    expect(log).toContain('this log is over its 8.0 KiB cap');
    expect(log).toMatch(/log truncated: .* dropped/);
    expect(log.endsWith('last-line\n')).toBe(true);
    expect(log).toContain('\n20000\n');
    expect(Buffer.byteLength(log)).toBeLessThan(8192 + 400);
  });

  it('routes runtime events (pull progress) to the reporter by container', async () => {
    const events = new RuntimeEventRouter();
    const { runtime } = await dummy({ onEvent: events.onEvent });
    const reporter = new RecordingReporter();
    const build = makeBuild({ steps: [ctn('pulled', { image: 'alpine:3', pull: 'always', commands: ['true'] })] });
    const result = await runBuild(background(), { build, runtime, reporter, events });
    expect(result.status).toBe('success');
    expect(reporter.events.map((e) => [e.target.name, e.event.type])).toContainEqual(['pulled', 'pull']);
    expect(events.size).toBe(0);
  });

  it('delivers logs in batches with backpressure from a slow reporter, and nothing twice', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    reporter.appendDelayMs = 2;
    const build = makeBuild({ steps: [ctn('many', { commands: ['seq 1 30000'] })] });
    const result = await runBuild(background(), { build, runtime, reporter, logs: { batchBytes: 4096, limits: { maxBytes: Infinity } } });
    expect(result.status).toBe('success');
    const chunks = reporter.chunks.get('many') ?? [];
    expect(chunks.length).toBeGreaterThan(10);
    expect(chunks.every((c) => c.length <= 4096)).toBe(true);
    const expected = Array.from({ length: 30000 }, (_, i) => `${i + 1}\n`).join('');
    expect(reporter.log('many')).toBe(`$ seq 1 30000\n${expected}`);
  });
});

describe('the lifecycle methods, driven by hand', () => {
  it('mirror Vela: create, plan, assemble, exec with stream alongside, destroy', async () => {
    const { runtime, engine } = await dummy();
    const reporter = new RecordingReporter();
    const executor = new Executor({ build: makeBuild({ steps: [ctn('one', { commands: ['echo manual'] })] }), runtime, reporter });
    const [ctx, cancel] = withCancel(background());
    const streaming = executor.streamBuild(ctx);
    await executor.createBuild(ctx);
    expect(executor.status).toBe('running');
    await executor.planBuild(ctx);
    expect(engine.networks.size).toBe(1);
    await executor.assembleBuild(ctx);
    expect(engine.containers.size).toBe(1);
    await executor.execBuild(ctx);
    await executor.destroyBuild(ctx);
    await streaming;
    cancel();
    expect(executor.status).toBe('success');
    expect(reporter.log('one')).toContain('manual');
    expect(engine.containers.size).toBe(0);
    expect(executor.build.steps[0]?.image).toBe(BUSYBOX);
  });
});
