import { Readable, Transform } from 'node:stream';
import { background } from '@berth/context';
import type { Runtime } from '@berth/runtime';

/** The deliberate faults a broken dummy can have, to prove the conformance suite notices them. */
export type BrokenMode = 'drop-last-line' | 'ignore-wait-ctx' | 'buffer-whole-log' | 'end-before-exit' | 'image-without-nc';

/** The broken modes, for validation. */
export const BROKEN_MODES: readonly BrokenMode[] = ['drop-last-line', 'ignore-wait-ctx', 'buffer-whole-log', 'end-before-exit', 'image-without-nc'];

/**
 * Wraps a working runtime with one fault:
 * - `drop-last-line`: every log stream loses its last line (streaming; memory stays bounded);
 * - `ignore-wait-ctx`: `waitContainer` ignores its ctx (waits as if it were never cancelled);
 * - `buffer-whole-log`: every log stream reads its source as fast as it comes, ignoring the
 *   reader's pace (the whole log piles up in memory; nothing is lost);
 * - `end-before-exit`: every log stream ends at the first pause of 100 ms in the output, as a tail
 *   that stops at the log written so far (or at a read timeout) would; a tail opened after the exit is whole;
 * - `image-without-nc`: the image lacks `nc` (every script's `nc` is not found).
 */
export function brokenRuntime(inner: Runtime, mode: BrokenMode): Runtime {
  return new Proxy(inner, {
    get(target, property, receiver) {
      if (property === 'tailContainer' && mode === 'drop-last-line') {
        return async (...args: Parameters<Runtime['tailContainer']>) => dropLastLine(await target.tailContainer(...args));
      }
      if (property === 'tailContainer' && mode === 'buffer-whole-log') {
        return async (...args: Parameters<Runtime['tailContainer']>) => bufferWholeLog(await target.tailContainer(...args));
      }
      if (property === 'tailContainer' && mode === 'end-before-exit') {
        return async (...args: Parameters<Runtime['tailContainer']>) => endAtFirstPause(await target.tailContainer(...args));
      }
      if (property === 'setupContainer' && mode === 'image-without-nc') {
        return (
          ctx: Parameters<Runtime['setupContainer']>[0],
          container: Parameters<Runtime['setupContainer']>[1],
          build: Parameters<Runtime['setupContainer']>[2],
        ) => target.setupContainer(ctx, withoutNc(container), build);
      }
      if (property === 'runContainer' && mode === 'image-without-nc') {
        return (
          ctx: Parameters<Runtime['runContainer']>[0],
          container: Parameters<Runtime['runContainer']>[1],
          build: Parameters<Runtime['runContainer']>[2],
        ) => target.runContainer(ctx, withoutNc(container), build);
      }
      if (property === 'waitContainer' && mode === 'ignore-wait-ctx') {
        return (_ctx: unknown, container: Parameters<Runtime['waitContainer']>[1]) => target.waitContainer(background(), container);
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** Passes a stream through, holding back its last line and dropping it at the end. */
function dropLastLine(source: Readable): Readable {
  let held = Buffer.alloc(0);
  const transform = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      const data = Buffer.concat([held, chunk]);
      // Keep the last complete line and anything after it; pass the rest on.
      const lastNewline = data.lastIndexOf(0x0a);
      const previousNewline = lastNewline <= 0 ? -1 : data.lastIndexOf(0x0a, lastNewline - 1);
      const cut = lastNewline < 0 ? 0 : previousNewline + 1;
      held = data.subarray(cut);
      callback(null, data.subarray(0, cut));
    },
    flush(callback) {
      const newline = held.indexOf(0x0a);
      const partial = held.subarray(newline + 1);
      // A trailing partial line is the last line; otherwise the last complete line is.
      callback(null, partial.length > 0 ? held.subarray(0, newline + 1) : Buffer.alloc(0));
    },
  });
  source.on('error', (error) => transform.destroy(error));
  transform.on('close', () => source.destroy());
  return source.pipe(transform);
}

/** Re-emits a stream, pushing each chunk whatever `push` answers: no backpressure reaches the source. */
function bufferWholeLog(source: Readable): Readable {
  const out = new Readable({ read() {} });
  source.on('data', (chunk: Buffer) => out.push(chunk));
  source.on('end', () => out.push(null));
  source.on('error', (error) => out.destroy(error));
  out.on('close', () => source.destroy());
  return out;
}

/** Passes a stream through until its first 100 ms without data, then ends it. */
function endAtFirstPause(source: Readable): Readable {
  const out = new Readable({ read: () => source.resume() });
  let timer: NodeJS.Timeout | undefined;
  const end = (): void => {
    clearTimeout(timer);
    if (!out.readableEnded) out.push(null);
    source.destroy();
  };
  const arm = (): void => {
    clearTimeout(timer);
    timer = setTimeout(end, 100);
  };
  source.on('data', (chunk: Buffer) => {
    arm();
    if (!out.push(chunk)) source.pause();
  });
  source.on('end', end);
  source.on('error', (error) => {
    clearTimeout(timer);
    out.destroy(error);
  });
  out.on('close', () => {
    clearTimeout(timer);
    source.destroy();
  });
  arm();
  return out;
}

/** The container as an image without `nc` would run it: its build script calls a program that is not there. */
function withoutNc<T extends { environment: Record<string, string> }>(container: T): T {
  const script = container.environment.VELA_BUILD_SCRIPT;
  if (script === undefined) return container;
  const text = Buffer.from(script, 'base64')
    .toString('utf8')
    .replace(/\bnc(?= )/g, 'nc-not-in-this-image');
  return { ...container, environment: { ...container.environment, VELA_BUILD_SCRIPT: Buffer.from(text).toString('base64') } };
}
