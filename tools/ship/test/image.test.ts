// The worker image, built as an operator would build it (tools/ship/image.sh: a base made
// locally, since no registry is reachable here), run as an operator would run it: --version,
// a `berth exec` of an example against the host's Docker engine through the mounted socket, and
// SIGTERM reaching the worker (not swallowed by PID 1), which cancels and cleans up.
import { execFile, spawn } from 'node:child_process';
import { chmod, copyFile, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../src/pack.ts';

const run = promisify(execFile);
const IMAGE = process.env.BERTH_WORKER_IMAGE ?? 'berth/worker:dev';
let workspace: string;
let socketGroup: string;

beforeAll(async () => {
  // The test command (tools/test.sh) builds the image with the same script before the tests and
  // says so (BERTH_WORKER_IMAGE_BUILT=1): the file then runs that image instead of building it
  // again while the fleet lane imports it into the cluster.
  if (process.env.BERTH_WORKER_IMAGE_BUILT !== '1')
    await run('bash', [path.join(REPO_ROOT, 'tools/ship/image.sh')], { cwd: REPO_ROOT, maxBuffer: 64 * 1024 * 1024 });
  // Step containers are siblings on the host's engine, so the workspace has the same path on
  // the host and in the worker's container.
  workspace = await mkdtemp(path.join(os.tmpdir(), 'berth-image-'));
  await chmod(workspace, 0o777);
  socketGroup = String((await stat('/var/run/docker.sock')).gid);
}, 900_000);

afterAll(async () => {
  if (workspace) await rm(workspace, { recursive: true, force: true });
});

function dockerRun(buildNumber: string, args: string[]): string[] {
  return [
    'run',
    '--rm',
    '-v',
    '/var/run/docker.sock:/var/run/docker.sock',
    '--group-add',
    socketGroup,
    '-v',
    `${workspace}:${workspace}`,
    '-w',
    workspace,
    '-e',
    `BERTH_BUILD_NUMBER=${buildNumber}`,
    IMAGE,
    ...args,
  ];
}

async function leftovers(buildNumber: string): Promise<string> {
  const id = `localOrg_localRepo_${buildNumber}`;
  const containers = (await run('docker', ['ps', '-a', '--filter', `name=${id}`, '--format', '{{.Names}}'])).stdout;
  const networks = (await run('docker', ['network', 'ls', '--filter', `name=${id}`, '--format', '{{.Name}}'])).stdout;
  const volumes = (await run('docker', ['volume', 'ls', '--filter', `name=${id}`, '--format', '{{.Name}}'])).stdout;
  return (containers + networks + volumes).trim();
}

describe('the worker image', () => {
  it('runs as a non-root user and answers --version with the worker version', async () => {
    const manifest = JSON.parse(await readFile(path.join(REPO_ROOT, 'apps/worker/package.json'), 'utf8')) as { version: string };
    const { stdout } = await run('docker', ['run', '--rm', IMAGE, '--version']);
    expect(stdout.trim()).toBe(manifest.version);
    const user = (await run('docker', ['image', 'inspect', '-f', '{{.Config.User}}', IMAGE])).stdout.trim();
    expect(user).not.toMatch(/^(|0|root)(:|$)/);
  });

  it('runs examples/hello.yml with berth exec through the mounted Docker socket', async () => {
    await copyFile(path.join(REPO_ROOT, 'examples/hello.yml'), path.join(workspace, 'hello.yml'));
    const buildNumber = `${process.pid}1`;
    const { stdout } = await run('docker', dockerRun(buildNumber, ['exec', 'hello.yml']), { maxBuffer: 16 * 1024 * 1024 });
    expect(stdout).toContain('hello from Berth');
    expect(stdout).toMatch(/build \S+ ✓ success/);
    expect(await leftovers(buildNumber)).toBe('');
  }, 300_000);

  it('hands SIGTERM to the worker: the build is canceled, cleaned up, and berth exits 130', async () => {
    await writeFile(
      path.join(workspace, 'long.yml'),
      'version: "1"\nsteps:\n  - name: wait\n    image: berth/busybox:1.35\n    pull: never\n    commands:\n      - echo started\n      - sleep 300\n',
    );
    const buildNumber = `${process.pid}2`;
    const name = `berth-image-term-${process.pid}`;
    const child = spawn('docker', ['run', '--name', name, ...dockerRun(buildNumber, ['exec', 'long.yml']).slice(1)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    await expect.poll(() => output, { timeout: 120_000, interval: 250 }).toContain('started');
    await run('docker', ['kill', '--signal', 'TERM', name]);
    const code = await exited;
    expect(code, output).toBe(130);
    expect(output).toMatch(/cancel/i);
    expect(await leftovers(buildNumber)).toBe('');
  }, 300_000);
});
