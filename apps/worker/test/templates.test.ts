import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from './run-cli.ts';

// Templates in local runs, as `vela exec`/`vela validate` resolve them (go-vela/cli
// action/pipeline/validate_test.go: --template-file NAME:PATH; type: file next to the pipeline).
const dir = mkdtempSync(path.join(tmpdir(), 'berth-templates-'));
mkdirSync(path.join(dir, 'ci', 'templates'), { recursive: true });
writeFileSync(path.join(dir, 'ci', 'templates', 'go.yml'), 'metadata:\n  template: true\nsteps:\n  - name: test\n    image: {{ .image }}\n    commands: [go test ./...]\n');
writeFileSync(path.join(dir, 'echo.yml'), 'steps:\n  - name: echo\n    image: alpine\n    commands: [echo hi]\n');
const pipeline = path.join(dir, 'ci', 'pipeline.yml');
writeFileSync(
  pipeline,
  'version: "1"\ntemplates:\n  - name: go\n    source: templates/go.yml\n    type: file\n  - name: echo\n    source: github.com/octo/t/echo.yml\n    type: github\nsteps:\n  - name: unit\n    template:\n      name: go\n      vars: { image: "golang:1.22" }\n  - name: say\n    template:\n      name: echo\n',
);

describe('templates in berth validate and compile', () => {
  it('resolve type: file next to the pipeline and --template-file from the working directory', async () => {
    const run = await runCli(['compile', '--template-file', 'echo:echo.yml', pipeline], { cwd: dir });
    expect(run.stderr).toBe('');
    const build = JSON.parse(run.stdout) as { steps: { name: string; image: string }[] };
    expect(build.steps.map((s) => [s.name, s.image])).toEqual([
      ['init', '#init'],
      ['unit_test', 'golang:1.22'],
      ['say_echo', 'alpine'],
    ]);
  });

  it('refuse a remote template without --template-file, naming it, its source and the flag', async () => {
    const run = await runCli(['validate', pipeline], { cwd: dir });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/template echo comes from github\.com\/octo\/t\/echo\.yml \(type github\), which Berth does not fetch in local runs/);
    expect(run.stderr).toMatch(/hint: download it and pass --template-file echo:<path>/);
  });

  it('--pipeline-type go renders the file first; --strict turns unknown keys into errors', async () => {
    const go = path.join(dir, 'go.yml');
    writeFileSync(go, 'version: "1"\nsteps:\n{{ range list "a" "b" }}\n  - name: {{ . }}\n    image: alpine\n    commands: [ls]\n    colour: blue\n{{ end }}\n');
    const loose = await runCli(['validate', '--pipeline-type', 'go', go], { cwd: dir });
    expect(loose.stdout).toContain('is valid: 3 steps');
    expect(loose.stderr).toMatch(/warning: \S*go\.yml:\d+:5: unknown key "colour" in step, ignored/);
    const strict = await runCli(['validate', '--pipeline-type', 'go', '--strict', go], { cwd: dir });
    expect(strict.code).toBe(1);
    expect(strict.stderr).toMatch(/unknown key "colour" in step/);
  });
});

describe('rule data from --event, --branch, --tag (go-vela/cli validate_test.go "pipeline with rulesets")', () => {
  const rules = path.join(dir, 'ruleset.yml');
  writeFileSync(
    rules,
    'version: "1"\nsteps:\n  - name: always\n    image: alpine\n    commands: [echo always]\n  - name: push to main\n    image: alpine\n    ruleset:\n      event: push\n      branch: main\n    commands: [echo main]\n  - name: tag of v1\n    image: alpine\n    ruleset:\n      event: tag\n      tag: v1\n    commands: [echo v1]\n  - name: by eval\n    image: alpine\n    ruleset:\n      eval: VELA_BUILD_EVENT == "tag" && VELA_BUILD_TAG startsWith "v"\n    commands: [echo eval]\n',
  );
  const names = async (...flags: string[]): Promise<string[]> => {
    const run = await runCli(['compile', ...flags, rules], { cwd: dir });
    expect(run.stderr).toBe('');
    return (JSON.parse(run.stdout) as { steps: { name: string }[] }).steps.map((s) => s.name);
  };

  it('keep every step without them', async () => {
    expect(await names()).toEqual(['init', 'always', 'push to main', 'tag of v1', 'by eval']);
  });

  it('drop the steps whose rulesets do not match the build', async () => {
    expect(await names('--event', 'push', '--branch', 'main')).toEqual(['init', 'always', 'push to main']);
    expect(await names('--event', 'tag', '--tag', 'v1')).toEqual(['init', 'always', 'tag of v1', 'by eval']);
  });
});
