import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compilePipeline, marshalBuild, parseBuild, velaEnvironment } from '../src/index.ts';
import { compileFixture, fixtureForm, FIXTURES, FIXTURE_METADATA } from './fixtures.ts';

const names = (dir: string): string[] =>
  readdirSync(join(FIXTURES, dir))
    .filter((f) => f.endsWith('.yml'))
    .map((f) => f.slice(0, -4))
    .sort();

describe('valid fixtures', () => {
  const valid = names('valid');
  it('has at least 20', () => {
    expect(valid.length).toBeGreaterThanOrEqual(20);
  });
  it.each(valid)('%s compiles to its expected form', (name) => {
    const result = compileFixture('valid', name);
    if (!result.ok) throw new Error(JSON.stringify(result.errors, null, 2));
    const expected: unknown = JSON.parse(readFileSync(join(FIXTURES, 'valid', `${name}.json`), 'utf8'));
    expect(fixtureForm(result.build)).toEqual(expected);
    // The marshalled form parses back to the same build (zero values refilled).
    const back = parseBuild(JSON.parse(JSON.stringify(marshalBuild(result.build))), { strict: true });
    if (!back.ok) throw new Error(JSON.stringify(back.issues));
    expect(back.value).toEqual(result.build);
  });
});

describe('invalid fixtures', () => {
  const invalid = names('invalid');
  it('has at least 20', () => {
    expect(invalid.length).toBeGreaterThanOrEqual(20);
  });
  it.each(invalid)('%s is refused with its expected error', (name) => {
    const expected = JSON.parse(readFileSync(join(FIXTURES, 'invalid', `${name}.expect.json`), 'utf8')) as {
      message: string;
      line: number | null;
      column: number | null;
    };
    const result = compileFixture('invalid', name);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const hit = result.errors.find((e) => e.message.includes(expected.message));
    expect(hit, JSON.stringify(result.errors)).toBeDefined();
    expect(hit?.file).toBe(`${name}.yml`);
    if (expected.line !== null) expect({ line: hit?.line, column: hit?.column }).toEqual({ line: expected.line, column: expected.column });
  });
});

describe('compilePipeline', () => {
  const simple = 'version: "1"\nsteps:\n  - name: a\n    image: alpine\n    commands: [ls]\n';

  it('refuses starlark files', () => {
    const result = compilePipeline('def main(ctx): return {}', { file: '.vela.star' });
    expect(result).toMatchObject({ ok: false, errors: [{ file: '.vela.star', line: 1, column: 1, message: expect.stringContaining('Starlark') as string }] });
  });

  it('gives every step the full VELA_* environment under its own variables', () => {
    const result = compilePipeline(simple, { file: 'p.yml', metadata: FIXTURE_METADATA });
    if (!result.ok) throw new Error('compile failed');
    const step = result.build.steps[1];
    expect(step?.environment).toEqual(velaEnvironment(FIXTURE_METADATA));
    expect(step?.environment['VELA_BUILD_NUMBER']).toBe('7');
    expect(step?.environment['CI']).toBe('true');
  });

  it('does not let a pipeline override VELA_* values', () => {
    const src = 'version: "1"\nsteps:\n  - name: a\n    image: alpine\n    environment: { VELA_BUILD_BRANCH: hacked, OWN: x }\n    commands: [ls]\n';
    const result = compilePipeline(src, { file: 'p.yml', metadata: FIXTURE_METADATA });
    if (!result.ok) throw new Error('compile failed');
    expect(result.build.steps[1]?.environment).toMatchObject({ VELA_BUILD_BRANCH: 'main', OWN: 'x' });
  });

  it('lays options.environment over non-detached steps only', () => {
    const src = 'version: "1"\nsteps:\n  - name: a\n    image: alpine\n    commands: [ls]\n  - name: bg\n    image: redis\n    detach: true\n';
    const result = compilePipeline(src, { file: 'p.yml', environment: { LOCAL: '1', CI: 'local' } });
    if (!result.ok) throw new Error('compile failed');
    expect(result.build.steps[1]?.environment).toMatchObject({ LOCAL: '1', CI: 'local' });
    expect(result.build.steps[2]?.environment['LOCAL']).toBeUndefined();
  });

  it('leaves secret values empty without the secrets option, and requires them with it', () => {
    const src = 'version: "1"\nsecrets:\n  - name: token\nsteps:\n  - name: a\n    image: alpine\n    secrets: [token]\n';
    const loose = compilePipeline(src, { file: 'p.yml' });
    expect(loose.ok && loose.build.secrets[0]?.value).toBe('');
    const strict = compilePipeline(src, { file: 'p.yml', secrets: {} });
    expect(strict).toMatchObject({ ok: false, errors: [{ line: 3, column: 11, message: 'no value supplied for secret "token"' }] });
    const given = compilePipeline(src, { file: 'p.yml', secrets: { token: 's3cret' } });
    expect(given.ok && given.build.secrets[0]?.value).toBe('s3cret');
  });

  it('uses local ids by default and the identity when given', () => {
    const local = compilePipeline(simple, { file: 'p.yml' });
    expect(local.ok && local.build.id).toBe('localOrg_localRepo_1');
    expect(local.ok && local.build.steps[1]?.id).toBe('step_localOrg_localRepo_1_a');
    const named = compilePipeline(simple, { file: 'p.yml', identity: { org: 'o', repo: 'r', number: 3 } });
    expect(named.ok && named.build.steps[1]?.id).toBe('step_o_r_3_a');
  });

  it('reports every error, sorted by position', () => {
    const src = 'version: "1"\nsteps:\n  - name: a\n    image: Bad\n    commands: [ls]\n  - name: b\n    imag: alpine\n    commands: [ls]\n';
    const result = compilePipeline(src, { file: 'p.yml', strict: true });
    if (result.ok) throw new Error('expected errors');
    expect(result.errors.map((e) => [e.line, e.message.slice(0, 20)])).toEqual([
      [4, 'invalid image "Bad" '],
      [6, 'no image provided fo'],
      [7, 'unknown key "imag" i'],
    ]);
    expect(result.errors[2]?.hint).toBe('did you mean "image"?');
  });

  // Outputs: `${KEY}` is filled at run time (go-vela/worker executor/linux/build.go ExecBuild); Vela's
  // compiler only requires an image (go-vela/server compiler/native/validate.go Validate).
  it('accepts an image with ${KEY} left for run time and still checks the rest of it', () => {
    const pipeline = (image: string) => `version: "1"\nsteps:\n  - name: a\n    image: ${JSON.stringify(image)}\n    commands: [ls]\n`;
    const ok = compilePipeline(pipeline('my-org/${image}:latest'), { file: 'p.yml', strict: true });
    expect(ok.ok && ok.build.steps[1]?.image).toBe('my-org/${image}:latest');
    expect(compilePipeline(pipeline('berth/busybox:${TAG}'), { file: 'p.yml', strict: true }).ok).toBe(true);
    for (const bad of ['org/Team-${image}:latest', 'my-org/${image}::latest', 'UPPER::bad']) {
      const result = compilePipeline(pipeline(bad), { file: 'p.yml', strict: true });
      if (result.ok) throw new Error(`expected ${bad} to fail`);
      expect(result.errors[0]?.message).toContain(`invalid image "${bad}"`);
    }
  });

  it('keeps the compiled script inputs raw (the worker scripts them)', () => {
    const result = compilePipeline(simple, { file: 'p.yml' });
    expect(result.ok && result.build.steps[1]?.commands).toEqual(['ls']);
    expect(result.ok && result.build.steps[1]?.entrypoint).toEqual([]);
  });
});
