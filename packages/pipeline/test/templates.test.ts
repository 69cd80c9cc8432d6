/**
 * Step templates as go-vela/server's compiler/native/expand.go ExpandSteps expands them, read
 * through a loader (the worker maps --template-file and type: file to it).
 */
import { describe, expect, it } from 'vitest';
import { compilePipeline, parseTemplateSource, type CompileOptions } from '../src/index.ts';

const tmpl = [
  'metadata:',
  '  template: true',
  'environment:',
  '  FROM_TEMPLATE: yes',
  'steps:',
  '  - name: install',
  '    image: {{ .image }}',
  '    commands: [echo {{ vela "template_name" }} {{ .VELA_TEMPLATE_NAME }}]',
  '  {{ if .test }}',
  '  - name: test',
  '    image: {{ .image }}',
  '    commands: [go test]',
  '  {{ end }}',
  '',
].join('\n');
const pipeline = (vars: string): string =>
  [
    'version: "1"',
    'templates:',
    '  - name: golang',
    '    source: github.com/octo/templates/go.yml',
    '    type: github',
    'steps:',
    '  - name: sample',
    '    template:',
    '      name: golang',
    `      vars: ${vars}`,
    '',
  ].join('\n');
const files: Record<string, string> = {
  'go.yml': tmpl,
  'self.yml': 'version: "1"\ntemplates:\n  - name: self\n    source: self.yml\n    type: file\nsteps:\n  - name: again\n    template:\n      name: self\n',
  'broken.yml': 'steps:\n  - name: a\n    image: {{ foobar }}\n',
};
const load: CompileOptions['templates'] = (t) => {
  const name = t.source.split('/').pop() ?? '';
  const text = files[name];
  return text === undefined
    ? { ok: false, message: `template ${t.name} (${t.source}) is not available`, hint: `pass --template-file ${t.name}:<path>` }
    : { ok: true, file: `templates/${name}`, text };
};

describe('step templates', () => {
  it('expand into prefixed steps with vars, vela functions and the template environment', () => {
    const r = compilePipeline(pipeline('{ image: "golang:1.22", test: true }'), { file: 'p.yml', templates: load });
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.build.steps.map((s) => [s.name, s.image])).toEqual([
      ['init', '#init'],
      ['sample_install', 'golang:1.22'],
      ['sample_test', 'golang:1.22'],
    ]);
    expect(r.build.steps[1]?.commands).toEqual(['echo sample golang']);
    expect(r.build.steps[1]?.environment['FROM_TEMPLATE']).toBe('yes');
  });

  it('honour conditionals on vars', () => {
    const r = compilePipeline(pipeline('{ image: alpine }'), { file: 'p.yml', templates: load });
    expect(r.ok && r.build.steps.map((s) => s.name)).toEqual(['init', 'sample_install']);
  });

  it("are refused with the loader's message at the template declaration", () => {
    const r = compilePipeline(pipeline('{}').replace('go.yml', 'gone.yml'), { file: 'p.yml', templates: load });
    expect(r.ok).toBe(false);
    expect(!r.ok && r.errors[0]).toMatchObject({
      file: 'p.yml',
      line: 3,
      message: 'template golang (github.com/octo/templates/gone.yml) is not available',
      hint: 'pass --template-file golang:<path>',
    });
  });

  it('name the missing template and the --template-file alternative', () => {
    const r = compilePipeline(pipeline('{}').replace('name: golang\n      vars', 'name: other\n      vars'), { file: 'p.yml', templates: load });
    expect(!r.ok && r.errors[0]?.message).toBe('missing template source for template other in pipeline for step sample');
    expect(!r.ok && r.errors[0]?.hint).toContain('--template-file other:<path>');
  });

  it('point render errors into the template file and name the pipeline line that used it', () => {
    const r = compilePipeline(pipeline('{}').replace('go.yml', 'broken.yml'), { file: 'p.yml', templates: load });
    expect(!r.ok && r.errors[0]).toMatchObject({ file: 'templates/broken.yml', line: 3 });
    expect(!r.ok && r.errors[0]?.message).toBe(
      'unable to render template golang: function "foobar" not defined (template golang used by step "sample" at p.yml:9:13)',
    );
  });

  it('stop a template that calls itself at the maximum depth, as Vela does', () => {
    const src = 'version: "1"\ntemplates:\n  - name: self\n    source: self.yml\n    type: file\nsteps:\n  - name: first\n    template:\n      name: self\n';
    const r = compilePipeline(src, { file: 'p.yml', templates: load });
    expect(!r.ok && r.errors.map((e) => e.message)).toEqual([expect.stringContaining('max template depth of 3 exceeded') as string]);
  });

  it('refuse Starlark templates, naming Starlark', () => {
    const r = compilePipeline(pipeline('{}').replace('    type: github', '    type: github\n    format: starlark'), { file: 'p.yml', templates: load });
    expect(!r.ok && r.errors[0]?.message).toContain('Starlark');
  });

  it('are not expanded when the calling step is purged by its ruleset (expand.go purges first)', () => {
    const src =
      pipeline('{}').replace('    template:', '    ruleset:\n      event: tag\n    template:') + '  - name: other\n    image: alpine\n    commands: [ls]\n';
    const r = compilePipeline(src.replace('go.yml', 'gone.yml'), { file: 'p.yml', templates: load, ruleData: { event: 'push' } });
    expect(r.ok && r.build.steps.map((s) => s.name)).toEqual(['init', 'other']);
  });
});

describe('pipeline type go', () => {
  it('renders the file as a Go template before reading it', () => {
    const src =
      'version: "1"\n{{ $images := list "alpine" "busybox" }}\nsteps:\n{{ range $images }}\n  - name: {{ . }}\n    image: {{ . }}\n    commands: [ls]\n{{ end }}\n';
    const r = compilePipeline(src, { file: 'p.yml', pipelineType: 'go' });
    expect(r.ok && r.build.steps.map((s) => s.name)).toEqual(['init', 'alpine', 'busybox']);
  });

  it('refuses Starlark, naming it', () => {
    const r = compilePipeline('version: "1"', { file: 'p.yml', pipelineType: 'starlark' });
    expect(!r.ok && r.errors[0]?.message).toContain('Starlark pipelines are not supported');
  });
});

describe('render_inline (compiler/native/compile.go compileInline)', () => {
  it('renders every declared template as a pipeline, names prefixed with the template name', () => {
    files['inline.yml'] =
      'environment:\n  FROM_INLINE: "1"\nsteps:\n  - name: hello\n    image: {{ default "alpine" .image }}\n    commands: [echo {{ .VELA_TEMPLATE_NAME }}]\n';
    const src =
      'version: "1"\nmetadata:\n  render_inline: true\ntemplates:\n  - name: greet\n    source: inline.yml\n    type: file\n    vars: { image: busybox }\n';
    const r = compilePipeline(src, { file: 'p.yml', templates: load });
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.build.steps.map((s) => [s.name, s.image, s.commands])).toEqual([
      ['init', '#init', []],
      ['greet_hello', 'busybox', ['echo greet']],
    ]);
    expect(r.build.steps[1]?.environment['FROM_INLINE']).toBe('1');
  });

  it('refuses a step template next to render_inline, as ValidateYAML does', () => {
    const src =
      'version: "1"\nmetadata:\n  render_inline: true\ntemplates:\n  - name: greet\n    source: inline.yml\n    type: file\nsteps:\n  - name: s\n    template:\n      name: greet\n';
    const r = compilePipeline(src, { file: 'p.yml', templates: load });
    expect(!r.ok && r.errors.map((e) => e.message)).toContain('step s: cannot combine render_inline and a step that references a template');
  });
});

// go-vela/server compiler/registry/github/parse_test.go (TestGithub_Parse*): host, org, repo, path, @ref.
describe('parseTemplateSource', () => {
  it('splits host, org, repo, path and the ref after @', () => {
    expect(parseTemplateSource('github.example.com/github/octocat/template.yml')).toEqual({
      ok: true,
      source: { host: 'github.example.com', org: 'github', repo: 'octocat', path: 'template.yml', ref: '' },
    });
    expect(parseTemplateSource('github.example.com/github/octocat/template.yml@dev')).toEqual({
      ok: true,
      source: { host: 'github.example.com', org: 'github', repo: 'octocat', path: 'template.yml', ref: 'dev' },
    });
    expect(parseTemplateSource('github.example.com/github/octocat/path/to/template.yml@test')).toEqual({
      ok: true,
      source: { host: 'github.example.com', org: 'github', repo: 'octocat', path: 'path/to/template.yml', ref: 'test' },
    });
    expect(parseTemplateSource('http://127.0.0.1:8080/github/octocat/path/to/template.yml')).toEqual({
      ok: true,
      source: { host: '127.0.0.1:8080', org: 'github', repo: 'octocat', path: 'path/to/template.yml', ref: '' },
    });
  });

  it('refuses a source without org/repo/path', () => {
    expect(parseTemplateSource('github.com/octocat/template.yml')).toEqual({
      ok: false,
      message: 'invalid template source github.com/octocat/template.yml, must contain org/repo/path_to_template',
    });
  });
});
