// End to end: the real `berth` process on the real Docker engine.
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from './temp-dir.ts';

let runs = 0;
/** A build number no other test run on the shared engine uses at the same time. */
const uniqueBuildNumber = (): string => `${process.pid % 100000}${String(++runs).padStart(3, '0')}`;

const BERTH = path.join(import.meta.dirname, '../bin/berth.js');
const EXAMPLES = path.join(import.meta.dirname, '../../../examples');
const IMAGE = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs berth; `onOutput` sees stdout as it arrives and may signal the process. */
function berth(args: string[], options: { cwd?: string; onOutput?: (text: string, child: ReturnType<typeof spawn>) => void } = {}): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BERTH, ...args], {
      cwd: options.cwd ?? EXAMPLES,
      env: { ...process.env, NO_COLOR: '1', BERTH_BUILD_NUMBER: uniqueBuildNumber() },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => {
      stdout += b.toString();
      options.onOutput?.(stdout, child);
    });
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr, ms: Date.now() - started }));
  });
}

function leftovers(label: string): string[] {
  const args = (kind: string) => [kind, 'ls', '-q', '--filter', `label=${label}`];
  return [
    ...execFileSync('docker', ['ps', '-aq', '--filter', `label=${label}`], { encoding: 'utf8' }).split('\n'),
    ...execFileSync('docker', args('network'), { encoding: 'utf8' }).split('\n'),
    ...execFileSync('docker', args('volume'), { encoding: 'utf8' }).split('\n'),
  ].filter(Boolean);
}

function pipeline(text: string): { dir: string; file: string } {
  const dir = tempDir('berth-e2e-');
  const file = path.join(dir, '.vela.yml');
  writeFileSync(file, text);
  return { dir, file };
}

describe('berth exec on the real Docker engine', { timeout: 120_000 }, () => {
  it('runs examples/hello.yml on the current directory: both steps succeed, logs in order, exit 0', async () => {
    const { dir } = pipeline(readFileSync(path.join(EXAMPLES, 'hello.yml'), 'utf8'));
    writeFileSync(path.join(dir, 'marker.txt'), 'from the host\n');
    const run = await berth(['exec'], { cwd: dir });
    expect(run.stderr).toBe('');
    expect(run.stdout).toMatch(/read +│ this step runs in \/vela\/src/);
    expect(run.stdout).toMatch(/greet +│ hello from Berth/);
    expect(run.stdout).toMatch(/read +│ tick 1\n[\s\S]*read +│ tick 3/);
    expect(run.stdout).toMatch(/build \S+ ✓ success/);
    expect(run.code).toBe(0);
    // the workspace was the directory itself: the step's file came and went, the host's stayed
    expect(existsSync(path.join(dir, 'greeting.txt'))).toBe(false);
    expect(readFileSync(path.join(dir, 'marker.txt'), 'utf8')).toBe('from the host\n');
  });

  // Berth extension (go-vela/worker sets no limits): --container-* reach Docker's HostConfig. Here,
  // not in config.cli.test.ts: two local builds at once share the build id localOrg_localRepo_1.
  it("applies --container-memory, --container-pids and --container-cpus to the build's containers", async () => {
    // cgroup v1 or v2, whichever the engine uses.
    const show =
      'cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max /sys/fs/cgroup/cpu.max';
    const { dir } = pipeline(`version: "1"\nsteps:\n  - name: limits\n    image: ${IMAGE}\n    pull: never\n    commands:\n      - ${JSON.stringify(show)}\n`);
    const run = await berth(['exec', '--container-memory', '64m', '--container-pids', '50', '--container-cpus', '0.5'], { cwd: dir });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/limits +│ 67108864\n/);
    expect(run.stdout).toMatch(/limits +│ 50\n/);
    expect(run.stdout).toMatch(/limits +│ 50000\b/);
  });

  it('mounts the current directory as the workspace: a step reads and writes its files', async () => {
    const { dir } = pipeline(
      `version: "1"\nsteps:\n  - name: touch\n    image: ${IMAGE}\n    pull: never\n    commands: [cat input.txt, echo made-by-step > output.txt]\n`,
    );
    writeFileSync(path.join(dir, 'input.txt'), 'from the checkout\n');
    const run = await berth(['exec'], { cwd: dir });
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/touch +│ from the checkout/);
    expect(readFileSync(path.join(dir, 'output.txt'), 'utf8')).toBe('made-by-step\n');
  });

  it('runs examples/services.yml: a step reaches the service by its name', async () => {
    const run = await berth(['exec', 'services.yml']);
    expect(run.stdout).toMatch(/fetch +│ hello from the web service/);
    expect(run.code).toBe(0);
  });

  it('runs examples/stages.yml: package runs after lint and test', async () => {
    const run = await berth(['exec', 'stages.yml']);
    expect(run.code).toBe(0);
    const out = run.stdout;
    expect(out.indexOf('packaging after lint and test')).toBeGreaterThan(out.indexOf('lint ok'));
    expect(out.indexOf('packaging after lint and test')).toBeGreaterThan(out.indexOf('42 tests passed'));
  });

  it('runs examples/secrets.yml with the secret masked, even split across writes', async () => {
    const run = await berth(['exec', 'secrets.yml', '--secret', 'api_token=s3cr3t-t0ken']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('the token is ***');
    expect(run.stdout).not.toContain('s3cr3t-t0ken');
    expect(run.stdout).toMatch(/split across writes:\n.*│ \*\*\*\n/);
  });

  // Vela's outputs: go-vela/worker executor/linux/outputs.go (poll), internal/outputs/process.go (Process).
  it('runs examples/outputs.yml: a later step gets the outputs as environment and in its image tag, the masked one masked', async () => {
    const run = await berth(['exec', 'outputs.yml']);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/use +▶ step use \(berth\/busybox:1\.35\)/);
    expect(run.stdout).toMatch(/use +│ hello from decide, running on berth\/busybox:1\.35\n/);
    expect(run.stdout).toMatch(/use +│ the token is \*\*\*\n/);
    expect(run.stdout + run.stderr).not.toContain('deploy-s3cret');
  });

  it('an image ${KEY} that no step wrote fails the build, naming the step, the image and the key; nothing is left behind', async () => {
    const { dir } = pipeline(
      `version: "1"\nsteps:\n  - name: writes-other\n    image: ${IMAGE}\n    pull: never\n    commands: [echo OTHER=1 > /vela/outputs/.env]\n  - name: needs-tag\n    image: berth/busybox:\${TAG}\n    pull: never\n    commands: [echo never]\n`,
    );
    const number = String(900_000 + Math.floor(Math.random() * 99_999));
    const run = await berth(['exec', '--build-number', number], { cwd: dir });
    expect(run.code).toBe(1);
    const out = run.stdout + run.stderr;
    expect(out).toContain('step "needs-tag"');
    expect(out).toContain('image "berth/busybox:${TAG}" needs ${TAG}, which no step before it wrote to /vela/outputs');
    expect(out).not.toContain('never\n');
    expect(leftovers(`berth.dev/build=localOrg_localRepo_${number}`)).toEqual([]);
  });

  it('exits 1 when a step fails, and names the step', async () => {
    const { dir } = pipeline(
      `version: "1"\nsteps:\n  - name: broken\n    image: ${IMAGE}\n    pull: never\n    commands: [echo about to fail, exit 3]\n  - name: after\n    image: ${IMAGE}\n    pull: never\n    commands: [echo never]\n`,
    );
    const run = await berth(['exec'], { cwd: dir });
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/broken +failure/);
    expect(run.stdout).not.toContain('never\n');
  });

  it('fails fast on a missing image with pull: never, naming the step and the image', async () => {
    const { dir } = pipeline('version: "1"\nsteps:\n  - name: ghost\n    image: berth/does-not-exist:1\n    pull: never\n    commands: [echo hi]\n');
    const run = await berth(['exec'], { cwd: dir });
    expect(run.code).toBe(1);
    expect(run.stdout + run.stderr).toMatch(/ghost/);
    expect(run.stdout + run.stderr).toMatch(/berth\/does-not-exist:1/);
    expect(run.ms).toBeLessThan(60_000);
  });

  it('on Ctrl-C mid-step cancels the build and leaves no container, network or volume behind', async () => {
    const { dir } = pipeline(`version: "1"\nsteps:\n  - name: long\n    image: ${IMAGE}\n    pull: never\n    commands: [echo started, sleep 300]\n`);
    let signalled = false;
    let pid = 0;
    const run = await berth(['exec', '--stop-grace', '2s'], {
      cwd: dir,
      onOutput: (text, child) => {
        pid = child.pid ?? 0;
        if (!signalled && /long +│ started/.test(text)) {
          signalled = true;
          child.kill('SIGINT');
        }
      },
    });
    expect(signalled).toBe(true);
    expect(run.stderr).toContain('SIGINT: cancelling the build');
    expect(run.code).toBe(130);
    expect(run.ms).toBeLessThan(60_000);
    expect(leftovers(`berth.dev/worker=berth-exec-${pid}`)).toEqual([]);
  });
});
