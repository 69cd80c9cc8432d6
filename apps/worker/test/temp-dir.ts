// Temporary directories of the tests, removed once the test file that made them is done.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';

const made: string[] = [];

// Registered on the importing test file's root suite when the file is collected (vitest runs each
// file with its own modules). Its after-all hooks run last to first, and a describe's run before
// the file's, so this one comes after every other: after the daemons and child processes the
// file's own hooks stop, which may write into these directories until then.
afterAll(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A new directory `<os tmpdir>/<prefix>XXXXXX`, removed after the last test of this file. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}
