import { PassThrough, Writable } from 'node:stream';
import { background } from '@berth/context';
import { describe, expect, it } from 'vitest';
import type { Status, Target } from '@berth/executor';
import { emptyBuild, emptyContainer, prepareBuild } from '@berth/pipeline';
import { ConsoleReporter } from './console-reporter.ts';

function capture(tty = false): { out: PassThrough & { isTTY?: boolean }; text: () => string } {
  const out = new PassThrough() as PassThrough & { isTTY?: boolean };
  if (tty) out.isTTY = true;
  const chunks: Buffer[] = [];
  out.on('data', (c: Buffer) => chunks.push(c));
  return { out, text: () => Buffer.concat(chunks).toString('utf8') };
}

const target: Target = { kind: 'step', name: 'test', number: 2, id: 'step_test', image: 'busybox' };

describe('ConsoleReporter', () => {
  it('prints prefixed live lines, step headers and results, and a summary table', async () => {
    const { out, text } = capture();
    // The reports an executor sends for a build of three steps whose second fails (the executor's
    // own tests check it sends them).
    const build = prepareBuild(
      emptyBuild({
        steps: [
          emptyContainer({ name: 'compile', image: 'berth/busybox:1.35', commands: ['echo building'] }),
          emptyContainer({ name: 'test', image: 'berth/busybox:1.35', commands: ['exit 3'] }),
          emptyContainer({ name: 'deploy', image: 'berth/busybox:1.35', commands: ['true'] }),
        ],
      }),
      { org: 'org', repo: 'repo', number: 1 },
    );
    const reporter = new ConsoleReporter(out, { build, env: {} });
    const ctx = background();
    const step = (name: string, number: number): Target => ({ kind: 'step', name, number, id: `step_${name}`, image: 'berth/busybox:1.35' });
    const report = (t: Target, status: Status, exitCode = 0, times: { started?: number; finished?: number } = {}) => ({
      ...t,
      status,
      exitCode,
      detached: false,
      continueOnFailure: false,
      ...times,
    });
    const buildReport = { id: build.id, runtime: 'dummy', host: 'h', distribution: 'linux' };
    await reporter.buildStatus(ctx, { ...buildReport, status: 'running', started: 1000 });
    const compile = step('compile', 2);
    await reporter.stepStatus(ctx, report(compile, 'running', 0, { started: 1000 }));
    await reporter.appendLog(ctx, compile, Buffer.from('building\ndone building\n'));
    await reporter.stepStatus(ctx, report(compile, 'success', 0, { started: 1000, finished: 1500 }));
    await reporter.closeLog(ctx, compile);
    const test = step('test', 3);
    await reporter.stepStatus(ctx, report(test, 'running', 0, { started: 1500 }));
    await reporter.appendLog(ctx, test, Buffer.from('testing\n'));
    await reporter.stepStatus(ctx, { ...report(test, 'failure', 3, { started: 1500, finished: 1520 }), error: 'exited with code 3' });
    await reporter.closeLog(ctx, test);
    const deploy = step('deploy', 4);
    await reporter.stepStatus(ctx, report(deploy, 'skipped'));
    await reporter.buildStatus(ctx, { ...buildReport, status: 'failure', started: 1000, finished: 2000 });
    const printed = text();
    expect(reporter.colored).toBe(false);
    expect(printed).not.toContain('\u001b[');
    expect(printed).toContain(`build ${build.id} on dummy (h)`);
    expect(printed).toMatch(/^compile │ building$/m);
    expect(printed).toMatch(/^test {4}│ testing$/m);
    expect(printed).toMatch(/^compile ▶ step compile \(berth\/busybox:1\.35\)$/m);
    expect(printed).toMatch(/^test {4}✗ failure \(exit code 3\) in \d+ms$/m);
    expect(printed).toMatch(/^deploy {2}– skipped$/m);
    expect(printed).toMatch(/^STEP\s+STATUS\s+DURATION\s+EXIT$/m);
    expect(printed).toMatch(/^compile\s+success\s+\S+\s+0$/m);
    expect(printed).toMatch(/^test\s+failure\s+\S+\s+3$/m);
    expect(printed).toMatch(/^deploy\s+skipped\s+-\s+-$/m);
    expect(printed).toMatch(new RegExp(`^build ${build.id} ✗ failure in \\S+$`, 'm'));
  });

  it("prints a step's result after its last log line, even when the status arrives first", async () => {
    const { out, text } = capture();
    const reporter = new ConsoleReporter(out, { env: {}, nameWidth: 4 });
    const ctx = background();
    const report = { ...target, exitCode: 0, detached: false, continueOnFailure: false };
    await reporter.stepStatus(ctx, { ...report, status: 'running', started: 1000 });
    await reporter.appendLog(ctx, target, Buffer.from('first\nsecond '));
    await reporter.stepStatus(ctx, { ...report, status: 'success', started: 1000, finished: 3000 });
    await reporter.appendLog(ctx, target, Buffer.from('half\nlast\n'));
    await reporter.closeLog(ctx, target);
    expect(text()).toBe('test ▶ step test (busybox)\ntest │ first\ntest │ second half\ntest │ last\ntest ✓ success in 2.0s\n');
  });

  it('colours only on a TTY without NO_COLOR', () => {
    expect(new ConsoleReporter(capture(true).out, { env: {} }).colored).toBe(true);
    expect(new ConsoleReporter(capture(true).out, { env: { NO_COLOR: '1' } }).colored).toBe(false);
    expect(new ConsoleReporter(capture(true).out, { env: { NO_COLOR: '' } }).colored).toBe(true);
    expect(new ConsoleReporter(capture(false).out, { env: {} }).colored).toBe(false);
  });

  it('keeps multi-byte characters and lines whole across chunks, and prints the last partial line on close', async () => {
    const { out, text } = capture();
    const reporter = new ConsoleReporter(out, { env: {}, nameWidth: 4 });
    const bytes = Buffer.from('héllo wörld\nsecond €\nno newline');
    for (let i = 0; i < bytes.length; i += 3) await reporter.appendLog(background(), target, bytes.subarray(i, i + 3));
    await reporter.closeLog(background(), target);
    expect(text()).toBe('test │ héllo wörld\ntest │ second €\ntest │ no newline\n');
  });

  it('prints pull progress once per status', () => {
    const { out, text } = capture();
    const reporter = new ConsoleReporter(out, { env: {}, nameWidth: 4 });
    const pull = (status: string, current?: number) =>
      reporter.runtimeEvent(background(), target, {
        type: 'pull',
        buildId: 'b',
        containerId: 'c',
        image: 'alpine:3',
        status,
        ...(current === undefined ? {} : { current, total: 2048 }),
      });
    pull('Pulling fs layer');
    pull('Downloading', 1024);
    pull('Downloading', 2000);
    pull('Pull complete');
    expect(text()).toBe(
      'test │ [pull] alpine:3: Pulling fs layer\ntest │ [pull] alpine:3: Downloading 1.0 KiB/2.0 KiB\ntest │ [pull] alpine:3: Pull complete\n',
    );
  });

  it('waits for drain when the terminal is slow', async () => {
    const written: string[] = [];
    let release = (): void => undefined;
    const slow = new Writable({
      highWaterMark: 16,
      write(chunk: Buffer, _enc, callback) {
        written.push(chunk.toString());
        release = () => callback();
      },
    });
    const reporter = new ConsoleReporter(slow, { env: {}, nameWidth: 4 });
    let done = false;
    const p = reporter.appendLog(background(), target, Buffer.from('a long enough line to fill the buffer\n')).then(() => (done = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(done).toBe(false);
    release();
    await p;
    expect(done).toBe(true);
  });
});
