// What a plugin author installs, checked as they would meet it: every public package packed as
// `pnpm publish` would pack it, linted (publint --strict), its types resolved (attw, esm-only),
// then installed with plain npm into a project outside the workspace — the `berth` command and a
// plugin of the project's own, packed with npm pack — that certifies the plugin with `berth
// runtimes verify`, runs an example with `berth exec` on it, and runs the conformance suite.
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MINI_PLUGIN, npmInstall, npmPack, runConformance, runInstalledBerth, writeConsumer, writePlugin } from '../src/consumer.ts';
import { attw, type CheckResult, limiter, packAll, privatePackages, publicPackages, publint, REPO_ROOT, type PackedPackage } from '../src/pack.ts';

const run = promisify(execFile);
const packages = await publicPackages();
const libraries = packages.filter((p) => p.kind === 'library');
const hidden = await privatePackages();
let scratch: string;
let packed: PackedPackage[] = [];
/** publint's and attw's verdict on each tarball, by `<tool> <name>`: started once packed, three at a time, awaited by their cases. */
const checks = new Map<string, Promise<CheckResult>>();

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'berth-ship-'));
  packed = await packAll(path.join(scratch, 'tarballs'));
  const three = limiter(3);
  for (const pkg of packed) {
    checks.set(
      `publint ${pkg.name}`,
      three(() => publint(pkg.tarball)),
    );
    if (pkg.kind === 'library')
      checks.set(
        `attw ${pkg.name}`,
        three(() => attw(pkg.tarball)),
      );
  }
}, 600_000);

function checked(key: string): Promise<CheckResult> {
  const result = checks.get(key);
  if (!result) throw new Error(`no ${key} was started`);
  return result;
}

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

describe.each(packages.map((p) => p.name))('%s as packed: its manifest', (name) => {
  it('has no workspace: or catalog: range, names no private package, and has no source-only export condition', async () => {
    const manifest = await manifestIn(tarballOf(name));
    const ranges = JSON.stringify([manifest.dependencies, manifest.peerDependencies, manifest.optionalDependencies, manifest.devDependencies]);
    expect(ranges).not.toMatch(/"(workspace|catalog):/);
    for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies', 'devDependencies']) {
      const named = Object.keys(manifest[field] ?? {});
      expect(
        named.filter((n) => hidden.includes(n)),
        `${field} of ${name} names private packages`,
      ).toEqual([]);
    }
    expect(JSON.stringify(manifest.exports)).not.toContain('@berth/source');
    expect(manifest).toHaveProperty('repository');
    expect(manifest.license).toBe('Apache-2.0');
  });

  it('passes publint --strict', async () => {
    const result = await checked(`publint ${name}`);
    expect(result.ok, result.output).toBe(true);
  });
});

describe('@berth/worker (the berth command) as packed', () => {
  it('ships the bundled command, its build stamp and its bin, and no sources or tests', async () => {
    const { stdout } = await run('tar', ['-tzf', tarballOf('@berth/worker')]);
    const files = stdout.split('\n').filter(Boolean);
    for (const file of ['package/bin/berth.js', 'package/bin/entry.js', 'package/dist/bundle/main.js', 'package/dist/.build-stamp', 'package/LICENSE']) {
      expect(files).toContain(file);
    }
    expect(files.filter((f) => f.startsWith('package/src/') || f.startsWith('package/test/') || f.includes('.test.'))).toEqual([]);
    const manifest = await manifestIn(tarballOf('@berth/worker'));
    expect(manifest.bin).toEqual({ berth: './bin/berth.js' });
    expect(manifest.private).toBeUndefined();
  });
});

describe.each(libraries.map((p) => p.name))('%s as packed', (name) => {
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

  it('passes attw --profile esm-only', async () => {
    const result = await checked(`attw ${name}`);
    expect(result.ok, result.output).toBe(true);
  });
});

describe('a consumer project outside the workspace', () => {
  let consumer: string;
  let hello: string;

  beforeAll(async () => {
    consumer = path.join(scratch, 'consumer');
    const root = JSON.parse(await readFile(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
    const vitestRange = root.devDependencies.vitest;
    if (!vitestRange) throw new Error('the root package.json names no vitest version');
    // The plugin team's package, packed as they would publish it.
    const pluginDir = path.join(scratch, MINI_PLUGIN);
    await writePlugin(pluginDir);
    const pluginTarball = await npmPack(pluginDir, path.join(scratch, 'tarballs'));
    await writeConsumer(consumer, packed, pluginTarball, vitestRange);
    await npmInstall(consumer);
    hello = path.join(consumer, 'hello.yml');
    await copyFile(path.join(REPO_ROOT, 'examples/hello.yml'), hello);
  }, 900_000);

  it('imports every library from plain Node ESM', async () => {
    const script = `for (const name of ${JSON.stringify(libraries.map((p) => p.name))}) {
      const m = await import(name);
      if (Object.keys(m).length === 0) throw new Error(name + ' exports nothing');
      console.log(name, Object.keys(m).length);
    }`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: consumer, env: { ...process.env, NODE_OPTIONS: '' } });
    expect(stdout.trim().split('\n')).toHaveLength(libraries.length);
  });

  it('installs one copy of each Berth package', async () => {
    const { stdout } = await run('npm', ['ls', '--all', '--parseable'], { cwd: consumer }).catch((e: { stdout: string }) => ({ stdout: e.stdout }));
    for (const { name } of packages) {
      const copies = stdout.split('\n').filter((line) => line.endsWith(`/node_modules/${name}`));
      expect(copies, name).toHaveLength(1);
    }
  });

  it('berth runtimes verify <plugin> prints the table of cases and passes the plugin', async () => {
    const verify = await runInstalledBerth(consumer, ['runtimes', 'verify', MINI_PLUGIN], consumer);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    expect(verify.stdout).toContain(`Verifying mini 0.1.0 (${MINI_PLUGIN}) against the Runtime conformance suite`);
    expect(verify.stdout).toMatch(/^passed {3}required +container: runs a Vela build script/m);
    expect(verify.stdout).toMatch(/^skipped {2}optional: outputs +outputs: .*\n +└ the plugin does not declare the optional capability outputs$/m);
    expect(verify.stdout).toMatch(/^passed {3}optional: hostWorkspace +hostWorkspace: /m);
    expect(verify.stdout).toMatch(/^skipped {2}required +images: .*\n +└ lacks images: steps run on the host: there are no images$/m);
    expect(verify.stdout).toMatch(/: \d+ passed, 0 failed, \d+ skipped\.\nIt conforms\.\n$/);
    console.log(`berth runtimes verify ${MINI_PLUGIN}:\n${verify.stdout}`);
  }, 600_000);

  it('berth exec runs an example on the plugin, found in the project by its package name', async () => {
    const exec = await runInstalledBerth(consumer, ['exec', '--runtime', MINI_PLUGIN, 'hello.yml'], consumer);
    expect(exec.code, exec.stdout + exec.stderr).toBe(0);
    expect(exec.stdout).toMatch(/^build \S+ on mini/m);
    expect(exec.stdout).toContain('hello from Berth');
    // It declares hostWorkspace: the build runs on the project folder.
    expect(exec.stdout).toContain(`this step runs in ${consumer}`);
    expect(exec.stdout).toMatch(/build \S+ ✓ success/);
    expect(exec.stderr).not.toMatch(/"level":/);
  }, 120_000);

  it("reports an invalid plugin option as the plugin's configuration error, in its words, with the usage exit status", async () => {
    const exec = await runInstalledBerth(consumer, ['exec', '--runtime', MINI_PLUGIN, '--runtime-option', 'root=relative/dir', 'hello.yml'], consumer);
    expect(exec.code).toBe(2);
    expect(exec.stderr).toBe(
      `berth: --runtime ${MINI_PLUGIN}: the plugin's configuration is invalid (root=…): option root must be an absolute path; got "relative/dir"\n`,
    );
    expect(exec.stdout).toBe('');
  }, 60_000);

  it('finds the plugin beside the command when the current folder has none, and says where it looked for one it cannot find', async () => {
    const elsewhere = path.join(scratch, 'elsewhere');
    await mkdir(elsewhere, { recursive: true });
    const verify = await runInstalledBerth(consumer, ['runtimes', 'verify', MINI_PLUGIN, '--filter', 'exit code'], elsewhere);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    expect(verify.stdout).toContain('It conforms.');
    const missing = await runInstalledBerth(consumer, ['exec', '--runtime', 'berth-runtime-absent', path.join(consumer, 'hello.yml')], elsewhere);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`no installed package of that name was found; looked in ${path.join(consumer, 'node_modules')}.`);
  }, 120_000);

  it('runs the conformance suite green with vitest against the plugin of its own', async () => {
    const { report, output } = await runConformance(consumer);
    expect(report.numFailedTests, output.slice(-4000)).toBe(0);
    expect(report.numPassedTests).toBeGreaterThan(20);
    console.log(`consumer conformance: ${report.numPassedTests} passed, ${report.numPendingTests} skipped`);
  }, 600_000);
});
