/**
 * `ruleset: eval:` — the expr-lang subset Vela documents, evaluated as go-vela/server's
 * `compiler/types/pipeline/ruleset.go` `MatchRules` does (expr.Compile with expr.Env(data.Env),
 * AllowUndefinedVariables, AsBool).
 */
import { describe, expect, it } from 'vitest';
import { compilePipeline, emptyRuleset, matchRuleset, parseEval, evaluateEval, RulesetError, type RuleData, type Ruleset } from '../src/index.ts';
import { emptyRules } from '../src/model.ts';

const env = { VELA_BUILD_AUTHOR: 'Octocat', VELA_BUILD_BRANCH: 'release/1.2', VELA_BUILD_EVENT: 'push', VELA_BUILD_NUMBER: '42', EMPTY: '' };
const run = (source: string, vars: Record<string, string> = env): boolean => {
  const parsed = parseEval(source);
  if (!parsed.ok) throw new Error(parsed.error);
  return evaluateEval(parsed.expression, vars);
};

describe('Vela ruleset_test.go eval cases (TestPipeline_RuleData_Match)', () => {
  const ruleset = (fields: Partial<Ruleset['if']>): Ruleset => ({ ...emptyRuleset(), if: { ...emptyRules(), operator: 'and', ...fields } });
  const data = (e: Record<string, string>): RuleData => ({
    branch: 'main',
    comment: 'rerun',
    event: 'push',
    repo: 'octocat/hello-world',
    status: 'pending',
    tag: 'refs/heads/main',
    target: '',
    env: e,
  });
  it.each([
    [ruleset({ eval: "VELA_BUILD_AUTHOR == 'Octocat'" }), data({ VELA_BUILD_AUTHOR: 'Octocat' }), true],
    [ruleset({ eval: "VELA_BUILD_AUTHOR == 'Octocat'" }), data({ VELA_BUILD_AUTHOR: 'test' }), false],
    [ruleset({ eval: "VELA_MISSING_VAR == 'Octocat'" }), data({}), false],
    [ruleset({ eval: "VELA_BUILD_AUTHOR == 'Octocat'", branch: ['main'], event: ['push'] }), data({ VELA_BUILD_AUTHOR: 'Octocat' }), true],
    [ruleset({ eval: "VELA_BUILD_AUTHOR == 'Octocat'", branch: ['main'], event: ['pull_request'] }), data({ VELA_BUILD_AUTHOR: 'Octocat' }), false],
  ])('case %#', (rs, d, want) => {
    expect(matchRuleset(rs, d)).toBe(want);
  });

  it('refuses "1 + bad-eval" with an error', () => {
    const rs = ruleset({ eval: '1 + bad-eval', branch: ['main'], event: ['pull_request'] });
    expect(() => matchRuleset(rs, data({ VELA_BUILD_AUTHOR: 'Octocat' }))).toThrow(RulesetError);
  });

  it('is not evaluated without an environment (Vela: data.Env == nil)', () => {
    const rs = ruleset({ eval: "VELA_BUILD_AUTHOR == 'nobody'" });
    expect(matchRuleset(rs, { event: 'push', status: 'pending' })).toBe(true);
  });
});

describe('the expression subset', () => {
  it.each([
    ['VELA_BUILD_AUTHOR == "Octocat"', true],
    ["VELA_BUILD_AUTHOR != 'Octocat'", false],
    ['VELA_BUILD_AUTHOR == "Octocat" && VELA_BUILD_EVENT == "push"', true],
    ['VELA_BUILD_AUTHOR == "x" || VELA_BUILD_EVENT == "push"', true],
    ['VELA_BUILD_AUTHOR == "x" or VELA_BUILD_EVENT == "tag"', false],
    ['not (VELA_BUILD_EVENT == "push") and true', false],
    ['!(VELA_BUILD_EVENT == "tag")', true],
    ['VELA_BUILD_EVENT in ["push", "tag"]', true],
    ['VELA_BUILD_EVENT not in ["push", "tag"]', false],
    ['VELA_BUILD_BRANCH matches "^release/[0-9.]+$"', true],
    ['VELA_BUILD_BRANCH startsWith "release/"', true],
    ['VELA_BUILD_BRANCH endsWith ".2"', true],
    ['VELA_BUILD_BRANCH contains "ease"', true],
    ['VELA_BUILD_AUTHOR < "P"', true],
    ['1 < 2 && 2.5 >= 2.5 && -1 < 0', true],
    ['EMPTY == ""', true],
    ['NOT_SET == nil', true],
    ['NOT_SET == "x"', false],
    ['"a\\"b" == \'a"b\'', true],
    ['true', true],
  ])('%s is %s', (source, want) => {
    expect(run(source)).toBe(want);
  });
});

describe('errors at validate time', () => {
  it.each([
    ['VELA_BUILD_AUTHOR', 'expected a condition (true or false), but got a string'],
    ['VELA_BUILD_NUMBER > 5', 'cannot compare a string with a number'],
    ['len(VELA_BUILD_AUTHOR) > 3', 'function calls (len) are outside'],
    ['VELA_BUILD_AUTHOR + "x" == "y"', '"+" is outside'],
    ['VELA_BUILD_AUTHOR ==', 'unexpected end of the expression'],
    ['VELA_BUILD_AUTHOR == "unterminated', 'unterminated string'],
    ['VELA_BUILD_BRANCH matches "("', 'invalid regular expression'],
    ['x ? y : z', '"?" is outside'],
  ])('%s', (source, message) => {
    const parsed = parseEval(source);
    expect(parsed.ok).toBe(false);
    expect(!parsed.ok && parsed.error).toContain(message);
  });

  it('reports an eval outside the subset at its line in the pipeline, naming what is supported', () => {
    const src = 'version: "1"\nsteps:\n  - name: a\n    image: alpine\n    commands: [ls]\n    ruleset:\n      eval: len(VELA_BUILD_AUTHOR) > 3\n';
    const r = compilePipeline(src, { file: 'p.yml' });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors[0]).toMatchObject({ line: 7, column: 13 });
    expect(r.errors[0]?.message).toContain('ruleset eval');
    expect(r.errors[0]?.hint).toContain('comparisons');
  });
});

describe('compile-time purge with eval', () => {
  // compiler/types/pipeline/container.go ContainerSlice.Purge: r.Env = container.Environment.
  const src = [
    'version: "1"',
    'environment:',
    '  TARGET: prod',
    'steps:',
    '  - name: deploy',
    '    image: alpine',
    '    commands: [ls]',
    '    ruleset:',
    '      eval: TARGET == "prod" && VELA_BUILD_EVENT == "push"',
    '  - name: never',
    '    image: alpine',
    '    commands: [ls]',
    '    ruleset:',
    '      eval: TARGET == "dev"',
    '',
  ].join('\n');

  it('keeps the steps whose eval is true against their environment', () => {
    const r = compilePipeline(src, { file: 'p.yml', ruleData: { event: 'push' }, metadata: { build: { event: 'push' } } });
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.build.steps.map((s) => s.name)).toEqual(['init', 'deploy']);
  });

  it('keeps every step without rule data (validation only)', () => {
    const r = compilePipeline(src, { file: 'p.yml' });
    expect(r.ok && r.build.steps.map((s) => s.name)).toEqual(['init', 'deploy', 'never']);
  });
});
