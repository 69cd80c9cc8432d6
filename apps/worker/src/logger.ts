import { pino, type DestinationStream, type Logger } from 'pino';
import type { Io } from './io.ts';

/**
 * Readable log lines (pino-pretty) on `io.stderr`, synchronous. pino-pretty is loaded only here:
 * a process logging JSON (a deployed worker, `berth exec` in CI) never pays its ~10 ms and memory.
 */
export async function prettyStderr(io: Io, colorize: boolean): Promise<DestinationStream> {
  const { PinoPretty } = await import('pino-pretty');
  return PinoPretty({ destination: io.stderr, sync: true, colorize, ignore: 'pid,hostname', translateTime: 'HH:MM:ss.l' });
}

/**
 * Berth's own log (not the build's): readable lines on a terminal, JSON lines otherwise, on stderr.
 * Synchronous, so nothing is lost when the process exits.
 */
export async function createLogger(io: Io, level: string, color: boolean): Promise<Logger> {
  if (io.stderr.isTTY) return pino({ level, base: undefined }, await prettyStderr(io, color));
  return pino({ level, base: { name: 'berth' } }, io.stderr);
}
