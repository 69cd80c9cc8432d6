import { pino, type Logger } from 'pino';
import { PinoPretty } from 'pino-pretty';
import type { Io } from './io.ts';

/**
 * Berth's own log (not the build's): readable lines on a terminal, JSON lines otherwise, on stderr.
 * Synchronous, so nothing is lost when the process exits.
 */
export function createLogger(io: Io, level: string, color: boolean): Logger {
  if (io.stderr.isTTY) {
    return pino(
      { level, base: undefined },
      PinoPretty({ destination: io.stderr, sync: true, colorize: color, ignore: 'pid,hostname', translateTime: 'HH:MM:ss.l' }),
    );
  }
  return pino({ level, base: { name: 'berth' } }, io.stderr);
}
