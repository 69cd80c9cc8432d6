// Vela's outputs on the dummy runtime: go-vela/worker executor/linux/outputs.go (poll),
// internal/outputs/process.go (Process), executor/linux/build.go ExecBuild (poll, Process and
// Substitute before each step).
import { background } from '@berth/context';
import type { Container } from '@berth/pipeline';
import type { Runtime } from '@berth/runtime';
import { describe, expect, it } from 'vitest';
import { runBuild } from '../src/run-build.ts';
import { BUSYBOX, ctn, dummy, makeBuild, RecordingReporter, secret, stage } from './helpers.ts';
import { at, intercepted, onHeld, recorded } from './slow-runtime.ts';

const SECRET = 'out-s3cret-value';
const SECRET_B64 = Buffer.from(SECRET).toString('base64');
const TAG = BUSYBOX.split(':').at(-1) ?? '1.35';
const REPO = BUSYBOX.slice(0, BUSYBOX.lastIndexOf(':'));

/** Writes outputs without the masked value appearing in the writer's own command (its trace line). */
function writer(name = 'writer') {
  return ctn(name, {
    commands: [
      `printf 'TAG=${TAG}\\nGREETING=theirs\\n# comment\\n' > /vela/outputs/.env`,
      `echo "TOKEN=$(echo ${SECRET_B64} | base64 -d)" > /vela/outputs/masked.env`,
      `echo "B64=$(printf 'decoded value' | base64)" > /vela/outputs/base64.env`,
    ],
  });
}

/** `runtime` without the outputs capability (as the kubernetes runtime). */
function withoutOutputs(runtime: Runtime): Runtime {
  return new Proxy(runtime, {
    get: (target, key) => {
      if (key === 'setupOutputs' || key === 'readOutput') return undefined;
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

function allLogs(reporter: RecordingReporter): string {
  return [...reporter.chunks.keys()].map((name) => reporter.log(name)).join('\n');
}

describe('outputs', () => {
  it("become later steps' environment and image tag; masked ones are masked; the step's own environment wins", async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({
      steps: [
        writer(),
        ctn('reader', {
          environment: { GREETING: 'mine', REF: '$TAG', BRACES: 'v${TAG}' },
          commands: ['echo "tag=$TAG greeting=$GREETING ref=$REF b64=$B64"', 'echo "token=$TOKEN"', 'echo "braces=$BRACES"'],
        }),
        ctn('tagged', { image: `${REPO}:\${TAG}`, pull: 'never', commands: ['echo "tagged ran: $TAG"'] }),
      ],
    });
    const result = await runBuild(background(), { build, runtime, reporter, outputs: true });
    expect(result.status).toBe('success');
    expect(reporter.log('reader')).toContain(`tag=${TAG} greeting=mine ref=${TAG} b64=decoded value\n`);
    expect(reporter.log('reader')).toContain('token=***\n');
    expect(reporter.log('reader')).toContain(`braces=v${TAG}\n`);
    expect(reporter.log('tagged')).toContain(`tagged ran: ${TAG}\n`);
    expect(reporter.last('tagged')?.image).toBe(BUSYBOX);
    expect(allLogs(reporter)).not.toContain(SECRET);
    expect(reporter.log('init')).toContain('> Preparing outputs: /vela/outputs is shared');
    expect(reporter.log('init')).toContain(`> Step image ${REPO}:\${TAG} is set when the step starts`);
  });

  it('are read after every step: a later write replaces the file, in stages too', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({
      stages: [
        stage('first', [ctn('one', { commands: ["printf 'N=1\\n' > /vela/outputs/.env"] }), ctn('see-one', { commands: ['echo "n=$N"'] })]),
        stage('second', [ctn('two', { commands: ["printf 'M=2\\n' > /vela/outputs/.env"] }), ctn('see-two', { commands: ['echo "n=$N m=$M"'] })], {
          needs: ['first'],
        }),
      ],
    });
    const result = await runBuild(background(), { build, runtime, reporter, outputs: true });
    expect(result.status).toBe('success');
    expect(reporter.log('see-one')).toContain('n=1\n');
    // Vela reads the files whole each time: N is gone once the file no longer has it.
    expect(reporter.log('see-two')).toContain('n= m=2\n');
  });

  it('an image ${KEY} no step wrote fails the step and the build, naming the step, the image and the key', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const image = `${REPO}:\${NEVER_SET}`;
    const build = makeBuild({
      steps: [writer(), ctn('needs-it', { image, pull: 'never', commands: ['echo ran'] }), ctn('after', { commands: ['echo after'] })],
    });
    const result = await runBuild(background(), { build, runtime, reporter, outputs: true });
    expect(result.status).toBe('error');
    expect(reporter.last('needs-it')?.status).toBe('error');
    expect(reporter.last('needs-it')?.error).toBe(
      `image "${image}" needs \${NEVER_SET}, which no step before it wrote to /vela/outputs (.env, masked.env, base64.env or masked.base64.env): write it there in an earlier step, or set it in the step's environment`,
    );
    expect(result.build.error).toContain('step "needs-it"');
    expect(reporter.log('needs-it')).not.toContain('ran');
    expect(reporter.statuses('after')).not.toContain('running');
  });

  it('content Vela cannot use is ignored or kept as written, with a warning; the build goes on', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const warnings: string[] = [];
    const build = makeBuild({
      steps: [
        ctn('bad', { commands: ["printf 'GOOD=1\\nno equals sign\\n' > /vela/outputs/.env", "printf 'RAW=%%%%%%\\n' > /vela/outputs/base64.env"] }),
        ctn('show', { commands: ['echo "good=$GOOD raw=$RAW"'] }),
      ],
    });
    const result = await runBuild(background(), { build, runtime, reporter, outputs: true, logger: { warn: (m) => warnings.push(m) } });
    expect(result.status).toBe('success');
    expect(reporter.log('show')).toContain('good= raw=%%%\n');
    expect(warnings).toEqual([
      'step bad: /vela/outputs/.env was ignored: line 2: missing = (write KEY=VALUE lines)',
      'step bad: /vela/outputs/base64.env: the value of RAW is not padded standard base64; it is used as written',
    ]);
  });

  it('a runtime without the capability: a build whose image needs an output is refused at its start, naming the steps', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({
      steps: [
        writer(),
        ctn('tagged', { image: `${REPO}:\${TAG}`, commands: ['echo ran'] }),
        ctn('numbered', { image: `${REPO}:\${VELA_BUILD_NUMBER}`, commands: ['echo ran'] }),
      ],
    });
    const result = await runBuild(background(), { build, runtime: withoutOutputs(runtime), reporter, outputs: true });
    expect(result.status).toBe('error');
    expect(result.build.error).toContain(`step "tagged" (image "${REPO}:\${TAG}" needs \${TAG})`);
    expect(result.build.error).not.toContain('numbered');
    expect(result.build.error).toContain('the dummy runtime does not offer outputs');
    expect(reporter.statuses('writer')).not.toContain('running');
  });

  it('a service whose image needs a ${KEY} is refused at the start: services get no outputs', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({
      services: [ctn('db', { image: `${REPO}:\${DB_TAG}`, commands: ['sleep 1'] })],
      steps: [writer()],
    });
    const result = await runBuild(background(), { build, runtime, reporter, outputs: true });
    expect(result.status).toBe('error');
    expect(result.build.error).toContain(`service "db" (image "${REPO}:\${DB_TAG}" needs \${DB_TAG}): services get no outputs`);
    expect(reporter.statuses('writer')).not.toContain('running');
  });

  it('outputs off: the same build is refused, saying how to turn them on; a build without ${KEY} images runs as before', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({ steps: [writer(), ctn('tagged', { image: `${REPO}:\${TAG}`, commands: ['echo ran'] })] });
    const refused = await runBuild(background(), { build, runtime, reporter });
    expect(refused.status).toBe('error');
    expect(refused.build.error).toContain('outputs are off on this worker: set VELA_EXECUTOR_OUTPUTS_IMAGE');

    const plain = new RecordingReporter();
    // Without outputs nothing makes /vela/outputs (Vela's outputs sidecar does): the step makes it in the workspace.
    const own = ctn('own-dir', { commands: ['mkdir -p /vela/outputs', "printf 'TAG=1\\n' > /vela/outputs/.env"] });
    const ok = await runBuild(background(), { build: makeBuild({ steps: [own, ctn('reader', { commands: ['echo "tag=$TAG"'] })] }), runtime, reporter: plain });
    expect(ok.status).toBe('success');
    expect(plain.log('reader')).toContain('tag=\n');
  });
});

// Issue 28 item 2: with outputs on (`berth exec`), the steps' containers are still set up and
// held ahead (build/steps.ts setUpAhead); a step's environment depends on the outputs when it is
// reached (ExecBuild polls before every step), so one set up ahead with other outputs is removed,
// never released, and set up again.
describe('outputs and the steps held ahead', () => {
  it('holds the steps ahead while no step wrote outputs and releases them: never set up twice', async () => {
    const { runtime: base, engine } = await dummy();
    const calls: string[] = [];
    const runtime = recorded(base, calls);
    const reporter = new RecordingReporter();
    const names = ['one', 'two', 'three'];
    const build = makeBuild({ steps: names.map((name) => ctn(name, { commands: [`echo "${name} tag=[$TAG]"`] })) });
    const result = await runBuild(background(), { build, runtime, reporter, outputs: true });
    expect(result.status).toBe('success');
    const assembled = at(calls, `assembleBuild ${build.id}`);
    for (const name of names) {
      expect(at(calls, `holdContainer ${name}`)).toBeGreaterThan(assembled);
      expect(at(calls, `releaseContainer ${name}`)).toBeGreaterThan(at(calls, `holdContainer ${name}`));
      expect(reporter.log(name)).toContain(`${name} tag=[]\n`);
    }
    expect(calls.filter((c) => /^(setupContainer|runContainer|removeContainer) (one|two|three)$/.test(c))).toEqual(
      names.map((name) => `removeContainer ${name}`),
    );
    expect(engine.containers.size + engine.networks.size + engine.volumes.size).toBe(0);
  });

  it('removes the steps held with the outputs before a step wrote some, never released; sets them up again with them; holds the next ones with them', async () => {
    const { runtime: base, engine } = await dummy();
    const calls: string[] = [];
    const bothHeld = Promise.withResolvers<void>();
    let held = 0;
    const counted = (runtime: typeof base, name: string) => onHeld(runtime, name, () => ++held === 2 && bothHeld.resolve());
    // The writer's end is seen (and its outputs read) only once `r1` and `r2` are held: with no outputs yet.
    const waiting = intercepted(counted(counted(base, 'r1'), 'r2'), 'waitContainer', (original) => async (ctx, container, ...args) => {
      if (container.name === 'writer') await bothHeld.promise;
      return original(ctx, container, ...args);
    });
    const runtime = recorded(waiting, calls);
    const reporter = new RecordingReporter();
    const readers = ['r1', 'r2', 'r3', 'r4'];
    const build = makeBuild({
      steps: [writer(), ...readers.map((name) => ctn(name, { commands: [`echo "${name} tag=[$TAG]"`, 'echo "token=$TOKEN"'] }))],
    });
    const result = await runBuild(background(), { build, runtime, reporter, outputs: true });
    expect(result.status).toBe('success');
    for (const name of readers) {
      expect(reporter.log(name)).toContain(`${name} tag=[${TAG}]\n`);
      expect(reporter.log(name)).toContain('token=***\n');
      expect(reporter.statuses(name)).toEqual(['running', 'success']);
    }
    // readOutput names the build: the first reads are the writer's.
    const read = at(calls, `readOutput ${build.id}`);
    expect(read).toBeGreaterThan(at(calls, 'waitContainer writer'));
    // Held with no outputs: removed once the writer's outputs were read, never released, set up and run anew.
    for (const name of ['r1', 'r2']) {
      expect(at(calls, `holdContainer ${name}`)).toBeLessThan(read);
      expect(at(calls, `removeContainer ${name}`)).toBeGreaterThan(read);
      expect(at(calls, `setupContainer ${name}`)).toBeGreaterThan(at(calls, `removeContainer ${name}`));
      expect(at(calls, `runContainer ${name}`)).toBeGreaterThan(at(calls, `setupContainer ${name}`));
      expect(calls).not.toContain(`releaseContainer ${name}`);
    }
    // Held once the outputs were read, with them: released.
    for (const name of ['r3', 'r4']) {
      expect(at(calls, `holdContainer ${name}`)).toBeGreaterThan(read);
      expect(at(calls, `releaseContainer ${name}`)).toBeGreaterThan(at(calls, `holdContainer ${name}`));
      expect(calls.filter((c) => c === `setupContainer ${name}` || c === `runContainer ${name}`)).toEqual([]);
    }
    expect(allLogs(reporter)).not.toContain(SECRET);
    expect(engine.containers.size + engine.networks.size + engine.volumes.size).toBe(0);
  });

  it('a step taking a lazy secret after a step wrote outputs gets both: set up after planStep loaded the secret, with the outputs', async () => {
    const { runtime: base } = await dummy();
    const calls: string[] = [];
    // The environment the container is created with (Docker fixes it then).
    const created: Array<Record<string, string>> = [];
    const runtime = recorded(
      intercepted(base, 'setupContainer', (original) => (ctx, container, ...args) => {
        if (container.name === 'uses-lazy') created.push({ ...(container as Container).environment });
        return original(ctx, container, ...args);
      }),
      calls,
    );
    const reporter = new RecordingReporter();
    const build = makeBuild({
      secrets: [secret('lazy', 'lazy-value-77')],
      steps: [writer(), ctn('uses-lazy', { commands: ['echo "tag=[$TAG] lazy=[$LAZY]"'], secrets: [{ source: 'lazy', target: 'LAZY' }] })],
    });
    build.secrets[0]!.pull = 'step_start';
    const result = await runBuild(background(), {
      build,
      runtime,
      reporter,
      outputs: true,
      loadSecret: (_ctx, s) => {
        calls.push(`loadSecret ${s.name}`);
        return Promise.resolve(s.value);
      },
    });
    expect(result.status).toBe('success');
    expect(reporter.log('uses-lazy')).toContain(`tag=[${TAG}] lazy=[***]\n`);
    expect(at(calls, 'setupContainer uses-lazy')).toBeGreaterThan(at(calls, 'loadSecret lazy'));
    expect(created).toHaveLength(1);
    expect(created[0]).toMatchObject({ TAG, LAZY: 'lazy-value-77' });
  });
});
