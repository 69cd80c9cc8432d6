import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import ts from 'typescript';
import { layeringViolation, roleOf, type Role } from './layers.ts';

/** A workspace package as the checker sees it. */
export interface WorkspacePackage {
  name: string;
  /** Folder relative to the workspace root, e.g. `packages/context`. */
  dir: string;
  role: Role;
  dependencies: Set<string>;
  devDependencies: Set<string>;
  /** Only `dependencies` (not peers): what an installation would duplicate. */
  regularDependencies?: Set<string>;
}

/** One import that breaks a rule. */
export interface Violation {
  /** File relative to the workspace root. */
  file: string;
  line: number;
  specifier: string;
  rule: 'layering' | 'undeclared' | 'dev-only' | 'peer';
  message: string;
}

const SOURCE_EXT = /\.(?:[cm]?ts|[cm]?js|tsx|jsx)$/;
const SKIP_DIRS = new Set(['node_modules', 'dist', '.turbo', 'coverage', 'fixtures']);
const BUILTINS = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));

/** Reads the workspace's packages from the folders pnpm-workspace.yaml lists (packages/*, apps/*, tools/*). */
export function readWorkspace(root: string, groups: readonly string[] = ['packages', 'apps', 'tools']): WorkspacePackage[] {
  const found: WorkspacePackage[] = [];
  for (const group of groups) {
    const groupDir = path.join(root, group);
    if (!existsSync(groupDir)) continue;
    for (const entry of readdirSync(groupDir, { withFileTypes: true })) {
      const manifestPath = path.join(groupDir, entry.name, 'package.json');
      if (!entry.isDirectory() || !existsSync(manifestPath)) continue;
      const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as {
        name: string;
        dependencies?: Record<string, string>;
        peerDependencies?: Record<string, string>;
        optionalDependencies?: Record<string, string>;
        devDependencies?: Record<string, string>;
      };
      const dir = `${group}/${entry.name}`;
      found.push({
        name: manifest.name,
        dir,
        role: roleOf(manifest.name, dir),
        dependencies: new Set([
          ...Object.keys(manifest.dependencies ?? {}),
          ...Object.keys(manifest.peerDependencies ?? {}),
          ...Object.keys(manifest.optionalDependencies ?? {}),
        ]),
        devDependencies: new Set(Object.keys(manifest.devDependencies ?? {})),
        regularDependencies: new Set(Object.keys(manifest.dependencies ?? {})),
      });
    }
  }
  return found;
}

/** True for files that do not ship: tests, test folders, benchmarks and config files. */
export function isTestFile(relativeToPackage: string): boolean {
  const p = relativeToPackage.split(path.sep).join('/');
  return (
    /(^|\/)(test|tests|__tests__|bench)\//.test(p) ||
    /\.(test|spec|bench)\.[cm]?[jt]sx?$/.test(p) ||
    /(^|\/)[^/]+\.config\.[cm]?[jt]s$/.test(p) ||
    !p.startsWith('src/')
  );
}

/** The package a bare specifier names: `@berth/context/testing` → `@berth/context`. */
export function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier);
}

function* sourceFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) {
      if (!SKIP_DIRS.has(entry.name) && !entry.name.startsWith('.')) yield* sourceFiles(path.join(dir, entry.name));
    } else if (SOURCE_EXT.test(entry.name) && !entry.name.endsWith('.d.ts')) {
      yield path.join(dir, entry.name);
    }
  }
}

/** The module specifiers a file imports (static, dynamic, re-exports, require), with line numbers. */
export function importsOf(text: string): { specifier: string; line: number }[] {
  const info = ts.preProcessFile(text, true, true);
  return info.importedFiles.map((ref) => ({ specifier: ref.fileName, line: lineAt(text, ref.pos) }));
}

function lineAt(text: string, pos: number): number {
  let line = 1;
  for (let i = text.indexOf('\n'); i !== -1 && i < pos; i = text.indexOf('\n', i + 1)) line++;
  return line;
}

/** Checks every source file of every workspace package under `root`. */
export function checkWorkspace(root: string, packages: WorkspacePackage[] = readWorkspace(root)): Violation[] {
  const byName = new Map(packages.map((p) => [p.name, p]));
  const violations: Violation[] = [];
  for (const pkg of packages) {
    violations.push(...peerViolations(pkg, byName));
    const pkgDir = path.join(root, pkg.dir);
    for (const file of sourceFiles(pkgDir)) {
      const relToPkg = path.relative(pkgDir, file);
      const rel = path.relative(root, file).split(path.sep).join('/');
      const inTest = isTestFile(relToPkg);
      for (const { specifier, line } of importsOf(readFileSync(file, 'utf8'))) {
        if (specifier.startsWith('.') || specifier.startsWith('/') || BUILTINS.has(specifier)) {
          if (specifier.startsWith('.')) {
            const target = path.resolve(path.dirname(file), specifier);
            if (!target.startsWith(pkgDir + path.sep) && !isRootConfig(root, target)) {
              violations.push({
                file: rel,
                line,
                specifier,
                rule: 'undeclared',
                message: `reaches outside ${pkg.dir} by a relative path: import the package by its name instead`,
              });
            }
          }
          continue;
        }
        const target = packageOf(specifier);
        const declared = pkg.dependencies.has(target) || target === pkg.name;
        const devDeclared = pkg.devDependencies.has(target);
        if (!declared && !devDeclared) {
          violations.push({ file: rel, line, specifier, rule: 'undeclared', message: `imports ${target}, which ${pkg.name}'s package.json does not declare` });
        } else if (!declared && !inTest) {
          violations.push({
            file: rel,
            line,
            specifier,
            rule: 'dev-only',
            message: `shipped code imports ${target}, which is only a devDependency of ${pkg.name}`,
          });
        }
        const to = byName.get(target);
        if (to) {
          const why = layeringViolation(pkg, to, inTest);
          if (why) violations.push({ file: rel, line, specifier, rule: 'layering', message: why });
        }
      }
    }
  }
  return violations;
}

/** Root-level config shared by every package (vitest.shared.ts, eslint.config.js) may be imported by relative path. */
function isRootConfig(root: string, target: string): boolean {
  return path.dirname(target) === root && /\.(shared|config)\.[cm]?[jt]s$/.test(path.basename(target));
}

/** Formats violations one a line, `file:line  rule  message (import "x")`. */
export function formatViolations(violations: readonly Violation[]): string {
  return violations.map((v) => `${v.file}:${v.line}  ${v.rule}  ${v.message} (import "${v.specifier}")`).join('\n');
}

/** Roles whose packages must be peers of a plugin or of the contract: one copy per installation. */
const SHARED_ROLES: readonly Role[] = ['context', 'pipeline', 'contract'];

/**
 * A runtime plugin (and the contract itself) lists the contract and the layers below it as peer
 * dependencies, never as regular ones: a second copy in an installation would break every
 * `instanceof` check (RuntimeError, Canceled) between the plugin and the worker.
 */
function peerViolations(pkg: WorkspacePackage, byName: ReadonlyMap<string, WorkspacePackage>): Violation[] {
  if (pkg.role !== 'plugin' && pkg.role !== 'contract') return [];
  const found: Violation[] = [];
  for (const name of pkg.regularDependencies ?? []) {
    const to = byName.get(name);
    if (to && SHARED_ROLES.includes(to.role)) {
      found.push({
        file: `${pkg.dir}/package.json`,
        line: 1,
        specifier: name,
        rule: 'peer',
        message: `${pkg.name} lists ${name} in dependencies; a ${pkg.role === 'plugin' ? 'runtime plugin' : 'contract'} takes it as a peerDependency (and a devDependency), so an installation holds one copy`,
      });
    }
  }
  return found;
}
