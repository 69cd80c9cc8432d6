import { describe, expect, it } from 'vitest';
import { evaluateRuleset, filepathMatch, matchRuleset, RulesetError, type RuleData, type Rules, type Ruleset } from '../src/index.ts';
import { emptyRules } from '../src/model.ts';
import { matchRule } from '../src/ruleset.ts';

function rs(parts: { if?: Partial<Rules>; unless?: Partial<Rules>; continue?: boolean }): Ruleset {
  return {
    if: { ...emptyRules(), ...parts.if },
    unless: { ...emptyRules(), ...parts.unless },
    matcher: 'filepath',
    operator: 'and',
    continue: parts.continue ?? false,
  };
}

const base: RuleData = { branch: 'main', comment: 'rerun', event: 'push', repo: 'octocat/hello-world', status: 'pending', tag: 'refs/heads/main', target: '' };

// Cases from go-vela/server compiler/types/pipeline/ruleset_test.go (TestPipeline_Ruleset_Match).
const cases: [string, Ruleset, RuleData, boolean][] = [
  ['empty', rs({}), { branch: 'main' }, true],
  ['if branch and', rs({ if: { branch: ['main'], operator: 'and' } }), base, true],
  ['if branch and, other branch', rs({ if: { branch: ['main'], operator: 'and' } }), { ...base, branch: 'dev' }, false],
  ['if branch+event and', rs({ if: { branch: ['main'], event: ['push'], operator: 'and' } }), base, true],
  ['if branch+event and, pr', rs({ if: { branch: ['main'], event: ['push'], operator: 'and' } }), { ...base, event: 'pull_request' }, false],
  ['if path, no files', rs({ if: { path: ['foo.txt', '/foo/bar.txt'], operator: 'and' } }), { ...base, path: [] }, false],
  ['if comment', rs({ if: { comment: ['rerun'], operator: 'and' } }), { ...base, branch: 'dev' }, true],
  ['if comment, other', rs({ if: { comment: ['rerun'], operator: 'and' } }), { ...base, comment: 'ok to test' }, false],
  ['deployment target', rs({ if: { event: ['deployment'], target: ['production'] } }), { ...base, event: 'deployment', target: 'production' }, true],
  ['deployment other target', rs({ if: { event: ['deployment'], target: ['production'] } }), { ...base, event: 'deployment', target: 'stage' }, false],
  ['schedule target', rs({ if: { event: ['schedule'], target: ['weekly'] } }), { ...base, event: 'schedule', target: 'weekly' }, true],
  ['status at run time', rs({ if: { status: ['success', 'failure'] } }), { ...base, status: 'failure' }, true],
  ['sender', rs({ if: { sender: ['octocat'] } }), { ...base, sender: 'octocat' }, true],
  ['or: both', rs({ if: { branch: ['main'], event: ['push'], operator: 'or' } }), base, true],
  ['or: event only', rs({ if: { branch: ['main'], event: ['push'], operator: 'or' } }), { ...base, branch: 'dev' }, true],
  ['or: branch only', rs({ if: { branch: ['main'], event: ['push'], operator: 'or' } }), { ...base, event: 'pull_request' }, true],
  ['or: neither', rs({ if: { branch: ['main'], event: ['push'], operator: 'or' } }), { ...base, branch: 'dev', event: 'pull_request' }, false],
  ['unless branch', rs({ unless: { branch: ['main'] } }), base, false],
  ['unless branch, other', rs({ unless: { branch: ['main'] } }), { ...base, branch: 'dev' }, true],
  ['unless branch+event', rs({ unless: { branch: ['main'], event: ['push'] } }), base, false],
  ['unless branch+event, pr', rs({ unless: { branch: ['main'], event: ['push'] } }), { ...base, event: 'pull_request' }, true],
  ['unless or', rs({ unless: { branch: ['main'], event: ['push'], operator: 'or' } }), { ...base, branch: 'dev' }, false],
  ['if and unless', rs({ if: { branch: ['main'] }, unless: { event: ['pull_request'] } }), base, true],
  ['if and unless, unless hits', rs({ if: { branch: ['main'] }, unless: { event: ['push'] } }), base, false],
  ['glob branch', rs({ if: { branch: ['release/*'] } }), { ...base, branch: 'release/1.0' }, true],
  ['glob does not cross /', rs({ if: { branch: ['release/*'] } }), { ...base, branch: 'release/1.0/hotfix' }, false],
  ['path glob any file', rs({ if: { path: ['src/*.go'] } }), { ...base, path: ['README.md', 'src/main.go'] }, true],
  ['regexp unanchored', rs({ if: { branch: ['ain'], matcher: 'regexp' } }), base, true],
  ['regexp anchored', rs({ if: { branch: ['^release/.*$'], matcher: 'regexp' } }), { ...base, branch: 'release/1.0/hotfix' }, true],
  ['regexp no match', rs({ if: { branch: ['^dev$'], matcher: 'regexp' } }), base, false],
  ['tag glob', rs({ if: { tag: ['v*'], event: ['tag'] } }), { ...base, event: 'tag', tag: 'v1.2.3' }, true],
  ['label any', rs({ if: { label: ['ci'] } }), { ...base, label: ['docs', 'ci'] }, true],
  ['instance', rs({ if: { instance: ['https://vela.*'] } }), { ...base, instance: 'https://vela.example.com' }, true],
  ['compile-time: status skipped with and', rs({ if: { status: ['failure'], branch: ['main'] } }), base, true],
  ['compile-time: or with status matches', rs({ if: { status: ['failure'], branch: ['nope'], operator: 'or' } }), base, true],
  ['running counts as success', rs({ if: { status: ['success'] } }), { ...base, status: 'running' }, true],
  ['failure status rule on success', rs({ if: { status: ['failure'] } }), { ...base, status: 'success' }, false],
];

describe('matchRuleset (Vela RuleData.Match)', () => {
  it.each(cases)('%s', (_name, ruleset, data, want) => {
    expect(matchRuleset(ruleset, data)).toBe(want);
  });

  it('uses the ruleset-level matcher/operator when a side has none (older servers)', () => {
    const ruleset: Ruleset = { ...rs({ if: { branch: ['^ma'], event: ['nope'] } }), matcher: 'regexp', operator: 'or' };
    expect(matchRuleset(ruleset, base)).toBe(true);
  });

  it('throws RulesetError for bad patterns and an eval outside the subset', () => {
    expect(() => matchRuleset(rs({ if: { branch: ['(x'], matcher: 'regexp' } }), base)).toThrow(RulesetError);
    expect(() => matchRuleset(rs({ if: { branch: ['[x'] } }), base)).toThrow(RulesetError);
    expect(() => matchRuleset(rs({ if: { eval: '1 + bad-eval' } }), { ...base, env: {} })).toThrow(/eval/);
  });

  it('does not change the rule data (Vela mutates running → success)', () => {
    const data = { ...base, status: 'running' };
    matchRuleset(rs({ if: { status: ['success'] } }), data);
    expect(data.status).toBe('running');
  });
});

describe('evaluateRuleset (Vela Container.Execute)', () => {
  it('runs a step without status rules only while the build has not failed', () => {
    const empty = rs({});
    expect(evaluateRuleset(empty, { status: 'running' })).toBe(true);
    expect(evaluateRuleset(empty, { status: 'success' })).toBe(true);
    expect(evaluateRuleset(empty, { status: 'failure' })).toBe(false);
    expect(evaluateRuleset(empty, { status: 'error' })).toBe(false);
    // Non-status rules were applied at compile time: ignored now.
    expect(evaluateRuleset(rs({ if: { branch: ['other'] } }), { branch: 'main', status: 'running' })).toBe(true);
  });

  it('matches the whole ruleset when there is a status rule', () => {
    const onFailure = rs({ if: { status: ['failure'] } });
    expect(evaluateRuleset(onFailure, { status: 'failure' })).toBe(true);
    expect(evaluateRuleset(onFailure, { status: 'running' })).toBe(false);
    const always = rs({ if: { status: ['success', 'failure'] } });
    expect(evaluateRuleset(always, { status: 'failure' })).toBe(true);
    expect(evaluateRuleset(always, { status: 'running' })).toBe(true);
    const unlessFailure = rs({ unless: { status: ['failure'] } });
    expect(evaluateRuleset(unlessFailure, { status: 'failure' })).toBe(false);
  });

  it('matchRule takes any value against any pattern', () => {
    expect(matchRule(['a', 'b'], ['x', 'b'], 'filepath')).toBe(true);
    expect(matchRule([], ['*'], 'filepath')).toBe(false);
  });
});

// Cases from Go's path/filepath match_test.go.
const globCases: [string, string, boolean | 'error'][] = [
  ['abc', 'abc', true],
  ['*', 'abc', true],
  ['*c', 'abc', true],
  ['a*', 'a', true],
  ['a*', 'abc', true],
  ['a*', 'ab/c', false],
  ['a*/b', 'abc/b', true],
  ['a*/b', 'a/c/b', false],
  ['a*b*c*d*e*/f', 'axbxcxdxe/f', true],
  ['a*b*c*d*e*/f', 'axbxcxdxexxx/f', true],
  ['a*b*c*d*e*/f', 'axbxcxdxe/xxx/f', false],
  ['a*b*c*d*e*/f', 'axbxcxdxexxx/fff', false],
  ['a*b?c*x', 'abxbbxdbxebxczzx', true],
  ['a*b?c*x', 'abxbbxdbxebxczzy', false],
  ['ab[c]', 'abc', true],
  ['ab[b-d]', 'abc', true],
  ['ab[e-g]', 'abc', false],
  ['ab[^c]', 'abc', false],
  ['ab[^b-d]', 'abc', false],
  ['ab[^e-g]', 'abc', true],
  ['a\\*b', 'a*b', true],
  ['a\\*b', 'ab', false],
  ['a?b', 'a☺b', true],
  ['a[^a]b', 'a☺b', true],
  ['a???b', 'a☺b', false],
  ['a[^a][^a][^a]b', 'a☺b', false],
  ['[a-ζ]*', 'α', true],
  ['*[a-ζ]', 'A', false],
  ['a?b', 'a/b', false],
  ['a*b', 'a/b', false],
  ['[\\]a]', ']', true],
  ['[\\-]', '-', true],
  ['[x\\-]', 'x', true],
  ['[x\\-]', '-', true],
  ['[x\\-]', 'z', false],
  ['[\\-x]', 'x', true],
  ['[\\-x]', '-', true],
  ['[\\-x]', 'a', false],
  ['[]a]', ']', 'error'],
  ['[-]', '-', 'error'],
  ['[x-]', 'x', 'error'],
  ['[x-]', '-', 'error'],
  ['[x-]', 'z', 'error'],
  ['[-x]', 'x', 'error'],
  ['[-x]', '-', 'error'],
  ['[-x]', 'a', 'error'],
  ['\\', 'a', 'error'],
  ['[a-b-c]', 'a', 'error'],
  ['[', 'a', 'error'],
  ['[^', 'a', 'error'],
  ['[^bc', 'a', 'error'],
  ['a[', 'a', 'error'],
  ['a[', 'ab', 'error'],
  ['a[', 'x', 'error'],
  ['a/b[', 'x', 'error'],
  ['*x', 'xxx', true],
];

describe('filepathMatch (Go filepath.Match)', () => {
  it.each(globCases)('%s ~ %s', (pattern, name, want) => {
    if (want === 'error') expect(() => filepathMatch(pattern, name)).toThrow(/syntax error in pattern/);
    else expect(filepathMatch(pattern, name)).toBe(want);
  });
});
