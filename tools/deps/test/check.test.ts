import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { checkWorkspace, importsOf, isTestFile } from '../src/index.ts';

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

interface FakePackage {
  dir: string;
  name: string;
  deps?: string[];
  peers?: string[];
  dev?: string[];
  files: Record<string, string>;
}

function workspace(packages: FakePackage[]): string {
  const root = mkdtempSync(path.join(tmpdir(), 'berth-deps-'));
  roots.push(root);
  for (const p of packages) {
    const dir = path.join(root, p.dir);
    mkdirSync(dir, { recursive: true });
    const toRecord = (names: string[] = []) => Object.fromEntries(names.map((n) => [n, 'workspace:^']));
    writeFileSync(
      path.join(dir, 'package.json'),
      JSON.stringify({ name: p.name, dependencies: toRecord(p.deps), peerDependencies: toRecord(p.peers), devDependencies: toRecord(p.dev) }),
    );
    for (const [file, text] of Object.entries(p.files)) {
      mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      writeFileSync(path.join(dir, file), text);
    }
  }
  return root;
}

const base: FakePackage[] = [
  { dir: 'packages/context', name: '@berth/context', files: { 'src/index.ts': 'export const x = 1;\n' } },
  {
    dir: 'packages/runtime',
    name: '@berth/runtime',
    peers: ['@berth/context'],
    dev: ['@berth/context'],
    files: { 'src/index.ts': "import { x } from '@berth/context';\nexport const y = x;\n" },
  },
];

describe('checkWorkspace', () => {
  it('finds nothing wrong in a workspace that follows the layering', () => {
    expect(checkWorkspace(workspace(base))).toEqual([]);
  });

  it('reports a plugin (such as runtime-host) that lists the contract in dependencies instead of peerDependencies', () => {
    const root = workspace([
      ...base,
      { dir: 'packages/runtime-host', name: '@berth/runtime-host', deps: ['@berth/runtime'], files: { 'src/index.ts': "import '@berth/runtime';\n" } },
      {
        dir: 'packages/runtime-ok',
        name: '@berth/runtime-ok',
        peers: ['@berth/runtime'],
        dev: ['@berth/runtime'],
        files: { 'src/index.ts': "import '@berth/runtime';\n" },
      },
    ]);
    expect(checkWorkspace(root)).toEqual([
      expect.objectContaining({
        file: 'packages/runtime-host/package.json',
        rule: 'peer',
        specifier: '@berth/runtime',
        message: expect.stringContaining('takes it as a peerDependency') as string,
      }),
    ]);
  });

  it('reports a plugin importing another plugin, with file and line', () => {
    const root = workspace([
      ...base,
      {
        dir: 'packages/runtime-a',
        name: '@berth/runtime-a',
        peers: ['@berth/runtime'],
        deps: ['@berth/runtime-b'],
        files: { 'src/index.ts': "import '@berth/runtime';\n\nimport { b } from '@berth/runtime-b';\nexport { b };\n" },
      },
      { dir: 'packages/runtime-b', name: '@berth/runtime-b', files: { 'src/index.ts': 'export const b = 1;\n' } },
    ]);
    expect(checkWorkspace(root)).toEqual([
      expect.objectContaining({
        file: 'packages/runtime-a/src/index.ts',
        line: 3,
        rule: 'layering',
        message: expect.stringContaining('never imports another plugin') as string,
      }),
    ]);
  });

  it('reports the executor importing a plugin in shipped code but allows it in tests', () => {
    const root = workspace([
      ...base,
      { dir: 'packages/runtime-docker', name: '@berth/runtime-docker', files: { 'src/index.ts': 'export const d = 1;\n' } },
      {
        dir: 'packages/executor',
        name: '@berth/executor',
        deps: ['@berth/runtime'],
        dev: ['@berth/runtime-docker'],
        files: {
          'src/index.ts': "export const e = await import('@berth/runtime-docker');\n",
          'src/run.test.ts': "import { d } from '@berth/runtime-docker';\nconsole.log(d);\n",
        },
      },
    ]);
    const found = checkWorkspace(root);
    expect(found.map((v) => [v.file, v.rule])).toEqual([
      ['packages/executor/src/index.ts', 'dev-only'],
      ['packages/executor/src/index.ts', 'layering'],
    ]);
    expect(found[1]?.message).toContain('speaks only to the Runtime contract');
  });

  it('reports anything importing an app', () => {
    const root = workspace([
      ...base,
      { dir: 'apps/worker', name: '@berth/worker', files: { 'src/index.ts': 'export const w = 1;\n' } },
      { dir: 'tools/bench', name: '@berth/bench', deps: ['@berth/worker'], files: { 'src/index.ts': "export * from '@berth/worker';\n" } },
    ]);
    expect(checkWorkspace(root)).toEqual([
      expect.objectContaining({ rule: 'layering', message: expect.stringContaining('nothing may import an app') as string }),
    ]);
  });

  it('reports an import of a package the manifest does not declare, and a relative path out of the package', () => {
    const root = workspace([
      ...base,
      {
        dir: 'packages/pipeline',
        name: '@berth/pipeline',
        files: { 'src/index.ts': "import { parse } from 'yaml';\nimport { x } from '../../context/src/index.ts';\nexport { parse, x };\n" },
      },
    ]);
    expect(checkWorkspace(root).map((v) => [v.line, v.rule])).toEqual([
      [1, 'undeclared'],
      [2, 'undeclared'],
    ]);
  });

  it('reports a lower layer importing a higher one (context importing the contract)', () => {
    const root = workspace([
      {
        dir: 'packages/context',
        name: '@berth/context',
        deps: ['@berth/runtime'],
        files: { 'src/index.ts': "import type { R } from '@berth/runtime';\nexport type X = R;\n" },
      },
      { dir: 'packages/runtime', name: '@berth/runtime', files: { 'src/index.ts': 'export type R = 1;\n' } },
    ]);
    expect(checkWorkspace(root)).toEqual([expect.objectContaining({ rule: 'layering', specifier: '@berth/runtime' })]);
  });
});

describe('importsOf', () => {
  it('sees static, type-only, dynamic and re-export imports and ignores comments and strings', () => {
    const text = [
      "import a from 'a';",
      "import type { B } from 'b';",
      "const c = await import('c');",
      "export * from 'd';",
      "// import nope from 'commented';",
      'const s = "import x from \'in-a-string\'";',
    ].join('\n');
    expect(importsOf(text).map((i) => i.specifier)).toEqual(['a', 'b', 'c', 'd']);
  });
});

describe('isTestFile', () => {
  it.each([
    ['src/index.ts', false],
    ['src/pod/tracker.ts', false],
    ['src/pod/tracker.test.ts', true],
    ['test/e2e.test.ts', true],
    ['vitest.config.ts', true],
    ['bench/logs.ts', true],
  ])('%s → %s', (file, expected) => {
    expect(isTestFile(file)).toBe(expected);
  });
});

describe('the CLI', () => {
  it('exits 1 and names the file on a deliberate violation', () => {
    const root = workspace([
      ...base,
      { dir: 'packages/runtime-a', name: '@berth/runtime-a', deps: ['@berth/runtime-b'], files: { 'src/index.ts': "export * from '@berth/runtime-b';\n" } },
      { dir: 'packages/runtime-b', name: '@berth/runtime-b', files: { 'src/index.ts': 'export const b = 1;\n' } },
    ]);
    let status = 0;
    let stderr = '';
    try {
      execFileSync(process.execPath, [path.join(import.meta.dirname, '../src/cli.ts'), root], { encoding: 'utf8', stdio: 'pipe' });
    } catch (error) {
      status = (error as { status: number }).status;
      stderr = (error as { stderr: string }).stderr;
    }
    expect(status).toBe(1);
    expect(stderr).toContain('packages/runtime-a/src/index.ts:1  layering');
  });
});
