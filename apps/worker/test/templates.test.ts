import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from './run-cli.ts';
import { tempDir } from './temp-dir.ts';

// Templates in local runs, as `vela exec`/`vela validate` resolve them (go-vela/cli
// action/pipeline/validate_test.go: --template-file NAME:PATH; type: file next to the pipeline).
const dir = tempDir('berth-templates-');
mkdirSync(path.join(dir, 'ci', 'templates'), { recursive: true });
writeFileSync(
  path.join(dir, 'ci', 'templates', 'go.yml'),
  'metadata:\n  template: true\nsteps:\n  - name: test\n    image: {{ .image }}\n    commands: [go test ./...]\n',
);
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
    writeFileSync(
      go,
      'version: "1"\nsteps:\n{{ range list "a" "b" }}\n  - name: {{ . }}\n    image: alpine\n    commands: [ls]\n    colour: blue\n{{ end }}\n',
    );
    const loose = await runCli(['validate', '--pipeline-type', 'go', go], { cwd: dir });
    expect(loose.stdout).toContain('is valid: 3 steps');
    expect(loose.stderr).toMatch(/warning: \S*go\.yml:\d+:5: unknown key "colour" in step, ignored/);
    const strict = await runCli(['validate', '--pipeline-type', 'go', '--strict', go], { cwd: dir });
    expect(strict.code).toBe(1);
    expect(strict.stderr).toMatch(/unknown key "colour" in step/);
  });
});

// S compiler/native/environment.go environment: VELA_REPO_PIPELINE_TYPE is the repo's pipeline
// type, the one Vela compiled the file with (issue #26 item 3).
describe('VELA_REPO_PIPELINE_TYPE', () => {
  it('names the type given with --pipeline-type', async () => {
    const go = path.join(dir, 'type.yml');
    writeFileSync(go, 'version: "1"\nsteps:\n{{ range list "a" }}\n  - name: {{ . }}\n    image: alpine\n    commands: [ls]\n{{ end }}\n');
    const run = await runCli(['compile', '--pipeline-type', 'go', go], { cwd: dir });
    expect(run.stderr).toBe('');
    const steps = (JSON.parse(run.stdout) as { steps: { name: string; environment: Record<string, string> }[] }).steps;
    expect(steps.find((s) => s.name === 'a')?.environment['VELA_REPO_PIPELINE_TYPE']).toBe('go');
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

// Remote templates, fetched as go-vela/server compiler/registry/github/template.go `Template` does
// (go-github GetContents: GET <api>/repos/{org}/{repo}/contents/{path}?ref=<ref after @>), from a
// GitHub Enterprise URL (compiler/registry/github/github.go `New`: API at <url>/api/v3) with the
// token go-vela/cli takes from --github-token / VELA_COMPILER_GITHUB_TOKEN.
describe('remote templates with --github-token and --github-url', () => {
  const requests: { url: string; headers: IncomingHttpHeaders }[] = [];
  const TOKEN = 'secret-t';
  // Served raw (Accept: application/vnd.github.raw) or as the JSON contents object with base64 content.
  const raw: Record<string, string> = {
    '/api/v3/repos/octo/t/contents/echo.yml?ref=v1':
      'metadata:\n  template: true\ntemplates:\n  - name: inner\n    source: github.com/octo/t/nested/inner.yml\n    type: github\nsteps:\n  - name: echo\n    image: {{ .image }}\n    commands: [echo hi]\n  - name: deeper\n    template:\n      name: inner\n',
    '/api/v3/repos/octo/t/contents/loop.yml':
      'templates:\n  - name: loop\n    source: github.com/octo/t/loop.yml\n    type: github\nsteps:\n  - name: again\n    template:\n      name: loop\n',
  };
  const base64: Record<string, string> = {
    '/api/v3/repos/octo/t/contents/nested/inner.yml': 'steps:\n  - name: inner\n    image: busybox\n    commands: [true]\n',
  };
  const server = createServer((req, res) => {
    requests.push({ url: req.url ?? '', headers: req.headers });
    const json = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify(body));
    };
    if (req.headers.authorization !== `token ${TOKEN}`) return json(401, { message: 'Bad credentials' });
    const url = req.url ?? '';
    const text = raw[url];
    if (text !== undefined) {
      res.writeHead(200, { 'content-type': 'application/vnd.github.raw; charset=utf-8' });
      res.end(text);
      return;
    }
    const b64 = base64[url];
    if (b64 !== undefined) return json(200, { type: 'file', encoding: 'base64', content: Buffer.from(b64).toString('base64') });
    json(404, { message: 'Not Found' });
  });
  let ghe = '';
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    ghe = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const remote = (source: string): string => {
    const file = path.join(dir, `remote-${requests.length}-${Math.random().toString(36).slice(2)}.yml`);
    writeFileSync(
      file,
      `version: "1"\ntemplates:\n  - name: echo\n    source: ${source}\n    type: github\nsteps:\n  - name: say\n    template:\n      name: echo\n      vars: { image: alpine }\n`,
    );
    return file;
  };

  it('fetch the template at its @ref and the remote templates it uses, sending the token', async () => {
    requests.length = 0;
    const run = await runCli(['compile', '--github-token', TOKEN, '--github-url', ghe, remote('github.com/octo/t/echo.yml@v1')], { cwd: dir });
    expect(run.stderr).toBe('');
    const build = JSON.parse(run.stdout) as { steps: { name: string; image: string }[] };
    expect(build.steps.map((s) => [s.name, s.image])).toEqual([
      ['init', '#init'],
      ['say_echo', 'alpine'],
      ['say_deeper_inner', 'busybox'],
    ]);
    expect(requests.map((r) => r.url)).toEqual(['/api/v3/repos/octo/t/contents/echo.yml?ref=v1', '/api/v3/repos/octo/t/contents/nested/inner.yml']);
    expect(requests.every((r) => r.headers.authorization === `token ${TOKEN}` && r.headers.accept === 'application/vnd.github.raw')).toBe(true);
  });

  it('take the token and URL from VELA_COMPILER_GITHUB_TOKEN and VELA_COMPILER_GITHUB_URL (go-vela/cli command/pipeline/validate.go)', async () => {
    const run = await runCli(['validate', remote('github.com/octo/t/echo.yml@v1')], {
      cwd: dir,
      env: { VELA_COMPILER_GITHUB_TOKEN: TOKEN, VELA_COMPILER_GITHUB_URL: ghe },
    });
    expect(run.stderr).toBe('');
    expect(run.stdout).toContain('is valid: 3 steps');
  });

  it('a 404 names the template, its source and the status', async () => {
    const run = await runCli(['validate', '--github-token', TOKEN, '--github-url', ghe, remote('github.com/octo/t/missing.yml@v2')], { cwd: dir });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /:3:5: no Vela template found at octo\/t\/missing\.yml@v2 for template echo \(github\.com\/octo\/t\/missing\.yml@v2\): GitHub at http:\/\/127\.0\.0\.1:\d+\/api\/v3 answered 404 Not Found/,
    );
    expect(run.stderr).toMatch(/hint: check the org, repo, path and @ref/);
  });

  it('a 401 says the token was refused', async () => {
    const run = await runCli(['validate', '--github-token', 'wrong', '--github-url', ghe, remote('github.com/octo/t/echo.yml@v1')], { cwd: dir });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /GitHub at http:\/\/127\.0\.0\.1:\d+\/api\/v3 refused the token \(401 Unauthorized: Bad credentials\) fetching template echo \(github\.com\/octo\/t\/echo\.yml@v1\)/,
    );
    expect(run.stderr).toMatch(/hint: check --github-token/);
  });

  it('a remote template that calls itself stops at the template depth, fetched once', async () => {
    requests.length = 0;
    const run = await runCli(['validate', '--github-token', TOKEN, '--github-url', ghe, remote('github.com/octo/t/loop.yml')], { cwd: dir });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/max template depth of 3 exceeded/);
    expect(requests.map((r) => r.url)).toEqual(['/api/v3/repos/octo/t/contents/loop.yml']);
  });

  it('a server that cannot be reached is a clear error, not a crash', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const run = await runCli(['validate', '--github-token', TOKEN, '--github-url', `http://127.0.0.1:${port}`, remote('github.com/octo/t/echo.yml@v1')], {
      cwd: dir,
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`cannot fetch template echo (github.com/octo/t/echo.yml@v1) from http://127.0.0.1:${port}/api/v3: ECONNREFUSED`);
  });
});

// Vela's own remote-template testdata (vendored in @berth/pipeline's fixtures, see its MANIFEST.json)
// served through the contents API the way compiler/native/compile_test.go's mock GitHub serves it
// (convertFileToGithubResponse: testdata/<basename of the source>, base64 JSON), compiled by
// `berth compile --github-token --github-url`: each must compile or error as Vela's tests expect.
describe('Vela testdata with remote templates, fetched from a local contents API', () => {
  const testdata = path.resolve(import.meta.dirname, '../../../packages/pipeline/test/fixtures/vela/server/compiler/native/testdata');
  const manifest = JSON.parse(readFileSync(path.resolve(testdata, '../../../../MANIFEST.json'), 'utf8')) as {
    files: Record<string, { expect: string; containers?: string[] }>;
  };
  const fetched: string[] = [];
  const server = createServer((req, res) => {
    const name = decodeURIComponent((req.url ?? '').split('?')[0]?.split('/').pop() ?? '');
    fetched.push(name);
    let text: string;
    try {
      text = readFileSync(path.join(testdata, name), 'utf8');
    } catch {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"message":"Not Found"}');
      return;
    }
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ type: 'file', encoding: 'base64', content: Buffer.from(text).toString('base64') }));
  });
  let ghe = '';
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    ghe = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  for (const file of [
    'steps_pipeline_template.yml',
    'stages_pipeline_template.yml',
    'template_calls_template.yml',
    'template_calls_itself.yml',
    'template_name.yml',
  ]) {
    it(file, async () => {
      const entry = manifest.files[`server/compiler/native/testdata/${file}`];
      if (entry === undefined) throw new Error(`${file} is not in the MANIFEST`);
      fetched.length = 0;
      // `--event ''`: rule data as Vela's tests give it (an empty RuleData purges steps with rulesets).
      const run = await runCli(['compile', '--event', '', '--github-token', 't', '--github-url', ghe, path.join(testdata, file)], { cwd: dir });
      expect(fetched.length).toBeGreaterThan(0);
      if (entry.expect === 'errors') {
        expect(run.code).toBe(1);
        if (file === 'template_calls_itself.yml') expect(run.stderr).toMatch(/max template depth of 3 exceeded/);
        return;
      }
      expect(run.stderr.replace(/^warning: .*\n/gm, '')).toBe('');
      const build = JSON.parse(run.stdout) as { steps?: { name: string }[]; stages?: { name: string; steps: { name: string }[] }[] };
      const stages = build.stages ?? [];
      const names = stages.length > 0 ? stages.flatMap((s) => s.steps.map((c) => `${s.name}:${c.name}`)) : (build.steps ?? []).map((c) => c.name);
      // Vela's tests compile with the clone step; a local `berth compile` has none.
      if (entry.containers !== undefined) expect(names).toEqual(entry.containers.filter((n) => n !== 'clone' && n !== 'clone:clone'));
      else expect(names.length).toBeGreaterThan(0);
    });
  }
});
