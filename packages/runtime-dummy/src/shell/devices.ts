/**
 * Device files of the dummy's shell.
 */
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Input } from './io.ts';

/** An endless input of zero bytes (`/dev/zero`), ended by a kill of the process (`checkAlive`). */
export function zeros(process: { checkAlive(): void }): Input {
  const block = Buffer.alloc(65_536);
  return {
    async *[Symbol.asyncIterator]() {
      for (let i = 0; ; i++) {
        process.checkAlive();
        if (i % 16 === 15) await yieldToEventLoop();
        yield block;
      }
    },
  };
}
