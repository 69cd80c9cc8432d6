import { describe, expect, it } from 'vitest';
import { jsonMergePatch, jsonPatch, matchLabels, parseFieldSelector, parseLabelSelector, strategicMerge } from '../src/index.ts';
import { nextBookmarkAt } from '../src/api/watch.ts';
import { ApiError } from '../src/status.ts';

describe('label selectors', () => {
  const labels = { app: 'web', tier: 'front', version: '3' };
  const cases: [string, boolean][] = [
    ['app=web', true],
    ['app==web', true],
    ['app!=web', false],
    ['app in (web, db)', true],
    ['app in (db)', false],
    ['app notin (db)', true],
    ['app notin (web)', false],
    ['missing notin (web)', true],
    ['tier', true],
    ['missing', false],
    ['!missing', true],
    ['!tier', false],
    ['app=web,tier in (front),!missing', true],
    ['app=web,tier=back', false],
    ['version>2', true],
    ['version<3', false],
  ];
  for (const [selector, expected] of cases) {
    it(`${selector} → ${expected}`, () => {
      expect(matchLabels(parseLabelSelector(selector), labels)).toBe(expected);
    });
  }
  it('rejects bad syntax with a 400', () => {
    expect(() => parseLabelSelector('app in web')).toThrow(ApiError);
    expect(() => parseLabelSelector('bad key=x')).toThrow(ApiError);
  });
});

describe('field selectors', () => {
  it('parses =, ==, != and escapes, and rejects unknown fields', () => {
    expect(parseFieldSelector('metadata.name=a\\,b,status.phase!=Running', ['metadata.name', 'status.phase'])).toEqual([
      { field: 'metadata.name', op: '=', value: 'a,b' },
      { field: 'status.phase', op: '!=', value: 'Running' },
    ]);
    expect(() => parseFieldSelector('spec.foo=x', ['metadata.name'])).toThrow(/field label not supported: spec.foo/);
  });
});

describe('patches', () => {
  const pod = {
    metadata: { labels: { a: '1', b: '2' } },
    spec: {
      containers: [
        { name: 'one', image: 'pause', env: [{ name: 'X', value: '1' }] },
        { name: 'two', image: 'pause' },
      ],
      tolerations: [{ key: 'k' }],
    },
  };
  it('strategic merge merges containers by name, env by name, replaces other lists, deletes with null and $patch', () => {
    const out = strategicMerge(pod, {
      metadata: { labels: { b: null, c: '3' } },
      spec: {
        containers: [
          { name: 'two', image: 'busybox', env: [{ name: 'Y', value: '2' }] },
          { name: 'one', $patch: 'delete' },
          { name: 'three', image: 'x' },
        ],
        tolerations: [{ key: 'z' }],
        '$setElementOrder/containers': [{ name: 'two' }, { name: 'three' }],
      },
    });
    expect(out).toEqual({
      metadata: { labels: { a: '1', c: '3' } },
      spec: {
        containers: [
          { name: 'two', image: 'busybox', env: [{ name: 'Y', value: '2' }] },
          { name: 'three', image: 'x' },
        ],
        tolerations: [{ key: 'z' }],
      },
    });
  });
  it('JSON merge patch replaces lists wholesale', () => {
    const out = jsonMergePatch(pod, { spec: { containers: [{ name: 'two', image: 'busybox' }] } }) as typeof pod;
    expect(out.spec.containers).toEqual([{ name: 'two', image: 'busybox' }]);
    expect(out.metadata.labels).toEqual({ a: '1', b: '2' });
  });
  it('JSON patch applies add, replace, remove, test, move, copy', () => {
    const out = jsonPatch(pod, [
      { op: 'test', path: '/spec/containers/1/name', value: 'two' },
      { op: 'replace', path: '/spec/containers/1/image', value: 'busybox' },
      { op: 'add', path: '/metadata/labels/c', value: '3' },
      { op: 'remove', path: '/metadata/labels/a' },
      { op: 'copy', from: '/metadata/labels/b', path: '/metadata/labels/d' },
      { op: 'move', from: '/metadata/labels/b', path: '/metadata/labels/e' },
      { op: 'add', path: '/spec/containers/-', value: { name: 'three' } },
    ]) as { metadata: { labels: Record<string, string> }; spec: { containers: { name: string; image?: string }[] } };
    expect(out.metadata.labels).toEqual({ c: '3', d: '2', e: '2' });
    expect(out.spec.containers.map((c) => `${c.name}:${c.image ?? ''}`)).toEqual(['one:pause', 'two:busybox', 'three:']);
    expect(() => jsonPatch(pod, [{ op: 'test', path: '/spec/containers/0/name', value: 'nope' }])).toThrow(/testing value/);
    expect(() => jsonPatch(pod, [{ op: 'replace', path: '/spec/missing/x', value: 1 }])).toThrow(ApiError);
  });
});

// cache_watcher.go nextBookmarkTime: a period on, or 2 s before the deadline, and none once that
// time has come. Go compares in nanoseconds, so "now" after the pretimeout bookmark is always past
// it; kube-sim's milliseconds often tie, and a tie must not send a second bookmark.
describe('nextBookmarkAt (cache_watcher.go nextBookmarkTime)', () => {
  it('is a period on, or 2 s before the deadline when that comes first', () => {
    expect(nextBookmarkAt(0, 120_000, 60_000)).toBe(60_000);
    expect(nextBookmarkAt(0, 14_000, 60_000)).toBe(12_000);
  });

  it('is none once the pretimeout time has come, a tie included', () => {
    expect(nextBookmarkAt(12_000, 14_000, 60_000)).toBeUndefined();
    expect(nextBookmarkAt(12_001, 14_000, 60_000)).toBeUndefined();
  });
});
