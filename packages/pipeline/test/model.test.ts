import { describe, expect, it } from 'vitest';
import { emptyBuild, emptyContainer, marshalBuild, parseBuild, parseContainer, validateBuild } from '../src/index.ts';
import { parseRuleset } from '../src/model.ts';

// A compiled pipeline as a Vela server sends it (omitempty JSON).
const VELA_JSON = {
  id: 'octo_hello_1',
  version: '1',
  metadata: { clone: true, environment: ['steps', 'services', 'secrets'], auto_cancel: {} },
  git: null,
  worker: {},
  deployment: {},
  secrets: [{ name: 'token', key: 'token', engine: 'native', type: 'repo', origin: { ruleset: { if: {}, unless: {} }, artifacts: {} }, pull: 'build_start' }],
  stages: [
    {
      name: 'build',
      needs: ['clone'],
      environment: { CI: 'true' },
      steps: [
        {
          id: 'octo_hello_1_build_test',
          commands: ['go test'],
          directory: '/vela/src/github.com/octo/hello',
          environment: { CI: 'true' },
          image: 'golang:1.22',
          name: 'test',
          number: 3,
          pull: 'not_present',
          ruleset: { if: { branch: ['main'], operator: 'and', matcher: 'filepath' }, unless: {}, continue: true },
          artifacts: {},
        },
      ],
    },
  ],
};

describe('parseBuild', () => {
  it('fills absent fields with zero values', () => {
    const result = parseBuild(VELA_JSON);
    if (!result.ok) throw new Error(JSON.stringify(result.issues));
    const build = result.value;
    expect(build.steps).toEqual([]);
    expect(build.services).toEqual([]);
    expect(build.environment).toEqual({});
    expect(build.worker).toEqual({ flavor: '', platform: '' });
    expect(build.metadata.auto_cancel).toEqual({ running: false, pending: false, default_branch: false });
    const step = build.stages[0]?.steps[0];
    expect(step).toMatchObject({ detach: false, exit_code: 0, entrypoint: [], secrets: [], ulimits: [], volumes: [], user: '', report_as: '', git: null });
    expect(step?.ruleset).toMatchObject({ continue: true, matcher: 'filepath', operator: 'and' });
    expect(step?.ruleset.unless.branch).toEqual([]);
    expect(build.stages[0]?.independent).toBe(false);
  });

  it('reads an empty secret origin as no origin', () => {
    const result = parseBuild(VELA_JSON);
    expect(result.ok && result.value.secrets[0]?.origin).toBeNull();
  });

  it('accepts nulls, the KEY=VALUE environment form and pull booleans of old servers', () => {
    const result = parseBuild({ steps: null, environment: ['A=1', 'B=x=y'], services: [{ name: 'db', pull: true, environment: null }] });
    if (!result.ok) throw new Error(JSON.stringify(result.issues));
    expect(result.value.environment).toEqual({ A: '1', B: 'x=y' });
    expect(result.value.services[0]?.pull).toBe('always');
    expect(result.value.services[0]?.environment).toEqual({});
  });

  it('keeps unknown fields, and lists them in strict mode', () => {
    const input = { id: 'x', future: { a: 1 }, steps: [{ name: 's', shiny: true }] };
    const loose = parseBuild(input);
    expect(loose.ok && loose.value['future']).toEqual({ a: 1 });
    expect(loose.ok && loose.value.steps[0]?.['shiny']).toBe(true);
    const strict = parseBuild(input, { strict: true });
    expect(strict.ok).toBe(false);
    expect(strict.unknownFields.sort()).toEqual(['future', 'steps[0].shiny']);
  });

  it('reports every problem with its path', () => {
    const result = parseBuild({
      id: 3,
      steps: [{ pull: 'sometimes' }, { ruleset: { if: { branch: 7 } }, ulimits: [{ soft: 'x' }] }],
      environment: ['NOEQUALS'],
    });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const paths = result.issues.map((i) => i.path).sort();
    expect(paths).toEqual(['environment[0]', 'id', 'steps[0].pull', 'steps[1].ruleset.if.branch', 'steps[1].ulimits[0].soft']);
    expect(result.issues.find((i) => i.path === 'steps[0].pull')?.message).toMatch(/always, not_present, on_start, never/);
  });

  it('rejects non-objects', () => {
    expect(parseBuild('nope').ok).toBe(false);
    expect(parseBuild(null).ok).toBe(false);
  });

  it('round-trips through marshalBuild', () => {
    const parsed = parseBuild(VELA_JSON);
    if (!parsed.ok) throw new Error('parse failed');
    const again = parseBuild(JSON.parse(JSON.stringify(marshalBuild(parsed.value))));
    expect(again.ok && again.value).toEqual(parsed.value);
  });

  it('marshals like Go omitempty', () => {
    expect(marshalBuild(emptyBuild({ id: 'x' }))).toEqual({ id: 'x', metadata: {}, git: null, worker: {}, deployment: {} });
  });
});

describe('parseContainer and parseRuleset', () => {
  it('normalise one container or ruleset', () => {
    const c = parseContainer({ name: 'a', image: 'alpine' });
    expect(c.ok && c.value.pull).toBe('not_present');
    const r = parseRuleset({ matcher: 'regex', if: { event: 'push' } });
    expect(r.ok && r.value).toMatchObject({ matcher: 'regexp', operator: 'and', if: { event: ['push'] } });
  });
});

describe('validateBuild', () => {
  const stage = (name: string, needs: string[], stepNames: string[] = ['s']) => ({
    name,
    needs,
    independent: false,
    environment: {},
    steps: stepNames.map((n) => emptyContainer({ name: n })),
  });

  it('accepts a valid build, including a need of clone without a clone stage', () => {
    expect(validateBuild(emptyBuild({ stages: [stage('a', ['clone']), stage('b', ['a', 'clone'])] }))).toEqual([]);
  });

  it('reports duplicates, unknown needs, cycles, and steps with stages', () => {
    const build = emptyBuild({
      steps: [emptyContainer({ name: 'x' }), emptyContainer({ name: 'x' })],
      stages: [stage('a', ['c']), stage('b', ['a', 'nope']), stage('c', ['b'], ['s', 's']), stage('a', [])],
    });
    expect(validateBuild(build).map((i) => `${i.path}: ${i.message}`)).toEqual([
      'stages: cannot have both stages and steps at the top level of pipeline',
      'steps[1].name: step `x` is already defined',
      'stages[2].steps[1].name: step `s` is already defined',
      'stages[3].name: stage `a` is already defined',
      'stages[1].needs[1]: stage b needs unknown stage "nope"',
      'stages: stages form a cycle through needs: a -> c -> b -> a',
    ]);
  });
});
