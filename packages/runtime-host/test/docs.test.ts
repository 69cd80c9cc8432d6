// The TypeScript code blocks of docs/writing-a-runtime.md compile: each block is type-checked as
// the file its first line names (`// src/index.ts of …`, `// test/conformance.test.ts`), else as a
// file of its own, in a folder of this package (so @berth/runtime, @berth/runtime-host and
// @berth/runtime-conformance resolve as in a plugin's project), with this package's tsconfig.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const PACKAGE = path.resolve(import.meta.dirname, '..');
const GUIDE = path.resolve(PACKAGE, '../../docs/writing-a-runtime.md');
const ROOT = path.join(PACKAGE, 'test', 'doc-example');

/** The ```ts blocks of a markdown text, each with the file it is checked as. */
function tsBlocks(markdown: string): { file: string; code: string }[] {
  const blocks = [...markdown.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? '');
  return blocks.map((code, index) => {
    const named = /^\/\/ ((?:src|test)\/[\w./-]+\.ts)\b/.exec(code)?.[1];
    return { file: path.join(ROOT, named ?? `block-${index + 1}.ts`), code };
  });
}

/** The diagnostics of type-checking `blocks` as files, formatted; empty when they compile. */
function typecheck(blocks: { file: string; code: string }[]): string[] {
  const config = ts.getParsedCommandLineOfConfigFile(
    path.join(PACKAGE, 'tsconfig.json'),
    {},
    { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined },
  );
  if (!config) throw new Error('cannot read tsconfig.json');
  const files = new Map(blocks.map((b) => [b.file, b.code]));
  const host = ts.createCompilerHost(config.options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, language, onError, create) => {
    const code = files.get(path.resolve(name));
    return code === undefined ? getSourceFile(name, language, onError, create) : ts.createSourceFile(name, code, language);
  };
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => files.has(path.resolve(name)) || fileExists(name);
  const dirs = new Set([...files.keys()].flatMap((f) => [path.dirname(f), path.dirname(path.dirname(f))]));
  const directoryExists = host.directoryExists?.bind(host);
  host.directoryExists = (name) => dirs.has(path.resolve(name)) || (directoryExists?.(name) ?? ts.sys.directoryExists(name));
  const readFile = host.readFile.bind(host);
  host.readFile = (name) => files.get(path.resolve(name)) ?? readFile(name);
  const program = ts.createProgram({ rootNames: [...files.keys()], options: { ...config.options, noEmit: true }, host });
  return ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file === undefined || files.has(path.resolve(d.file.fileName)))
    .map((d) => {
      const where =
        d.file && d.start !== undefined ? `${path.relative(ROOT, d.file.fileName)}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: ` : '';
      return `${where}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    });
}

describe('docs/writing-a-runtime.md', () => {
  const blocks = tsBlocks(readFileSync(GUIDE, 'utf8'));

  it('has the plugin, its conformance test and more as TypeScript blocks', () => {
    expect(blocks.map((b) => path.relative(ROOT, b.file))).toEqual(expect.arrayContaining(['src/index.ts', 'test/conformance.test.ts']));
  });

  it('its TypeScript code blocks compile (and the check catches one that does not)', () => {
    // One program (a type-check takes seconds): the guide's blocks and a deliberately broken one.
    const broken = { file: path.join(ROOT, 'broken.ts'), code: "import { defineRuntime } from '@berth/runtime';\ndefineRuntime({ name: 'x' });\n" };
    const problems = typecheck([...blocks, broken]);
    expect(problems.filter((p) => !p.startsWith('broken.ts:'))).toEqual([]);
    expect(problems.join('\n')).toMatch(/^broken\.ts:2: Argument of type '\{ name: string; \}' is not assignable to parameter of type 'RuntimeDescriptor'/m);
  }, 120_000);
});
