/** The engine's answers read by hand: the wait endpoint's exit, the last frame of a log answer. */
import type { Readable } from 'node:stream';

/** The timestamp of the last frame of a multiplexed, timestamped log answer, if any. */
export function lastFrameTimestamp(data: Buffer): string | undefined {
  let offset = 0;
  let last: string | undefined;
  while (offset + 8 <= data.length) {
    const length = data.readUInt32BE(offset + 4);
    const payload = data.subarray(offset + 8, Math.min(data.length, offset + 8 + length));
    const space = payload.indexOf(0x20);
    if (space > 0) last = payload.subarray(0, space).toString('latin1');
    offset += 8 + length;
  }
  return last;
}

/** Reads the wait endpoint's JSON answer; a connection that ends without one is an engine loss. */
export function readExit(stream: Readable, signal: AbortSignal): Promise<{ StatusCode: number; Error?: { Message?: string } | null }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let settled = false;
    const settle = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      fn();
    };
    const onAbort = (): void => {
      stream.destroy();
      settle(() => reject(signal.reason instanceof Error ? signal.reason : new Error('wait aborted')));
    };
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.once('error', (error) => settle(() => reject(error)));
    stream.once('end', () =>
      settle(() => {
        const text = Buffer.concat(chunks).toString('utf8').trim();
        try {
          const parsed = JSON.parse(text) as { StatusCode?: number; Error?: { Message?: string } | null };
          if (typeof parsed.StatusCode !== 'number') throw new Error('no StatusCode');
          resolve({ StatusCode: parsed.StatusCode, Error: parsed.Error ?? null });
        } catch {
          reject(Object.assign(new Error(`the engine ended the wait without an exit code (${JSON.stringify(text.slice(0, 200))})`), { code: 'ECONNRESET' }));
        }
      }),
    );
    stream.once('close', () => {
      if (!stream.readableEnded) settle(() => reject(Object.assign(new Error('the engine closed the connection during the wait'), { code: 'ECONNRESET' })));
    });
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}
