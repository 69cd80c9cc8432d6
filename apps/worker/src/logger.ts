import type { DestinationStream } from 'pino';
import type { Io } from './io.ts';

/**
 * Readable log lines (pino-pretty) on `io.stderr`, synchronous. pino-pretty is loaded only here:
 * a process logging JSON (a deployed worker) never pays its ~10 ms and memory.
 */
export async function prettyStderr(io: Io, colorize: boolean): Promise<DestinationStream> {
  const { PinoPretty } = await import('pino-pretty');
  return PinoPretty({ destination: io.stderr, sync: true, colorize, ignore: 'pid,hostname', translateTime: 'HH:MM:ss.l' });
}

/** The levels `berth exec`'s own log prints, lowest first. */
const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
const WORDS: Record<(typeof LEVELS)[number], string> = { trace: 'trace', debug: 'debug', info: 'info', warn: 'warning', error: 'error', fatal: 'error' };

/** `berth exec`'s own log (what the executor reports beside the build: a cleanup that failed, say). */
export interface ConsoleLogger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
}

/**
 * `berth exec`'s own log, in the console's format: `warning: <message>` lines on stderr, as the
 * command's other warnings (yellow on a colour terminal), never JSON in the middle of the build's
 * output. `level` is the lowest level printed (`silent`: nothing).
 */
export function createLogger(io: Io, level: string, color: boolean): ConsoleLogger {
  const lowest = LEVELS.indexOf(level as (typeof LEVELS)[number]);
  const paint = color && Boolean(io.stderr.isTTY) && !io.env.NO_COLOR;
  const line =
    (at: (typeof LEVELS)[number]) =>
    (message: string): void => {
      if (lowest < 0 || LEVELS.indexOf(at) < lowest) return;
      const word = `${WORDS[at]}:`;
      io.stderr.write(`${paint && at === 'warn' ? `\u001b[33m${word}\u001b[0m` : word} ${message}\n`);
    };
  return { debug: line('debug'), info: line('info'), warn: line('warn') };
}
