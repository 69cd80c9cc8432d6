/**
 * Issue #13 item 2: draining logs after the build's containers are done is bounded by the
 * log-streaming grace, in every path. go-vela/worker cancels the build ctx when ExecBuild returns
 * (cmd/vela-worker/exec.go), and StreamBuild's ctx is WithDelayedCancelPropagation(ctx,
 * logStreamingTimeout) (executor/linux/build.go, StreamBuild): a stream that never ends is cut
 * one log-streaming timeout after the build's containers are done.
 */
import { background, sleep } from '@berth/context';
import { describe, expect, it } from 'vitest';
import { runBuild } from '../src/run-build.ts';
import { ctn, dummy, makeBuild, RecordingReporter } from './helpers.ts';
import { type StreamEvents, stuckStreams } from './slow-runtime.ts';

const GRACE_MS = 200;
/** Large on purpose: on the old code the timeout path waited this long for the stuck stream. */
const CLEANUP_MS = 60_000;

const paths = {
  success: { commands: ['echo done'], timeoutMs: 60_000, cancel: false, status: 'success' },
  failure: { commands: ['echo failing', 'exit 3'], timeoutMs: 60_000, cancel: false, status: 'failure' },
  cancel: { commands: ['echo waiting', 'sleep 60'], timeoutMs: 60_000, cancel: true, status: 'canceled' },
  timeout: { commands: ['echo waiting', 'sleep 60'], timeoutMs: 300, cancel: false, status: 'error' },
} as const;

describe.each(Object.keys(paths) as Array<keyof typeof paths>)('a log stream that never ends, on %s', (path) => {
  it('is cut one log-streaming grace after the containers are done, and the build ends', async () => {
    const spec = paths[path];
    const { runtime: base, engine } = await dummy();
    const events: StreamEvents = { cut: new Map() };
    const runtime = stuckStreams(base, events);
    const reporter = new RecordingReporter();
    // When the step reached its final status: its container is done (ended, killed or stopped).
    let stepFinal = 0;
    const original = reporter.stepStatus.bind(reporter);
    reporter.stepStatus = (ctx, step) => {
      if (step.name === 'one' && step.status !== 'running' && stepFinal === 0) stepFinal = performance.now();
      return original(ctx, step);
    };
    const build = makeBuild({ steps: [ctn('one', { commands: [...spec.commands] })] });
    const run = runBuild(background(), {
      build,
      runtime,
      reporter,
      timeoutMs: spec.timeoutMs,
      logStreamingGraceMs: GRACE_MS,
      cleanupTimeoutMs: CLEANUP_MS,
      onStart: (executor) => {
        if (!spec.cancel) return;
        // Cancel once the step logged (it runs, its stream is open).
        const poll = setInterval(() => {
          if (!reporter.log('one').includes('waiting')) return;
          clearInterval(poll);
          executor.cancelBuild();
        }, 5);
      },
    });
    // The build's bound from its config: timeout (or cancel) + grace + cleanup. The old code
    // never ended (success, failure) or waited the whole cleanup limit (timeout); a tenth of it
    // is ample for a bound of grace + removal.
    const ended = await Promise.race([run.then(() => true), sleep(background(), CLEANUP_MS / 10).then(() => false)]);
    expect(ended).toBe(true);
    const result = await run;
    expect(result.status).toBe(spec.status);
    // Order of events: the step is done, then its stream is cut, no earlier than the grace after.
    const cut = events.cut.get('one');
    expect(cut).toBeDefined();
    expect(stepFinal).toBeGreaterThan(0);
    // Timers may fire a millisecond early; the cut comes at least the grace after the step ended.
    expect((cut ?? 0) - stepFinal).toBeGreaterThanOrEqual(path === 'cancel' || path === 'timeout' ? 0 : GRACE_MS - 5);
    expect(reporter.closed).toContain('one');
    expect(reporter.log('one')).toMatch(/done|failing|waiting/);
    // The cut is said at the end of the log, not silent: the reader knows the log is incomplete.
    expect(reporter.log('one')).toMatch(/\n> the log stream was cut .*0\.2 s.*\n$/);
    expect(engine.containers.size + engine.networks.size + engine.volumes.size).toBe(0);
  });
});
