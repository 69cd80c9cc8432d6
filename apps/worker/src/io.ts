import type { Writable } from 'node:stream';

/** Where a command writes, and the exit status it sets: injectable for tests. */
export interface Io {
  stdout: Writable & { isTTY?: boolean };
  stderr: Writable & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  cwd: string;
  exitCode: number;
}
