// What loading the Docker runtime costs a process that only needs the Docker client.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);

describe('loading @berth/runtime-docker', () => {
  it('does not load undici (fetch): an ES import of node:http would, through its lazy WebSocket exports', async () => {
    // Node's ES module view of a built-in reads all of its exports; node:http's WebSocket,
    // CloseEvent and MessageEvent are getters that load undici (~30 ms, ~14 MB of RSS).
    const script = "await import('@berth/runtime-docker'); process.stdout.write(String(process.moduleLoadList.filter((m) => m.includes('undici')).length));";
    const { stdout } = await run(process.execPath, ['--conditions=@berth/source', '--input-type=module', '-e', script], { cwd: import.meta.dirname });
    expect(Number(stdout)).toBe(0);
  });
});
