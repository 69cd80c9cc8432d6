/**
 * Issue #26 items 6–10: where `berth compile`/`berth validate` differed from Vela's own compiler
 * on real pipelines. Each case is a minimal pipeline of our own, judged by the go-vela/server
 * (v0.28.8) code that decides it, cited per test.
 */
import { describe, expect, it } from 'vitest';
import { compilePipeline, type CompileResult } from '../src/index.ts';

const errorsOf = (r: CompileResult): string[] => (r.ok ? [] : r.errors.map((e) => `${e.line}:${e.column} ${e.message}`));
const stepsOf = (r: CompileResult): string[] => (r.ok ? r.build.steps.map((s) => s.name) : []);

describe('item 6: the version', () => {
  // compiler/native/validate.go ValidateYAML only checks `len(p.Version) == 0`; internal/yaml.go
  // ParseYAML refuses only "legacy". Any other non-empty version compiles.
  const step = ['steps:', '  - name: a', '    image: alpine', '    commands: [ls]', ''];
  it.each(['"1.0"', '"2"', '1', 'v1'])('version: %s compiles, and the build keeps it', (version) => {
    const r = compilePipeline([`version: ${version}`, ...step].join('\n'), { file: 'p.yml' });
    expect(errorsOf(r)).toEqual([]);
    expect(r.ok && r.build.version).toBe(version.replaceAll('"', ''));
  });
  it("an empty version is still refused with Vela's message", () => {
    const r = compilePipeline(['version: ""', ...step].join('\n'), { file: 'p.yml' });
    expect(errorsOf(r)).toEqual(['1:1 no "version:" YAML property provided']);
  });
  it('"legacy" is still refused with Vela\'s message', () => {
    const r = compilePipeline(['version: legacy', ...step].join('\n'), { file: 'p.yml' });
    expect(errorsOf(r)).toEqual(["1:10 version 'legacy' is no longer supported, please update your pipeline to use version '1'"]);
  });
});
