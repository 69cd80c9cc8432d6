/**
 * The Go text/template subset against go-vela/server's template testdata
 * (compiler/template/native/render_test.go TestNative_Render and TestNative_RenderBuild).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { renderGoTemplate, TemplateError, velaFunctions } from '../src/template/go-template.ts';

const DIR = join(import.meta.dirname, 'fixtures', 'vela', 'server', 'compiler', 'template', 'native', 'testdata');
const read = (p: string): string => readFileSync(join(DIR, p), 'utf8');
const env = { VELA_REPO_FULL_NAME: 'octocat/hello-world' };

/** Vela's Render: the template with the step's vars, then every step prefixed with the step name. */
function renderStep(stepFile: string, tmplFile: string): unknown {
  const step = (parse(read(stepFile)) as { steps: { name: string; template: { vars?: Record<string, unknown> } }[] }).steps[0];
  if (step === undefined) throw new Error('no step');
  const out = renderGoTemplate(read(tmplFile), step.template.vars ?? {}, velaFunctions(env, step.name));
  const doc = parse(out) as { steps: { name: string }[] };
  return doc.steps.map((s) => ({ ...s, name: `${step.name}_${s.name}` }));
}

describe('Vela render_test.go TestNative_Render', () => {
  it.each(['basic', 'multiline', 'conditional', 'loop_map', 'loop_slice', 'with_vars_plat', 'to_yaml'])('%s renders to want.yml', (name) => {
    const want = (parse(read(`step/${name}/want.yml`)) as { steps: unknown[] }).steps;
    expect(renderStep(`step/${name}/step.yml`, `step/${name}/tmpl.yml`)).toEqual(want);
  });

  it.each([
    ['invalid_template.yml', 'function "foobar" not defined'],
    ['invalid_variables.yml', 'no such template "foobar"'],
    ['disallowed/tmpl_env.yml', 'function "env" not defined'],
    ['disallowed/tmpl_expandenv.yml', 'function "expandenv" not defined'],
  ])('%s fails: %s', (file, message) => {
    expect(() => renderStep('step/basic/step.yml', `step/${file}`)).toThrow(message);
  });

  it('puts the template line in the error', () => {
    try {
      renderGoTemplate('a\nb\n{{ foobar }}\n', {});
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(TemplateError);
      expect((error as TemplateError).line).toBe(3);
    }
  });
});

describe('Vela render_test.go TestNative_RenderBuild', () => {
  it.each(['basic', 'basic_stages', 'conditional'])('%s renders to want.yml', (name) => {
    const out = parse(renderGoTemplate(read(`build/${name}/build.yml`), {}, velaFunctions({ VELA_BUILD_BRANCH: 'main' }, ''))) as Record<string, unknown>;
    const want = parse(read(`build/${name}/want.yml`)) as Record<string, unknown>;
    // want.yml holds Vela's compiled defaults (pull, needs); compare the names and commands.
    const shape = (b: Record<string, unknown>): unknown => JSON.stringify(b, (k, v: unknown) => (k === 'pull' || k === 'needs' ? undefined : v));
    expect(shape(out)).toEqual(shape(want));
  });
});

describe('text/template semantics', () => {
  it.each([
    ['{{ if eq .a "x" }}1{{ else if eq .a "y" }}2{{ else }}3{{ end }}', { a: 'y' }, '2'],
    ['{{ if eq .a "x" }}1{{ else if eq .a "y" }}2{{ else }}3{{ end }}', { a: 'z' }, '3'],
    ['{{ range $i, $v := .l }}{{ $i }}={{ $v }};{{ else }}none{{ end }}', { l: ['a', 'b'] }, '0=a;1=b;'],
    ['{{ range .l }}x{{ else }}none{{ end }}', { l: [] }, 'none'],
    ['{{ with .m }}{{ .k }}{{ end }}', { m: { k: 'v' } }, 'v'],
    ['a  {{- " b " -}}  c', {}, 'a b c'],
    ['{{/* comment */}}ok', {}, 'ok'],
    ['{{ .missing }}', {}, '<no value>'],
    ['{{ .a | upper | printf "%s!" }}', { a: 'hi' }, 'HI!'],
    ['{{ $x := 1 }}{{ $x = 2 }}{{ $x }}', {}, '2'],
    ['{{ default "d" .a }} {{ default "d" .b }}', { b: 'b' }, 'd b'],
    ['{{ len (list 1 2 3) }} {{ index (dict "k" "v") "k" }}', {}, '3 v'],
    ['{{ join "," (list "a" "b") }} {{ quote "x" }} {{ trimPrefix "v" "v1" }}', {}, 'a,b "x" 1'],
    ['{{ and .a .b }} {{ or .a .b }} {{ not .a }}', { a: true, b: false }, 'false true false'],
  ])('%s', (src, data, want) => {
    expect(renderGoTemplate(src, data)).toBe(want);
  });
});
