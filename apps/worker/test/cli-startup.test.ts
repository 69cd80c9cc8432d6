// The CLI loads only what the command needs: `berth --version` no TypeScript at all, and
// `berth validate` neither the executor, the runtimes nor the daemon's server and queue client.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const APP = path.resolve(import.meta.dirname, '..');
const BIN = path.join(APP, 'bin/berth.js');
const TRACE = path.join(import.meta.dirname, 'fixtures/trace-loads.mjs');
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'berth-cli-startup-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function loads(args: string[]): Promise<{ stdout: string; modules: string[] }> {
  const file = path.join(dir, `${args.join('_').replace(/\W/g, '_')}.txt`);
  const { stdout } = await run(process.execPath, ['--import', TRACE, BIN, ...args], {
    cwd: path.resolve(APP, '../..'),
    env: { ...process.env, BERTH_TRACE_LOADS: file, NODE_OPTIONS: '' },
  });
  const modules = (await readFile(file, 'utf8').catch(() => '')).split('\n').filter(Boolean);
  return { stdout, modules };
}

describe('berth start-up', () => {
  it('answers --version from package.json without loading TypeScript or a dependency', async () => {
    const { stdout, modules } = await loads(['--version']);
    const manifest = JSON.parse(await readFile(path.join(APP, 'package.json'), 'utf8')) as { version: string };
    expect(stdout.trim()).toBe(manifest.version);
    expect(modules.filter((m) => m.endsWith('.ts') || m.includes('node_modules'))).toEqual([]);
  });

  it('validate loads neither the executor, a runtime, nor the daemon', async () => {
    const { stdout, modules } = await loads(['validate', 'examples/hello.yml']);
    expect(stdout).toContain('is valid');
    const heavy = modules.filter((m) => /executor|runtime-docker|runtime-kubernetes|dockerode|client-node|fastify|ioredis|daemon/.test(m));
    expect(heavy).toEqual([]);
  });

  it('still lists every command in --help', async () => {
    const { stdout } = await loads(['--help']);
    for (const command of ['exec', 'validate', 'compile', 'start']) expect(stdout).toMatch(new RegExp(`^  ${command} `, 'm'));
  });
});
