import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { Io } from './io.ts';
import { createLogger } from './logger.ts';

function io(isTTY: boolean): { io: Io; text: () => string } {
  const stderr = Object.assign(new PassThrough(), { isTTY });
  let text = '';
  stderr.on('data', (d: Buffer) => (text += d.toString()));
  return { io: { stdout: new PassThrough(), stderr, env: {}, cwd: '/', exitCode: 0 }, text: () => text };
}

describe("berth exec's own log", () => {
  it.each([true, false])('prints a warning in the console format, never as a JSON line (stderr a TTY: %s)', (isTTY) => {
    const out = io(isTTY);
    const logger = createLogger(out.io, 'warn', false);
    logger.warn('could not remove network localOrg_localRepo_1: the Docker engine went away');
    logger.info('not shown at level warn');
    expect(out.text()).toBe('warning: could not remove network localOrg_localRepo_1: the Docker engine went away\n');
  });

  it('prints lower levels when asked, and nothing when silent', () => {
    const debug = io(false);
    createLogger(debug.io, 'debug', false).debug('pulling');
    expect(debug.text()).toBe('debug: pulling\n');
    const silent = io(false);
    createLogger(silent.io, 'silent', false).warn('x');
    expect(silent.text()).toBe('');
  });

  it('colours the word on a colour terminal', () => {
    const out = io(true);
    createLogger(out.io, 'warn', true).warn('x');
    expect(out.text()).toBe('\u001b[33mwarning:\u001b[0m x\n');
  });
});
