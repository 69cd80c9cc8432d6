import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { conformanceCases } from '@berth/runtime-conformance';
import { describe, expect, it } from 'vitest';
import type { BrokenMode } from './broken/broken-runtime.ts';

// Proof that the conformance suite can fail: it runs against a dummy with one deliberate fault,
// in a child vitest (test/broken/*.conformance.ts, included only with BERTH_DUMMY_BROKEN), and
// must fail exactly the cases that fault breaks, no more, no fewer.

const packageDir = path.resolve(import.meta.dirname, '..');
const vitestBin = path.join(path.dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs');

interface JsonReport {
  testResults: { assertionResults: { title: string; status: string; failureMessages?: string[] }[] }[];
}

/** Runs the suite against the broken dummy; returns the names of failed and passed cases. */
async function runBroken(
  mode: BrokenMode,
): Promise<{ failed: string[]; passed: string[]; skipped: string[]; undeclared: string[]; messages: string[]; output: string }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'berth-broken-'));
  const outputFile = path.join(dir, 'report.json');
  try {
    const env: NodeJS.ProcessEnv = { ...process.env, BERTH_DUMMY_BROKEN: mode };
    // The child's results must not land in the project's summed reports.
    delete env.BERTH_TEST_REPORT_DIR;
    delete env.VITEST;
    delete env.VITEST_WORKER_ID;
    delete env.VITEST_POOL_ID;
    const child = spawn(process.execPath, [vitestBin, 'run', '--reporter=json', `--outputFile=${outputFile}`], {
      cwd: packageDir,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code, `the broken run must fail; its output:\n${output.slice(-3000)}`).not.toBe(0);
    const report = JSON.parse(await readFile(outputFile, 'utf8')) as JsonReport;
    const results = report.testResults.flatMap((file) => file.assertionResults);
    return {
      failed: results
        .filter((r) => r.status === 'failed')
        .map((r) => r.title)
        .sort(),
      passed: results
        .filter((r) => r.status === 'passed')
        .map((r) => r.title)
        .sort(),
      // The cases of an optional capability the broken dummy (a factory, declaring none) does not declare.
      undeclared: results.filter((r) => r.title.includes('[skipped: the plugin does not declare')).map((r) => r.title),
      skipped: results
        .filter((r) => (r.status === 'skipped' || r.status === 'pending') && !r.title.includes('[skipped: the plugin does not declare'))
        .map((r) => r.title)
        .sort(),
      messages: results.flatMap((r) => r.failureMessages ?? []),
      output,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const allCases = conformanceCases().map((c) => c.name);
const expectFailures = (names: string[]): string[] => {
  for (const name of names) expect(allCases, `"${name}" is a case of the suite`).toContain(name);
  return [...names].sort();
};

// Each case is a child vitest of its own, mostly waiting on the dummy's timers: they run at once.
describe.concurrent('the conformance suite fails a broken runtime', () => {
  it('a runtime whose log streams drop their last line fails every case that reads logs, and only those', async () => {
    const { failed, passed, skipped, undeclared } = await runBroken('drop-last-line');
    expect(failed).toEqual(
      expectFailures([
        "the image (or host) has the programs the suite's scripts use",
        'a log stream opened while the container runs ends only after the container exited',
        'runs the commands as the command line when there is no entrypoint, exit code 0',
        'runs the entrypoint with the commands as its arguments',
        'runs a Vela build script (VELA_BUILD_SCRIPT through /bin/sh -e) line by line',
        'reports exit code 1 and stops the script at its first failing command',
        "passes the container's environment to its process, values verbatim",
        "runs in the container's working directory",
        'mounts the workspace at workspacePath itself',
        "runs as the container's user",
        'delivers stdout and stderr interleaved in the order they were written',
        'delivers output without a trailing newline',
        'delivers output under 5 bytes',
        'delivers the output written just before the process exits',
        'a tail opened after the container exited returns all its output, every time',
        'delivers a large log (largeLogBytes, 50 MiB by default) completely and in order while the reader holds little memory',
        'a log stream is destroyed with Canceled within 1 s of its ctx being cancelled',
        'a detached service is reachable by its name from a step of the same build',
        "a held container runs nothing and logs nothing until released; then its log is the whole output and its exit the script's",
        'the steps of one build share its workspace',
        "two builds running at the same time do not see each other's workspace",
        'outputs: files steps write to /vela/outputs are shared by the build and read through its containers',
      ]),
    );
    expect(passed.length + failed.length + skipped.length + undeclared.length).toBe(allCases.length);
  }, 180_000);

  it('a runtime whose waitContainer ignores its ctx fails the two wait-cancellation cases, and only those', async () => {
    const { failed, passed, skipped, undeclared } = await runBroken('ignore-wait-ctx');
    expect(failed).toEqual(
      expectFailures([
        'waitContainer rejects with Canceled within 1 s of its ctx being cancelled and leaves the container running; removal then leaves nothing',
        'waitContainer rejects with DeadlineExceeded within 1 s of its ctx deadline',
      ]),
    );
    expect(passed.length + failed.length + skipped.length + undeclared.length).toBe(allCases.length);
  }, 180_000);

  it("a runtime whose log streams ignore the reader's pace fails the large-log case, and only that", async () => {
    const { failed, passed, skipped, undeclared, messages } = await runBroken('buffer-whole-log');
    expect(failed).toEqual(
      expectFailures(['delivers a large log (largeLogBytes, 50 MiB by default) completely and in order while the reader holds little memory']),
    );
    expect(messages.join('\n')).toMatch(/bytes buffered in the tail stream while its reader paused for 1 s/);
    expect(passed.length + failed.length + skipped.length + undeclared.length).toBe(allCases.length);
  }, 180_000);

  // Upstream of the two cases below: go-vela/worker's runtime/docker/container.go TailContainer
  // follows the log (`Follow: true`) until the container ends; a tail that stops earlier is the fault.
  it('a runtime whose log streams end before the container exits fails one preflight case naming that cause, and only that', async () => {
    const { failed, passed, skipped, undeclared, messages } = await runBroken('end-before-exit');
    expect(failed).toEqual(expectFailures(['a log stream opened while the container runs ends only after the container exited']));
    expect(messages.join('\n')).toMatch(
      /the log stream of follow ended while the container was still running; it delivered "first\\n" but a tail opened after the exit returned "first\\nlast\\n"/,
    );
    // The cases that need a live stream are skipped (naming the failed case); every other case re-reads the log and passes.
    expect(skipped).toEqual(
      expectFailures([
        'delivers stdout and stderr interleaved in the order they were written',
        'delivers the output written just before the process exits',
        'delivers a large log (largeLogBytes, 50 MiB by default) completely and in order while the reader holds little memory',
        'a log stream is destroyed with Canceled within 1 s of its ctx being cancelled',
      ]),
    );
    expect(passed.length + failed.length + skipped.length + undeclared.length).toBe(allCases.length);
  }, 180_000);

  it('an image without nc fails the tools preflight naming nc, and skips the one case that calls it', async () => {
    const { failed, passed, skipped, undeclared, messages } = await runBroken('image-without-nc');
    expect(failed).toEqual(expectFailures(["the image (or host) has the programs the suite's scripts use"]));
    expect(messages.join('\n')).toMatch(/lacks nc, or they do not behave as the suite's scripts expect/);
    expect(skipped).toEqual(expectFailures(['a detached service is reachable by its name from a step of the same build']));
    expect(passed.length + failed.length + skipped.length + undeclared.length).toBe(allCases.length);
  }, 180_000);
});
