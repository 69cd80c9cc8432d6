import { Readable, Transform } from 'node:stream';
import { background } from '@berth/context';
import type { Runtime } from '@berth/runtime';

/** The deliberate faults a broken dummy can have, to prove the conformance suite notices them. */
export type BrokenMode = 'drop-last-line' | 'ignore-wait-ctx' | 'buffer-whole-log';

/** The broken modes, for validation. */
export const BROKEN_MODES: readonly BrokenMode[] = ['drop-last-line', 'ignore-wait-ctx', 'buffer-whole-log'];

/**
 * Wraps a working runtime with one fault:
 * - `drop-last-line`: every log stream loses its last line (streaming; memory stays bounded);
 * - `ignore-wait-ctx`: `waitContainer` ignores its ctx (waits as if it were never cancelled);
 * - `buffer-whole-log`: every log stream reads its source as fast as it comes, ignoring the
 *   reader's pace (the whole log piles up in memory; nothing is lost).
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
