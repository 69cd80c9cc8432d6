// bin/entry.js: `berth` runs the compiled build only while it is complete and not older than any
// source it was built from; otherwise the TypeScript sources (no build step for contributors).
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { chooseEntry as choose, workspacePackages, writeBuildStamp } from '../bin/entry.js';

let root: string;
let app: string;
let pkg: string;

/** Writes `file` with a modification time `ageSeconds` in the past. */
function write(file: string, text: string, ageSeconds = 60): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
  const t = Date.now() / 1000 - ageSeconds;
  utimesSync(file, t, t);
}

beforeEach(() => {
  // A workspace in miniature: the app depends on one workspace package (linked as pnpm links it)
  // and on a registry package (which is not followed).
  root = mkdtempSync(path.join(tmpdir(), 'berth-entry-'));
  app = path.join(root, 'apps/worker');
  pkg = path.join(root, 'packages/context');
  write(path.join(app, 'package.json'), JSON.stringify({ dependencies: { '@berth/context': 'workspace:^', commander: '^15' } }));
  write(path.join(pkg, 'package.json'), JSON.stringify({ dependencies: {} }));
  write(path.join(app, 'src/main.ts'), 'export {};');
  write(path.join(app, 'src/main.test.ts'), 'export {};');
  write(path.join(pkg, 'src/index.ts'), 'export {};');
  write(path.join(pkg, 'dist/index.js'), 'export {};', 30);
  write(path.join(app, 'dist/bundle/main.js'), 'export {};', 30);
  mkdirSync(path.join(app, 'node_modules/@berth'), { recursive: true });
  symlinkSync('../../../../packages/context', path.join(app, 'node_modules/@berth/context'));
  mkdirSync(path.join(root, 'node_modules/.pnpm/commander/node_modules/commander'), { recursive: true });
  symlinkSync('../../node_modules/.pnpm/commander/node_modules/commander', path.join(app, 'node_modules/commander'));
  writeBuildStamp(app);
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

describe('which code berth runs (bin/entry.js)', () => {
  it('runs the compiled build when it is complete and newer than every source', () => {
    const entry = choose({ appDir: app, inWorkspace: true, env: {} });
    expect(entry.mode).toBe('compiled');
    expect(entry.main).toBe(path.join(app, 'dist/bundle/main.js'));
  });

  it('follows the workspace packages the app depends on, not registry packages', () => {
    expect(workspacePackages(app).sort()).toEqual([app, pkg].sort());
  });

  it("runs the sources when a workspace package's source changed after the build, and names the file", () => {
    write(path.join(pkg, 'src/index.ts'), 'export const changed = 1;', -5);
    const entry = choose({ appDir: app, inWorkspace: true, env: {} });
    expect(entry).toMatchObject({ mode: 'source', main: path.join(app, 'src/main.ts') });
    expect(entry.reason).toContain(path.join('packages/context/src/index.ts'));
  });

  it("runs the sources when the app's own source changed after the build", () => {
    write(path.join(app, 'src/commands/new.ts'), 'export {};', -5);
    expect(choose({ appDir: app, inWorkspace: true, env: {} })).toMatchObject({ mode: 'source' });
  });

  it('ignores changed tests: they are not compiled', () => {
    write(path.join(app, 'src/main.test.ts'), 'export const changed = 1;', -5);
    expect(choose({ appDir: app, inWorkspace: true, env: {} }).mode).toBe('compiled');
  });

  it('runs the sources without a build stamp (no build, or one that did not finish)', () => {
    rmSync(path.join(app, 'dist/.build-stamp'));
    const entry = choose({ appDir: app, inWorkspace: true, env: {} });
    expect(entry.mode).toBe('source');
    expect(entry.reason).toContain('pnpm build');
  });

  it('runs the sources when a workspace package it depends on was not built', () => {
    rmSync(path.join(pkg, 'dist'), { recursive: true });
    const entry = choose({ appDir: app, inWorkspace: true, env: {} });
    expect(entry.mode).toBe('source');
    expect(entry.reason).toContain('context has no dist/');
  });

  it('runs the sources when BERTH_FROM_SOURCE=1, and compiled with BERTH_FROM_SOURCE=0', () => {
    expect(choose({ appDir: app, inWorkspace: true, env: { BERTH_FROM_SOURCE: '1' } }).mode).toBe('source');
    expect(choose({ appDir: app, inWorkspace: true, env: { BERTH_FROM_SOURCE: '0' } }).mode).toBe('compiled');
  });

  it('installed (outside the workspace), runs what was built without comparing sources', () => {
    write(path.join(app, 'src/main.ts'), 'export const changed = 1;', -5);
    expect(choose({ appDir: app, inWorkspace: false, env: {} }).mode).toBe('compiled');
    expect(choose({ appDir: app, inWorkspace: true, env: {} }).mode).toBe('source');
  });
});
