/**
 * The builds this worker is running, kept in a small file so that a worker restarted after a
 * crash can still report them: the server gives build tokens only for pending builds, so a
 * running build can only be updated with the token the worker was given when it claimed it.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** One running build: where it is and the token to update it with. */
export interface RunningBuildRecord {
  id: number;
  org: string;
  repo: string;
  number: number;
  /** The build token (a secret: the file is written with mode 0600). */
  token: string;
  /** When it was claimed, ms since the epoch. */
  claimedAt: number;
}

/**
 * A JSON file of {@link RunningBuildRecord}s, rewritten atomically (temp file and rename) on each
 * change. Without a directory it only keeps the records in memory.
 *
 * Gotcha: the file holds build tokens; its directory should be private to the worker.
 */
export class RunningBuildsFile {
  readonly file: string | undefined;
  readonly #records = new Map<number, RunningBuildRecord>();

  constructor(dir: string | undefined, hostname: string) {
    this.file = dir === undefined ? undefined : path.join(dir, `running-builds-${hostname.replace(/[^A-Za-z0-9_.-]/g, '_')}.json`);
  }

  /** The records a previous run left (empty when there is no file or it is unreadable). */
  load(): RunningBuildRecord[] {
    if (this.file === undefined) return [];
    try {
      const data: unknown = JSON.parse(readFileSync(this.file, 'utf8'));
      if (!Array.isArray(data)) return [];
      return data.filter(
        (r): r is RunningBuildRecord =>
          typeof r === 'object' && r !== null && typeof (r as RunningBuildRecord).id === 'number' && typeof (r as RunningBuildRecord).token === 'string',
      );
    } catch {
      return [];
    }
  }

  /** Adds a build and writes the file. */
  add(record: RunningBuildRecord): void {
    this.#records.set(record.id, record);
    this.#write();
  }

  /** Removes a build and writes the file. */
  remove(id: number): void {
    if (this.#records.delete(id)) this.#write();
  }

  /** Forgets what a previous run left: writes the file with the current records only. */
  reset(): void {
    this.#write();
  }

  #write(): void {
    if (this.file === undefined) return;
    mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o700 });
    const tmp = `${this.file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify([...this.#records.values()]), { mode: 0o600 });
    renameSync(tmp, this.file);
  }
}
