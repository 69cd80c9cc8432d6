/**
 * The divergences from Vela listed in issue #16, each judged by the go-vela/server code that
 * decides it (cited per test).
 */
import { describe, expect, it } from 'vitest';
import { compilePipeline, type CompileResult } from '../src/index.ts';

const errorsOf = (r: CompileResult): string[] => (r.ok ? [] : r.errors.map((e) => `${e.line}:${e.column} ${e.message}`));

describe('a user step named clone', () => {
  // compiler/native/validate.go validateYAMLSteps and validatePipelineContainers skip the name
  // `clone`; compiler/native/compile.go compileSteps injects no clone when metadata.clone is false.
  const src = [
    'version: "1"',
    'metadata:',
    '  clone: false',
    'steps:',
    '  - name: clone',
    '    image: target/vela-git-slim:v0.12.0',
    '    parameters: { depth: 5 }',
    '  - name: foo',
    '    image: alpine',
    '    commands: [ls]',
    '',
  ].join('\n');

  it('replaces the built-in clone when metadata.clone is false', () => {
    for (const clone of [true, false]) {
      const r = compilePipeline(src, { file: 'p.yml', clone });
      expect(errorsOf(r)).toEqual([]);
      expect(r.ok && r.build.steps.map((s) => [s.name, s.image])).toEqual([
        ['init', '#init'],
        ['clone', 'target/vela-git-slim:v0.12.0'],
        ['foo', 'alpine'],
      ]);
    }
  });

  it('is still refused while the built-in clone step exists', () => {
    const r = compilePipeline(src.replace('  clone: false', '  clone: true'), { file: 'p.yml', clone: true });
    expect(errorsOf(r)).toEqual(['5:11 step name "clone" is reserved for Vela\'s clone step']);
  });
});

describe('unknown keys', () => {
  // Vela ignores unknown keys (go.yaml.in/yaml/v3 decoding into structs); Berth warns, and
  // names the closest known key.
  const src = [
    'version: "1"',
    'stpes-extra: 1',
    'metadata:',
    '  os: linux',
    'steps:',
    '  - name: a',
    '    image: alpine',
    '    comands: [ls]',
    '    commands: [ls]',
    '    ruleset:',
    '      brnch: main',
    '',
  ].join('\n');

  it('are warnings naming the key, where it is, and the closest known key', () => {
    const r = compilePipeline(src, { file: 'p.yml' });
    expect(errorsOf(r)).toEqual([]);
    expect(r.ok && r.warnings).toEqual([
      'p.yml:2:1: unknown key "stpes-extra" in pipeline, ignored (known keys: version, metadata, environment, worker, secrets, services, stages, steps, templates, deployment, git)',
      'p.yml:4:3: unknown key "os" in metadata, ignored (known keys: template, clone, environment, auto_cancel, render_inline)',
      'p.yml:8:5: unknown key "comands" in step, ignored (did you mean "commands"?)',
      'p.yml:11:7: unknown key "brnch" in ruleset, ignored (did you mean "branch"?)',
    ]);
  });

  it('are errors with strict', () => {
    const r = compilePipeline(src, { file: 'p.yml', strict: true });
    expect(errorsOf(r)).toEqual([
      '2:1 unknown key "stpes-extra" in pipeline',
      '4:3 unknown key "os" in metadata',
      '8:5 unknown key "comands" in step',
      '11:7 unknown key "brnch" in ruleset',
    ]);
  });

  it('are silent for top-level keys that hold an anchor (even with strict)', () => {
    const parked = 'version: "1"\nstep-anchor: &img\n  image: alpine\nsteps:\n  - name: a\n    <<: *img\n    commands: [ls]\n';
    for (const strict of [false, true]) {
      const r = compilePipeline(parked, { file: 'p.yml', strict });
      expect(errorsOf(r)).toEqual([]);
      expect(r.ok && r.warnings).toEqual([]);
    }
  });

  it('warn once per duplicate merge key, as Vela does (internal/yaml.go collapseMergeAnchors)', () => {
    const dup = 'version: "1"\naliases:\n  a: &a { image: alpine }\n  b: &b { commands: [ls] }\nsteps:\n  - name: a\n    <<: *a\n    <<: *b\n';
    const r = compilePipeline(dup, { file: 'p.yml' });
    expect(errorsOf(r)).toEqual([]);
    expect(r.ok && r.warnings).toEqual(['p.yml:8:5: duplicate << keys in single YAML map']);
    expect(r.ok && r.build.steps[1]).toMatchObject({ image: 'alpine', commands: ['ls'] });
  });
});

describe('container ids colliding after name joining', () => {
  // compiler/native/validate.go validatePipelineContainers keys names by stage + "_" + step.
  const src = [
    'version: "1"',
    'stages:',
    '  three_word_key:',
    '    steps:',
    '      - name: build',
    '        image: alpine',
    '        commands: [ls]',
    '  three:',
    '    steps:',
    '      - name: word_key_build',
    '        image: alpine',
    '        commands: [ls]',
    '',
  ].join('\n');

  it('are refused at compile time, naming both steps', () => {
    const r = compilePipeline(src, { file: 'p.yml' });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toMatchObject({ line: 10, column: 15 });
    expect(r.errors[0]?.message).toBe(
      'step "word_key_build" of stage "three" and step "build" of stage "three_word_key" (line 5) get the same container id localOrg_localRepo_1_three_word_key_build',
    );
    expect(r.errors[0]?.hint).toBe('rename one of them');
  });
});

describe('duplicate step names and rulesets', () => {
  // compiler/native/compile.go: TransformSteps purges by the build's rule data before
  // ValidatePipeline checks names (steps_name_conflict_purged.yml compiles in Vela).
  const src = [
    'version: "1"',
    'steps:',
    '  - name: build',
    '    image: alpine',
    '    commands: [ls]',
    '  - name: build',
    '    image: alpine',
    '    ruleset:',
    '      event: pull_request',
    '    commands: [ls]',
    '',
  ].join('\n');

  it('compile when a ruleset purges one of them for the build event', () => {
    const r = compilePipeline(src, { file: 'p.yml', ruleData: { event: 'push' } });
    expect(errorsOf(r)).toEqual([]);
    expect(r.ok && r.build.steps.map((s) => s.name)).toEqual(['init', 'build']);
  });

  it('are an error when both survive the purge', () => {
    const r = compilePipeline(src, { file: 'p.yml', ruleData: { event: 'pull_request:opened' } });
    expect(errorsOf(r)).toEqual(['6:11 step `build` is already defined']);
  });

  it('are a warning without rule data when a ruleset may separate them', () => {
    const r = compilePipeline(src, { file: 'p.yml' });
    expect(errorsOf(r)).toEqual([]);
    expect(r.ok && r.warnings).toEqual([
      'p.yml:6:11: step `build` is defined twice, which works only if rulesets drop one of them for each build (check with an event, e.g. --event push)',
    ]);
  });

  it('are an error without rule data when neither has a ruleset', () => {
    const r = compilePipeline(src.replace('    ruleset:\n      event: pull_request\n', ''), { file: 'p.yml' });
    expect(errorsOf(r)).toEqual(['6:11 step `build` is already defined']);
  });
});

describe('environment as one KEY=VALUE string', () => {
  // compiler/types/raw/map.go StringSliceMap.UnmarshalYAML tries a StringSlice first, which
  // accepts a single string.
  it('is a one-entry map', () => {
    const src = 'version: "1"\nenvironment: GLOBAL=1\nsteps:\n  - name: a\n    image: alpine\n    environment: FOO=bar=baz\n    commands: [ls]\n';
    const r = compilePipeline(src, { file: 'p.yml' });
    expect(errorsOf(r)).toEqual([]);
    expect(r.ok && r.build.steps[1]?.environment).toMatchObject({ FOO: 'bar=baz', GLOBAL: '1' });
  });

  it('without = is refused as Vela does', () => {
    const src = 'version: "1"\nsteps:\n  - name: a\n    image: alpine\n    environment: FOO\n    commands: [ls]\n';
    expect(errorsOf(compilePipeline(src, { file: 'p.yml' }))).toEqual(['5:18 environment entry "FOO" is not KEY=VALUE']);
  });
});
