import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { background } from '@berth/context';
import { type Build, type Container, emptyBuild, emptyContainer } from '@berth/pipeline';
import { isRuntimeError, type Runtime } from '@berth/runtime';
import { afterAll, describe, expect, it } from 'vitest';
import { dockerRuntime } from '../src/index.ts';
import { BUSYBOX, engine, suffix } from './engine.ts';

/**
 * The held start (contract 1.4, `holdContainer` / `releaseContainer`): the container is created
 * and started ahead with its shell waiting for a line on stdin; the release sends it. Checked on
 * the real engine: nothing runs and nothing is logged before the release, the command's whole
 * output comes once after it (through the attach opened at the hold), stdin is at EOF for the
 * command, and a container never released is killed and removed without the stop grace.
 */
const ctx = background();
const run = suffix();
const workerId = `rd-held-${run}`;
const runtimes: Runtime[] = [];
let builds = 0;

afterAll(async () => {
  await runtimes[0]?.reap(ctx, workerId);
  for (const runtime of runtimes) await runtime.close();
});

async function newRuntime(stopGraceMs = 1_000): Promise<Runtime> {
  const runtime = await dockerRuntime({ stopGraceMs }).create(ctx, { workerId });
  runtimes.push(runtime);
  return runtime;
}

async function newBuild(runtime: Runtime): Promise<Build> {
  const build = emptyBuild({ id: `rdheld_${run}_${++builds}` });
  await runtime.createNetwork(ctx, build);
  await runtime.createVolume(ctx, build);
  return build;
}

function scriptStep(build: Build, name: string, script: string): Container {
  return emptyContainer({
    id: `step_${build.id}_${name}`,
    name,
    image: BUSYBOX,
    pull: 'never',
    number: 1,
    entrypoint: ['/bin/sh', '-c'],
    commands: [script],
  });
}

async function read(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('latin1');
}

/** The engine's log file of the container, read directly (not through the runtime). */
async function engineLog(container: Container): Promise<string> {
  const raw = await engine().getContainer(container.id).logs({ stdout: true, stderr: true, follow: false });
  return raw.toString('latin1');
}

describe('a held container (holdContainer / releaseContainer)', () => {
  it('runs nothing and logs nothing until released, then gives the whole output once, with stdin at EOF', async () => {
    const runtime = await newRuntime();
    const build = await newBuild(runtime);
    // Marks the workspace when it runs, so that "nothing ran" is checked beside "nothing logged".
    const step = scriptStep(
      build,
      'seq',
      `touch /vela/ran-${run}; seq 1 20000 | sed 's/^/e/' >&2 & seq 1 50000 | sed 's/^/o/'; wait; echo "stdin:$(cat | wc -c)"`,
    );
    expect(await runtime.holdContainer?.(ctx, step, build)).toBe(true);
    await sleep(800);
    expect(await runtime.inspectContainer(ctx, step)).toEqual({ state: 'running' });
    expect(await engineLog(step)).toBe('');
    const probe = scriptStep(build, 'probe', `test ! -e /vela/ran-${run}`);
    await runtime.setupContainer(ctx, probe, build);
    await runtime.runContainer(ctx, probe, build);
    expect(await runtime.waitContainer(ctx, probe)).toMatchObject({ exitCode: 0 });

    await runtime.releaseContainer?.(ctx, step);
    const log = read(await runtime.tailContainer(ctx, step));
    expect(await runtime.waitContainer(ctx, step)).toMatchObject({ exitCode: 0 });
    const lines = (await log).split('\n').filter((line) => line !== '');
    const out = lines.filter((l) => l.startsWith('o'));
    const err = lines.filter((l) => l.startsWith('e'));
    expect({ out: out.length, err: err.length, rest: lines.filter((l) => !/^[oe]\d/.test(l)) }).toEqual({ out: 50_000, err: 20_000, rest: ['stdin:0'] });
    expect(out.findIndex((line, i) => line !== `o${i + 1}`)).toBe(-1);
    expect(err.findIndex((line, i) => line !== `e${i + 1}`)).toBe(-1);
    await runtime.removeBuild(ctx, build);
  });

  it('kills and removes a container that is never released, without waiting for the stop grace', async () => {
    // A shell as PID 1 ignores SIGTERM: a stop would wait the whole grace.
    const runtime = await newRuntime(60_000);
    const build = await newBuild(runtime);
    const step = scriptStep(build, 'unreleased', 'echo must-not-run');
    expect(await runtime.holdContainer?.(ctx, step, build)).toBe(true);
    const started = Date.now();
    await runtime.removeContainer(ctx, step);
    expect(Date.now() - started).toBeLessThan(30_000);
    await expect(runtime.inspectContainer(ctx, step)).rejects.toSatisfy((error) => isRuntimeError(error, 'NotFound'));
    await expect(runtime.releaseContainer?.(ctx, step)).rejects.toSatisfy((error) => isRuntimeError(error, 'NotFound'));
    await runtime.removeBuild(ctx, build);
  });

  it('holds only shell scripts: another entrypoint is not held and nothing is created', async () => {
    const runtime = await newRuntime();
    const build = await newBuild(runtime);
    const step = emptyContainer({
      id: `step_${build.id}_echo`,
      name: 'echo',
      image: BUSYBOX,
      pull: 'never',
      number: 1,
      entrypoint: ['echo'],
      commands: ['hi'],
    });
    expect(await runtime.holdContainer?.(ctx, step, build)).toBe(false);
    await expect(runtime.inspectContainer(ctx, step)).rejects.toSatisfy((error) => isRuntimeError(error, 'NotFound'));
    await runtime.removeBuild(ctx, build);
  });
});
