/**
 * Issue #26 items 6–10: where `berth compile`/`berth validate` differed from Vela's own compiler
 * on real pipelines. Each case is a minimal pipeline of our own, judged by the go-vela/server
 * (v0.28.8) code that decides it, cited per test.
 */
import { describe, expect, it } from 'vitest';
import { compilePipeline, emptyBuild, emptyContainer, skipEmptyBuild, type CompileResult } from '../src/index.ts';

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

describe('item 10: a Go template read as YAML', () => {
  // compiler/native/parse.go Parse renders the file with text/template only for pipeline type
  // `go` (ParseGo); read as YAML, `{{ range }}` is a YAML syntax error. Berth names the cause.
  const src = [
    'version: "1"',
    'steps:',
    '{{ range $name := list "a" "b" }}',
    '  - name: {{ $name }}',
    '    image: alpine',
    '    commands: [ls]',
    '{{ end }}',
    '',
  ].join('\n');
  it('says it looks like a Go template and to compile it as one', () => {
    const r = compilePipeline(src, { file: 'p.yml' });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors[0]).toMatchObject({
      line: 3,
      column: 1,
      message: 'the file looks like a Go template ({{ … }}) but was read as plain YAML',
      hint: 'compile it as a Go template: pipeline type go (berth validate/compile/exec --pipeline-type go, as in the Vela CLI)',
    });
  });
  it('compiles with pipeline type go', () => {
    const r = compilePipeline(src, { file: 'p.yml', pipelineType: 'go' });
    expect(errorsOf(r)).toEqual([]);
    expect(stepsOf(r)).toEqual(['init', 'a', 'b']);
  });
  it('a plain YAML error says nothing of templates', () => {
    const r = compilePipeline('version: "1"\nsteps:\n  - name: a\n    image: [unclosed\n', { file: 'p.yml' });
    expect(r.ok).toBe(false);
    expect(JSON.stringify(r)).not.toContain('template');
  });
});

describe('item 8: a step secret not declared under secrets:', () => {
  // go-vela/server compiler/native (validate.go ValidateYAML, ValidatePipeline) never checks a
  // step's secrets against the top-level secrets block; go-vela/worker executor/linux/secret.go
  // injectSecrets skips a secret it has no value for. Berth keeps its check as a warning.
  const src = [
    'version: "1"',
    'secrets:',
    '  - name: docker_password',
    'steps:',
    '  - name: publish',
    '    image: alpine',
    '    secrets: [docker_pasword]',
    '    commands: [ls]',
    '    ruleset:',
    '      event: tag',
    '',
  ].join('\n');
  const warning =
    'p.yml:5:11: step publish uses secret "docker_pasword", which is not declared under secrets: (Vela compiles it, and the step runs without that variable) (did you mean "docker_password"?)';
  it('compiles, with a warning naming the step and the closest declared secret', () => {
    const r = compilePipeline(src, { file: 'p.yml' });
    expect(errorsOf(r)).toEqual([]);
    expect(r.ok && r.build.steps[1]?.secrets).toEqual([{ source: 'docker_pasword', target: 'DOCKER_PASWORD' }]);
    expect(r.warnings).toEqual([warning]);
  });
  it('compiles silently when the ruleset drops the step for the build event', () => {
    const r = compilePipeline(src, { file: 'p.yml', ruleData: { event: 'push', branch: 'main' } });
    expect(errorsOf(r)).toEqual([]);
    expect(stepsOf(r)).toEqual(['init']);
    expect(r.warnings.filter((w) => w.includes('secret'))).toEqual([]);
  });
  it('still warns when the step runs for the build event', () => {
    const r = compilePipeline(src, { file: 'p.yml', ruleData: { event: 'tag', branch: 'main' } });
    expect(errorsOf(r)).toEqual([]);
    expect(r.warnings).toContain(warning);
  });
});

describe('item 7: a pipeline with nothing to run', () => {
  // compiler/native/compile.go compileSteps/compileStages inject init (and clone) BEFORE
  // ValidateYAML, so its "no stages, steps or templates provided" never fires there; the server
  // then skips the build (api/build/compile_publish.go CompileAndPublish: SkipEmptyBuild, status
  // skipped, nothing queued).
  const onlyInit = 'skipping build since only init step found — it is likely no rulesets matched for the webhook payload';
  it.each([
    ['no steps key', 'version: "1"\n'],
    ['steps: []', 'version: "1"\nsteps: []\n'],
    ['steps: ~', 'version: "1"\nsteps:\n'],
    ['stages: {}', 'version: "1"\nstages: {}\n'],
  ])('%s compiles to the init step, with a warning that Vela skips the build', (_, src) => {
    const r = compilePipeline(src, { file: 'p.yml' });
    expect(errorsOf(r)).toEqual([]);
    expect(stepsOf(r)).toEqual(['init']);
    expect(r.ok && r.build.stages).toEqual([]);
    expect(r.warnings.some((w) => w.includes(`nothing to run: ${onlyInit}`))).toBe(true);
  });
  it('with clone, compiles to init and clone', () => {
    const r = compilePipeline('version: "1"\nsteps: []\n', { file: 'p.yml', clone: true });
    expect(stepsOf(r)).toEqual(['init', 'clone']);
    expect(r.ok && skipEmptyBuild(r.build)).toBe(
      'skipping build since only init and clone steps found — it is likely no rulesets matched for the webhook payload',
    );
  });
  it('a stage without steps is purged, leaving the init stage', () => {
    // compiler/types/pipeline/build.go Purge keeps only stages with steps.
    const r = compilePipeline('version: "1"\nstages:\n  build:\n    steps: []\n', { file: 'p.yml' });
    expect(errorsOf(r)).toEqual([]);
    expect(r.ok && r.build.stages.map((s) => s.name)).toEqual(['init']);
    expect(r.ok && skipEmptyBuild(r.build)).toBe('skipping build since only init stage found — it is likely no rulesets matched for the webhook payload');
  });
  it('every step dropped by its ruleset is the same case', () => {
    const src = 'version: "1"\nsteps:\n  - name: a\n    image: alpine\n    commands: [ls]\n    ruleset:\n      event: tag\n';
    const r = compilePipeline(src, { file: 'p.yml', ruleData: { event: 'push', branch: 'main' } });
    expect(stepsOf(r)).toEqual(['init']);
    expect(r.ok && skipEmptyBuild(r.build)).toBe(onlyInit);
  });
  it('a missing version is still refused', () => {
    expect(errorsOf(compilePipeline('steps: []\n', { file: 'p.yml' }))).toEqual(['1:1 no "version:" YAML property provided']);
  });
  it('skipEmptyBuild follows api/build/skip_test.go', () => {
    const steps = (...names: string[]) => ({ ...emptyBuild(), steps: names.map((name) => ({ ...emptyContainer(), name })) });
    const stages = (...names: string[]) => ({
      ...emptyBuild(),
      stages: names.map((name) => ({ name, needs: [], independent: false, environment: {}, steps: [] })),
    });
    expect(skipEmptyBuild(stages('init'))).toBe('skipping build since only init stage found — it is likely no rulesets matched for the webhook payload');
    expect(skipEmptyBuild(stages('init', 'clone'))).toBe(
      'skipping build since only init and clone stages found — it is likely no rulesets matched for the webhook payload',
    );
    expect(skipEmptyBuild(stages('init', 'clone', 'foo'))).toBe('');
    expect(skipEmptyBuild(steps('init'))).toBe(onlyInit);
    expect(skipEmptyBuild(steps('init', 'clone'))).toBe(
      'skipping build since only init and clone steps found — it is likely no rulesets matched for the webhook payload',
    );
    expect(skipEmptyBuild(steps('init', 'clone', 'foo'))).toBe('');
  });
});

describe('item 9: ${VAR} substitution in the step text, as Vela does', () => {
  // compiler/native/compile.go compileSteps: EnvironmentSteps, then SubstituteSteps, then
  // TransformSteps. compiler/native/substitute.go SubstituteSteps: yaml.Marshal(step),
  // envsubst.Eval on that text with the step's environment, yaml.Unmarshal back into the step;
  // an error is "unable to unmarshal configuration after substitution for step <name>: …".
  const step = (...lines: string[]): string => ['version: "1"', 'steps:', '  - name: build', ...lines.map((l) => `    ${l}`), ''].join('\n');
  const refusal = 'unable to unmarshal configuration after substitution for step build: ';

  it('an image tag cut from an empty commit leaves `x:`, which is refused', () => {
    // yaml.v3 writes `image: x:${VELA_BUILD_COMMIT:0:7}` plain; with no commit it reads back `image: x:`.
    const src = step('image: x:${VELA_BUILD_COMMIT:0:7}', 'commands: [ls]');
    const r = compilePipeline(src, { file: 'p.yml' });
    expect(errorsOf(r)).toHaveLength(1);
    expect(errorsOf(r)[0]).toMatch(/^3:11 unable to unmarshal configuration after substitution for step build: "image: x:": /);
    const withCommit = compilePipeline(src, { file: 'p.yml', metadata: { build: { commit: '0123456789abcdef' } } });
    expect(errorsOf(withCommit)).toEqual([]);
    expect(withCommit.ok && withCommit.build.steps[1]?.image).toBe('x:0123456');
  });

  it('a value with ": " turns a plain command into a mapping, which is refused', () => {
    const r = compilePipeline(step('image: alpine', 'environment: { MSG: "a: b" }', 'commands:', '  - echo ${MSG}'), { file: 'p.yml' });
    expect(r.ok).toBe(false);
    expect(r.ok ? [] : r.errors.map((e) => e.message)).toEqual([expect.stringContaining(refusal)]);
  });

  it('a value with " #" in a plain command starts a YAML comment', () => {
    const r = compilePipeline(step('image: alpine', 'environment: { MSG: "x #y" }', 'commands:', '  - echo ${MSG} done'), { file: 'p.yml' });
    expect(errorsOf(r)).toEqual([]);
    expect(r.ok && r.build.steps[1]?.commands).toEqual(['echo x']);
  });

  it("a ' in a value ends the single-quoted string yaml.v3 wrote", () => {
    // `"${MSG}" done` starts with a quote, so yaml.v3 writes it single-quoted.
    const r = compilePipeline(step('image: alpine', `environment: { MSG: "it's" }`, `commands: ['"\${MSG}" done']`), { file: 'p.yml' });
    expect(r.ok ? [] : r.errors.map((e) => e.message)).toEqual([expect.stringContaining(refusal)]);
    const fine = compilePipeline(step('image: alpine', 'environment: { MSG: "ok" }', `commands: ['"\${MSG}" done']`), { file: 'p.yml' });
    expect(fine.ok && fine.build.steps[1]?.commands).toEqual(['"ok" done']);
  });

  it('an image that substitutes to nothing keeps its text (yaml.v3 leaves a string field as it was on null)', () => {
    // go.yaml.in/yaml/v3 decode.go (*decoder).null: a null scalar does not reset a string field.
    const r = compilePipeline(step('image: ${EMPTY}', 'environment: { EMPTY: "" }', 'commands: [ls]'), { file: 'p.yml' });
    expect(errorsOf(r)).toEqual([]);
    expect(r.ok && r.build.steps[1]?.image).toBe('${EMPTY}');
  });

  it('a plugin tag list led by an empty commit leaves PARAMETER_TAGS: ,latest, which is refused', () => {
    // compiler/native/environment.go writes PARAMETER_TAGS = "${VELA_BUILD_COMMIT},latest" before
    // substitution; yaml.v3 writes it plain, and its scanner (scannerc.go) reads a leading `,` as a
    // flow entry, so the text no longer parses. With a commit it compiles.
    const src = step('image: target/vela-docker', 'parameters:', '  tags: [ "${VELA_BUILD_COMMIT}", latest ]');
    const r = compilePipeline(src, { file: 'p.yml' });
    expect(r.ok ? [] : r.errors.map((e) => e.message)).toEqual([expect.stringContaining(`${refusal}"PARAMETER_TAGS: ,latest"`)]);
    const withCommit = compilePipeline(src, { file: 'p.yml', metadata: { build: { commit: 'abc' } } });
    expect(withCommit.ok && withCommit.build.steps[1]?.environment.PARAMETER_TAGS).toBe('abc,latest');
  });

  it('substitutes environment values, literal blocks and rulesets as before', () => {
    const src = step(
      'image: alpine:${TAG}',
      'environment: { TAG: "3.20", GREETING: "hello ${TAG}" }',
      'commands:',
      '  - |',
      '    echo ${TAG}',
      '    echo "$${HOME}"',
      'ruleset:',
      '  branch: [ "release-${TAG}" ]',
    );
    const r = compilePipeline(src, { file: 'p.yml' });
    expect(errorsOf(r)).toEqual([]);
    const s = r.ok ? r.build.steps[1] : undefined;
    expect(s?.image).toBe('alpine:3.20');
    expect(s?.environment.GREETING).toBe('hello 3.20');
    expect(s?.commands).toEqual(['echo 3.20\necho "${HOME}"\n']);
    expect(s?.ruleset.if.branch).toEqual(['release-3.20']);
  });
});
