import { setTimeout as sleep } from 'node:timers/promises';
import { background } from '@berth/context';
import type { Container } from '@berth/pipeline';
import { isRuntimeError } from '@berth/runtime';
import { describe, expect, it } from 'vitest';
import { engine, readAll, shellStep, step, useEngine } from './fixture.ts';

/**
 * The held start (contract 1.4, `holdContainer` / `releaseContainer`): the container is created
 * and started ahead with its shell waiting for a line on stdin; the release sends it. Checked on
 * the real engine: nothing runs and nothing is logged before the release, the command's whole
 * output comes once after it (through the attach opened at the hold), stdin is at EOF for the
 * command, and a container never released is killed and removed without the stop grace.
 */
const ctx = background();
const fx = useEngine('held');
const { run } = fx;

/** The engine's log file of the container, read directly (not through the runtime). */
async function engineLog(container: Container): Promise<string> {
  const raw = await engine().getContainer(container.id).logs({ stdout: true, stderr: true, follow: false });
  return raw.toString('latin1');
}

describe('a held container (holdContainer / releaseContainer)', () => {
  it('runs nothing and logs nothing until released, then gives the whole output once, with stdin at EOF', async () => {
    const runtime = await fx.newRuntime();
    const build = await fx.newBuild(runtime);
    // Marks the workspace when it runs, so that "nothing ran" is checked beside "nothing logged".
    const seq = shellStep(
      build,
      'seq',
      `touch /vela/ran-${run}; seq 1 20000 | sed 's/^/e/' >&2 & seq 1 50000 | sed 's/^/o/'; wait; echo "stdin:$(cat | wc -c)"`,
    );
    expect(await runtime.holdContainer?.(ctx, seq, build)).toBe(true);
    await sleep(800);
    expect(await runtime.inspectContainer(ctx, seq)).toEqual({ state: 'running' });
    expect(await engineLog(seq)).toBe('');
    const probe = shellStep(build, 'probe', `test ! -e /vela/ran-${run}`);
    await runtime.setupContainer(ctx, probe, build);
    await runtime.runContainer(ctx, probe, build);
    expect(await runtime.waitContainer(ctx, probe)).toMatchObject({ exitCode: 0 });

    await runtime.releaseContainer?.(ctx, seq);
    const log = readAll(await runtime.tailContainer(ctx, seq));
    expect(await runtime.waitContainer(ctx, seq)).toMatchObject({ exitCode: 0 });
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
    const runtime = await fx.newRuntime({}, { stopGraceMs: 60_000 });
    const build = await fx.newBuild(runtime);
    const unreleased = shellStep(build, 'unreleased', 'echo must-not-run');
    expect(await runtime.holdContainer?.(ctx, unreleased, build)).toBe(true);
    const started = Date.now();
    await runtime.removeContainer(ctx, unreleased);
    expect(Date.now() - started).toBeLessThan(30_000);
    await expect(runtime.inspectContainer(ctx, unreleased)).rejects.toSatisfy((error) => isRuntimeError(error, 'NotFound'));
    await expect(runtime.releaseContainer?.(ctx, unreleased)).rejects.toSatisfy((error) => isRuntimeError(error, 'NotFound'));
    await runtime.removeBuild(ctx, build);
  });

  it('holds only shell scripts: another entrypoint is not held and nothing is created', async () => {
    const runtime = await fx.newRuntime();
    const build = await fx.newBuild(runtime);
    const echo = step(build, 'echo', { entrypoint: ['echo'], commands: ['hi'] });
    expect(await runtime.holdContainer?.(ctx, echo, build)).toBe(false);
    await expect(runtime.inspectContainer(ctx, echo)).rejects.toSatisfy((error) => isRuntimeError(error, 'NotFound'));
    await runtime.removeBuild(ctx, build);
  });
});
