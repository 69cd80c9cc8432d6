// End to end: a real `berth exec` killed with SIGKILL mid-step, and the runs after it (issue 25 item 6).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { execHost, execWorkerId, parseExecWorkerId } from '../src/exec-leftovers.ts';
import { spawnBerth } from './run-cli.ts';
import { tempDir } from './temp-dir.ts';

const BERTH = path.join(import.meta.dirname, '../bin/berth.js');
const IMAGE = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';
// A host name of this file's own: the other test files run berth exec on the same engine at the
// same time, and each would otherwise remove (and report) this file's killed run first.
const HOST = `leftovers-test-${process.pid}`;
/** One build number for every run of a test: the same build id, as runs in one directory have. */
const buildNumber = (): string => `${process.pid % 100000}${Math.floor(Math.random() * 1000)}`;

function workspace(): string {
  const dir = tempDir('berth-leftovers-');
  writeFileSync(
    path.join(dir, '.vela.yml'),
    [
      'version: "1"',
      'steps:',
      '  - name: long',
      `    image: ${IMAGE}`,
      '    pull: never',
      '    commands:',
      '      - echo started',
      '      - sleep 60',
      '',
    ].join('\n'),
  );
  return dir;
}

/** Containers, networks and volumes labelled with `owner`, by kind. */
function resourcesOf(owner: string): { containers: string[]; networks: string[]; volumes: string[] } {
  const label = `label=berth.dev/worker=${owner}`;
  const list = (args: string[]) => execFileSync('docker', args, { encoding: 'utf8' }).split('\n').filter(Boolean);
  return {
    containers: list(['ps', '-aq', '--filter', label]),
    networks: list(['network', 'ls', '-q', '--filter', label]),
    volumes: list(['volume', 'ls', '-q', '--filter', label]),
  };
}

/** Starts `berth exec` in `dir` and SIGKILLs it once its step printed; resolves the dead run's owner id. */
async function killMidStep(dir: string, number: string): Promise<string> {
  const child: ChildProcess = spawn(process.execPath, [BERTH, 'exec'], {
    cwd: dir,
    env: { ...process.env, NO_COLOR: '1', BERTH_BUILD_NUMBER: number, BERTH_EXEC_HOST: HOST },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const pid = child.pid!;
  let stdout = '';
  let stderr = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the step did not start within 60 s: ${stdout}${stderr}`)), 60_000);
    child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    child.stdout!.on('data', (b: Buffer) => {
      stdout += b.toString();
      if (/long +│ started/.test(stdout)) {
        clearTimeout(timer);
        child.kill('SIGKILL');
        resolve();
      }
    });
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  await new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve(undefined) : child.once('exit', resolve)));
  expect(child.signalCode).toBe('SIGKILL');
  return execWorkerId(pid, execHost(HOST));
}

describe('exec worker ids', () => {
  it('carry the host and the PID, and read back; ids of earlier versions have no host', () => {
    expect(execWorkerId(4242, 'build-host.example')).toBe('berth-exec-build-host.example-4242');
    expect(parseExecWorkerId('berth-exec-build-host.example-4242')).toEqual({ host: 'build-host.example', pid: 4242 });
    expect(parseExecWorkerId('berth-exec-4242')).toEqual({ host: undefined, pid: 4242 });
    expect(parseExecWorkerId('worker-1')).toBeUndefined();
    expect(parseExecWorkerId('berth-exec-host-x')).toBeUndefined();
    expect(execHost('a very/long host name that goes on and on and on and on')).toMatch(/^[A-Za-z0-9_.]{1,40}$/);
  });
});

describe('berth exec after a berth exec killed with SIGKILL', { timeout: 180_000 }, () => {
  it('removes what the dead run left, says what, and runs the same build in the same place', async () => {
    const dir = workspace();
    const number = buildNumber();
    const owner = await killMidStep(dir, number);
    const left = resourcesOf(owner);
    // What a killed run leaves: its step's container, the build's network and volume.
    expect(left.containers.length).toBeGreaterThan(0);
    expect(left.networks).toHaveLength(1);

    // The same build again, with its step cut short so it ends: the network's name is the same.
    writeFileSync(
      path.join(dir, '.vela.yml'),
      ['version: "1"', 'steps:', '  - name: short', `    image: ${IMAGE}`, '    pull: never', '    commands:', '      - echo again', ''].join('\n'),
    );
    const next = await spawnBerth(['exec'], dir, { BERTH_BUILD_NUMBER: number, BERTH_EXEC_HOST: HOST });
    expect(next.stderr).toContain(`berth: removed what an earlier berth exec (pid ${parseExecWorkerId(owner)!.pid}, no longer running) left: containers `);
    expect(next.stderr).toMatch(/; network \S+; volume/);
    expect(next.stdout).toMatch(/short +│ again/);
    expect(next.code).toBe(0);
    expect(resourcesOf(owner)).toEqual({ containers: [], networks: [], volumes: [] });
  });

  it('berth exec --cleanup removes them and runs nothing; a second --cleanup finds nothing', async () => {
    const dir = workspace();
    const owner = await killMidStep(dir, buildNumber());
    expect(resourcesOf(owner).networks).toHaveLength(1);
    const cleanup = await spawnBerth(['exec', '--cleanup'], dir, { BERTH_EXEC_HOST: HOST });
    expect(cleanup.code).toBe(0);
    expect(cleanup.stderr).toContain(`(pid ${parseExecWorkerId(owner)!.pid}, no longer running)`);
    expect(cleanup.stdout).toBe('');
    expect(resourcesOf(owner)).toEqual({ containers: [], networks: [], volumes: [] });
    const again = await spawnBerth(['exec', '--cleanup'], dir, { BERTH_EXEC_HOST: HOST });
    expect(again.stderr).toBe('berth: nothing left by earlier berth exec runs\n');
  });
});
