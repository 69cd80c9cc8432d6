/**
 * The scalar styles of go.yaml.in/yaml/v3 v3.0.4 `Marshal`, which decide what a `${VAR}`
 * substitution does to a step (go-vela/server compiler/native/substitute.go). Expected texts come
 * from yaml.v3's encode_test.go `marshalTests` where it has them, the rest from emitterc.go
 * `yaml_emitter_analyze_scalar` / `yaml_emitter_select_scalar_style` as read.
 */
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { FlowList, yamlV3Mapping, yamlV3Scalar } from '../src/compile/yaml-v3.ts';

describe('yaml.v3 scalar styles', () => {
  it.each([
    // encode_test.go marshalTests
    ['', '""'],
    ['-', "'-'"],
    ['b: c', "'b: c'"],
    ['Hello #comment', "'Hello #comment'"],
    ['2015-02-24T18:19:39Z', '"2015-02-24T18:19:39Z"'],
    ['\tB\n\tC\n', '|\n    \tB\n    \tC'],
    // emitterc.go as read
    ['hello', 'hello'],
    ['true', '"true"'],
    ['yes', '"yes"'],
    ['123', '"123"'],
    ['1:30', '"1:30"'],
    ['x:${VELA_BUILD_COMMIT:0:7}', 'x:${VELA_BUILD_COMMIT:0:7}'],
    ['echo ${MSG}', 'echo ${MSG}'],
    ['"${MSG}" done', `'"\${MSG}" done'`],
    [' lead', "' lead'"],
    ['tab\there', '"tab\\there"'],
    ['a\nb', '|-\n    a\n    b'],
    ['a\n\n', '|+\n    a\n'],
    [' a\nb', '|4-\n     a\n    b'],
  ])('%j is written %s', (value, text) => {
    expect(yamlV3Scalar(value, { flow: false, key: false })).toBe(text);
  });

  it('flow lists quote what a flow context cannot hold plain', () => {
    expect(yamlV3Mapping({ branch: new FlowList(['main', 'release-${TAG}', 'a,b']) })).toBe("branch: [main, 'release-${TAG}', 'a,b']");
  });

  it('reads back to the same values', () => {
    const values = {
      s: ['', 'true', '-', ' lead', 'trail ', 'a\nb', 'a\n', 'a\n\n', ' a\nb', 'tab\there', 'q"uote', "it's", 'x: y', '#c', '\u0007bell', 'ünï'],
      m: { 'key with: colon': 'v', '': 'empty key', nested: { list: ['a', { k: 'v\nw' }] } },
      n: 3,
      b: true,
      z: null,
    };
    expect(parse(`${yamlV3Mapping(values)}\n`)).toEqual(values);
  });
});
