import { createHash } from 'node:crypto';
import type { Writable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { withCancel } from '@berth/context';
import { isRuntimeError } from '@berth/runtime';
import { expect } from '../expect.ts';
import { collectStream, waitForExit } from '../drive.ts';
import { describeError, describeOutcome, pollUntil, settleWithin } from '../harness.ts';
import { expectExit, oneStep, runOne, type ConformanceCase } from './shared.ts';

/** A logs case: `script` must produce exactly `logs`. */
function logsCase(name: string, script: string[], logs: string, fields: { exitCode?: number; tools?: string[]; liveTail?: boolean } = {}): ConformanceCase {
  return {
    group: 'logs',
    name,
    ...(fields.tools === undefined ? {} : { tools: fields.tools }),
    ...(fields.liveTail === undefined ? {} : { liveTail: fields.liveTail }),
    async run(h) {
      const result = await runOne(h, { script });
      expect(result.logs).toBe(logs);
      expectExit(result, fields.exitCode ?? 0);
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

/** The cases of the `logs` group: order, completeness, tails after the exit, a large log, cancellation. */
export function logsCases(): ConformanceCase[] {
  return [
    logsCase(
      'delivers stdout and stderr interleaved in the order they were written',
      ['echo out-1', 'sleep 0.2', 'echo err-1 >&2', 'sleep 0.2', 'echo out-2', 'sleep 0.2', 'echo err-2 >&2', 'sleep 0.2', 'echo out-3'],
      'out-1\nerr-1\nout-2\nerr-2\nout-3\n',
      { tools: ['sleep'], liveTail: true },
    ),
    logsCase('delivers output without a trailing newline', ['echo first', 'printf no-newline'], 'first\nno-newline', { tools: ['printf'] }),
    logsCase('delivers output under 5 bytes', ['printf ab'], 'ab', { tools: ['printf'] }),
    logsCase(
      'delivers the output written just before the process exits',
      ['echo start', 'sleep 0.5', 'echo last-line-before-exit', 'exit 4'],
      'start\nlast-line-before-exit\n',
      { exitCode: 4, tools: ['sleep'], liveTail: true },
    ),
    {
      group: 'logs',
      name: 'a tail opened after the container exited returns all its output, every time',
      tools: ['sleep', 'printf'],
      async run(h) {
        // Pauses between stream switches: engines stamp stdout and stderr from separate readers, so
        // lines written back to back on different streams have no order to keep (the ordering case
        // above checks interleaving); this case is about getting everything after the exit.
        const { runtime, build, step } = await oneStep(h, { script: ['echo a', 'sleep 0.2', 'echo b >&2', 'sleep 0.2', 'printf c'] });
        await runtime.runContainer(h.ctx(), step, build);
        const exit = await waitForExit(runtime, step, h.options.timeouts.case);
        for (let attempt = 0; attempt < 2; attempt++) {
          const ctx = h.ctx();
          const logs = (await collectStream(ctx, await runtime.tailContainer(ctx, step))).toString();
          if (attempt === 0) expectExit({ exit, logs }, 0);
          expect(logs, `tail number ${attempt + 1} after the exit`).toBe('a\nb\nc');
        }
      },
    },
    {
      group: 'logs',
      name: 'delivers a large log (largeLogBytes, 50 MiB by default) completely and in order while the reader holds little memory',
      capabilities: ['largeLogs'],
      tools: ['yes', 'head'],
      liveTail: true,
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
        let head = '';
        const hash = createHash('sha256');
        await runtime.runContainer(ctx, step, build);
        const stream = await runtime.tailContainer(ctx, step);
        await collectStream(ctx, stream, async (chunk) => {
          hash.update(chunk);
          if (head.length < 2_000) head += chunk.subarray(0, 2_000).toString();
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
        expectExit({ exit, logs: bytes < 2_000 ? head : `${head.slice(0, 2_000)}… (${bytes} bytes in all)` }, 0);
        expect(bytes).toBe(total);
        expect(hash.digest('hex'), 'sha256 of the log').toBe(expectedYesHash(LARGE_LOG_PATTERN, total));
        expect(bufferedWhilePaused, 'bytes buffered in the tail stream while its reader paused for 1 s (the runtime must apply backpressure)').toBeLessThan(
          LARGE_LOG_MAX_BUFFERED,
        );
        const growth = rssPeak - rssBefore;
        expect(growth, `RSS grew by ${Math.round(growth / 1e6)} MB while reading`).toBeLessThan(h.options.largeLogMemoryLimitBytes);
      },
    },
    {
      group: 'logs',
      name: 'a log stream is destroyed with Canceled within 1 s of its ctx being cancelled',
      tools: ['sleep'],
      liveTail: true,
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
        expect(
          await pollUntil(() => Promise.resolve(seen.includes('started')), 10_000),
          `the first line arrives while the container runs; the log so far: ${JSON.stringify(seen)}`,
        ).toBe(true);
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
  ];
}
