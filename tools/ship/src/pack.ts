/**
 * Packs the workspace's public packages exactly as `pnpm publish` would (prepack builds them,
 * `workspace:` and `catalog:` ranges are rewritten, `publishConfig` applies), so that what the
 * checks look at is what a plugin author installs.
 */
import { execFile } from 'node:child_process';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The repository's root folder. */
export const REPO_ROOT = path.resolve(import.meta.dirname, '../../..');

/** A public (publishable) workspace package. */
export interface PublicPackage {
  /** Its npm name, e.g. `@berth/runtime`. */
  name: string;
  /** Its version from package.json. */
  version: string;
  /** Its folder relative to the repository root, e.g. `packages/runtime`. */
  dir: string;
  /** A library under `packages/` (imported), or a command under `apps/` (its bin is run). */
  kind: 'library' | 'command';
}

/** Lists the workspace packages under `packages/` (libraries) and `apps/` (commands) that are not private. */
export async function publicPackages(root = REPO_ROOT): Promise<PublicPackage[]> {
  const found: PublicPackage[] = [];
  for (const [group, kind] of [
    ['packages', 'library'],
    ['apps', 'command'],
  ] as const) {
    for (const entry of (await readdir(path.join(root, group), { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
      if (!entry.isDirectory()) continue;
      const dir = `${group}/${entry.name}`;
      let manifest: { name: string; version: string; private?: boolean };
      try {
        manifest = JSON.parse(await readFile(path.join(root, dir, 'package.json'), 'utf8')) as typeof manifest;
      } catch {
        continue;
      }
      if (!manifest.private) found.push({ name: manifest.name, version: manifest.version, dir, kind });
    }
  }
  return found;
}

/** The names of the workspace's private packages (tools, test doubles): no published manifest may name them. */
export async function privatePackages(root = REPO_ROOT): Promise<string[]> {
  const names: string[] = [];
  for (const group of ['packages', 'apps', 'tools']) {
    for (const entry of await readdir(path.join(root, group), { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      try {
        const manifest = JSON.parse(await readFile(path.join(root, group, entry.name, 'package.json'), 'utf8')) as { name: string; private?: boolean };
        if (manifest.private) names.push(manifest.name);
      } catch {
        // not a package
      }
    }
  }
  return names.sort();
}

/** A packed package: the package and the path of its tarball. */
export interface PackedPackage extends PublicPackage {
  tarball: string;
}

/**
 * Builds every public package once (turbo, cached), then runs `pnpm pack` in each package's
 * folder, a few at once, writing the tarballs to `destination`. Each package's `prepack` is that
 * build (of the package and what it depends on), done here once for all of them: the packs skip it
 * (`ignore-scripts`).
 */
export async function packAll(destination: string, root = REPO_ROOT): Promise<PackedPackage[]> {
  await mkdir(destination, { recursive: true });
  const packages = await publicPackages(root);
  await run('pnpm', ['exec', 'turbo', 'run', 'build', ...packages.map((p) => `--filter=${p.name}`), '--output-logs=errors-only'], {
    cwd: root,
    maxBuffer: 64 * 1024 * 1024,
  });
  const pack = limiter(3);
  return Promise.all(
    packages.map((pkg) =>
      pack(async () => {
        const { stdout } = await run('pnpm', ['pack', '--config.ignore-scripts=true', '--pack-destination', destination, '--json'], {
          cwd: path.join(root, pkg.dir),
          maxBuffer: 64 * 1024 * 1024,
        });
        return { ...pkg, tarball: tarballOf(stdout, destination, pkg) };
      }),
    ),
  );
}

/** Runs the functions it is given at most `n` at a time, in the order given. */
export function limiter(n: number): <T>(fn: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (fn) => {
    if (running >= n) await new Promise<void>((resolve) => waiting.push(resolve));
    running++;
    try {
      return await fn();
    } finally {
      running--;
      waiting.shift()?.();
    }
  };
}

/** Reads the tarball path from `pnpm pack --json`, falling back to pnpm's naming rule. */
function tarballOf(stdout: string, destination: string, pkg: PublicPackage): string {
  const start = stdout.indexOf('{');
  if (start >= 0) {
    try {
      const parsed = JSON.parse(stdout.slice(start)) as { filename?: string };
      if (parsed.filename) return path.resolve(destination, parsed.filename);
    } catch {
      // fall through to the naming rule
    }
  }
  return path.join(destination, `${pkg.name.replace(/^@/, '').replace('/', '-')}-${pkg.version}.tgz`);
}

/** The outcome of one check on one tarball. */
export interface CheckResult {
  ok: boolean;
  output: string;
}

/** Runs `publint --strict` on a tarball. */
export async function publint(tarball: string, root = REPO_ROOT): Promise<CheckResult> {
  return check('publint', ['--strict', tarball], root);
}

/** Runs `attw --pack --profile esm-only` (Are the Types Wrong) on a tarball. */
export async function attw(tarball: string, root = REPO_ROOT): Promise<CheckResult> {
  return check('attw', ['--pack', tarball, '--profile', 'esm-only', '--no-color'], root);
}

/** Runs one of the root's tools (its bin in node_modules/.bin: what `pnpm exec` would run, without pnpm's start-up). */
async function check(tool: string, args: string[], root: string): Promise<CheckResult> {
  try {
    const { stdout, stderr } = await run(path.join(root, 'node_modules', '.bin', tool), args, { cwd: root, maxBuffer: 16 * 1024 * 1024 });
    return { ok: true, output: stdout + stderr };
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string };
    return { ok: false, output: `${e.stdout ?? ''}${e.stderr ?? ''}` || e.message };
  }
}
