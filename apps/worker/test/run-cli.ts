import { PassThrough } from 'node:stream';
import { main } from '../src/main.ts';
import type { Io } from '../src/io.ts';

/** What one in-process run of `berth` printed and returned. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `berth <args>` in this process, capturing its output. */
export async function runCli(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<CliRun> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  stdout.on('data', (b: Buffer) => out.push(b));
  stderr.on('data', (b: Buffer) => err.push(b));
  const io: Io = { stdout, stderr, env: options.env ?? {}, cwd: options.cwd ?? process.cwd(), exitCode: 0 };
  const code = await main(['node', 'berth', ...args], io);
  return { code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
}
