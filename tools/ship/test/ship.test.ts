// What a plugin author installs, checked as they would meet it: every public package packed as
// `pnpm publish` would pack it, linted (publint --strict), its types resolved (attw, esm-only),
// then installed with plain npm into a project outside the workspace that imports each package
// and runs the conformance suite against a plugin of its own.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MINI_PLUGIN, npmInstall, runConformance, writeConsumer } from '../src/consumer.ts';
import { attw, packAll, publicPackages, publint, REPO_ROOT, type PackedPackage } from '../src/pack.ts';

const run = promisify(execFile);
const packages = await publicPackages();
let scratch: string;
let packed: PackedPackage[] = [];

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'berth-ship-'));
  packed = await packAll(path.join(scratch, 'tarballs'));
}, 600_000);

afterAll(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

function tarballOf(name: string): string {
  const pkg = packed.find((p) => p.name === name);
  if (!pkg) throw new Error(`${name} was not packed`);
  return pkg.tarball;
}

async function manifestIn(tarball: string): Promise<Record<string, unknown>> {
  const { stdout } = await run('tar', ['-xzOf', tarball, 'package/package.json']);
  return JSON.parse(stdout) as Record<string, unknown>;
}

describe.each(packages.map((p) => p.name))('%s as packed', (name) => {
  it('ships built JavaScript, declarations and the sources its maps point at', async () => {
    const { stdout } = await run('tar', ['-tzf', tarballOf(name)]);
    const files = stdout.split('\n');
    expect(files).toContain('package/dist/index.js');
    expect(files).toContain('package/dist/index.d.ts');
    expect(files).toContain('package/dist/index.js.map');
    expect(files).toContain('package/src/index.ts');
    expect(files).toContain('package/LICENSE');
    expect(files.filter((f) => f.includes('.test.'))).toEqual([]);
  });

  it('has no workspace: or catalog: range and no source-only export condition', async () => {
    const manifest = await manifestIn(tarballOf(name));
    const ranges = JSON.stringify([manifest.dependencies, manifest.peerDependencies, manifest.optionalDependencies]);
    expect(ranges).not.toMatch(/"(workspace|catalog):/);
    expect(JSON.stringify(manifest.exports)).not.toContain('@berth/source');
    expect(manifest).toHaveProperty('repository');
    expect(manifest.license).toBe('Apache-2.0');
  });

  it('passes publint --strict', async () => {
    const result = await publint(tarballOf(name));
    expect(result.ok, result.output).toBe(true);
  });

  it('passes attw --profile esm-only', async () => {
    const result = await attw(tarballOf(name));
    expect(result.ok, result.output).toBe(true);
  });
});

describe('a consumer project outside the workspace', () => {
  let consumer: string;

  beforeAll(async () => {
    consumer = path.join(scratch, 'consumer');
    const root = JSON.parse(await readFile(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
    const vitestRange = root.devDependencies.vitest;
    if (!vitestRange) throw new Error('the root package.json names no vitest version');
    await writeConsumer(consumer, packed, vitestRange);
    await npmInstall(consumer);
  }, 900_000);

  it('imports every package from plain Node ESM', async () => {
    const script = `for (const name of ${JSON.stringify(packages.map((p) => p.name))}) {
      const m = await import(name);
      if (Object.keys(m).length === 0) throw new Error(name + ' exports nothing');
      console.log(name, Object.keys(m).length);
    }`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: consumer, env: { ...process.env, NODE_OPTIONS: '' } });
    expect(stdout.trim().split('\n')).toHaveLength(packages.length);
  });

  it('installs one copy of each Berth package', async () => {
    const { stdout } = await run('npm', ['ls', '--all', '--parseable'], { cwd: consumer }).catch((e: { stdout: string }) => ({ stdout: e.stdout }));
    for (const { name } of packages) {
      const copies = stdout.split('\n').filter((line) => line.endsWith(`/node_modules/${name}`));
      expect(copies, name).toHaveLength(1);
    }
  });

  it('berth exec loads the outside plugin by its path and runs an example on it', async () => {
    const plugin = path.join(consumer, 'node_modules', MINI_PLUGIN, 'index.js');
    const { stdout } = await run(
      process.execPath,
      [path.join(REPO_ROOT, 'apps/worker/bin/berth.js'), 'exec', '--runtime', plugin, path.join(REPO_ROOT, 'examples/hello.yml')],
      {
        cwd: consumer,
        env: { ...process.env, NO_COLOR: '1', NODE_OPTIONS: '' },
        maxBuffer: 16 * 1024 * 1024,
      },
    );
    expect(stdout).toMatch(/^build \S+ on mini/m);
    expect(stdout).toContain('hello from Berth');
    expect(stdout).toMatch(/build \S+ ✓ success/);
  }, 120_000);

  it('runs the conformance suite green against a plugin of its own', async () => {
    const { report, output } = await runConformance(consumer);
    expect(report.numFailedTests, output.slice(-4000)).toBe(0);
    expect(report.numPassedTests).toBeGreaterThan(20);
    console.log(`consumer conformance: ${report.numPassedTests} passed, ${report.numPendingTests} skipped`);
  }, 600_000);
});
