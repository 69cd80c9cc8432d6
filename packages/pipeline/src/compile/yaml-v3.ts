/**
 * The YAML text go.yaml.in/yaml/v3 `Marshal` writes (v3.0.4, the version go-vela/server uses),
 * for the values a Vela step holds: strings, numbers, booleans, null, lists and maps. Vela's
 * compiler substitutes `${VAR}` into this text and reads it again (compiler/native/substitute.go
 * SubstituteSteps), so what a substituted value does depends on how each string was written:
 * plain, single-quoted, double-quoted or as a literal block. The choice follows yaml.v3's
 * encode.go `stringv` and emitterc.go `yaml_emitter_analyze_scalar` /
 * `yaml_emitter_select_scalar_style`; the writers follow `yaml_emitter_write_*_scalar` with
 * yaml.v3's unlimited width (no folding) and its 4-space indent.
 *
 * Gotcha: the layout of collections is Berth's own (each nested collection starts on its own
 * line), which reads back the same; only the scalar styles, which decide what a substitution
 * does, are yaml.v3's.
 */

/** A value the writer takes: the shapes of a step decoded from YAML. */
export type YamlValue = string | number | boolean | null | readonly YamlValue[] | { readonly [key: string]: YamlValue };

/** A list written in flow style (`[a, b]`), as yaml.v3 writes fields tagged `flow` (ruleset lists). */
export class FlowList {
  readonly items: readonly string[];
  constructor(items: readonly string[]) {
    this.items = items;
  }
}

const INDENT = 4;

const isBreak = (c: string): boolean => c === '\n' || c === '\r' || c === '\u0085' || c === '\u2028' || c === '\u2029';
const isSpace = (c: string): boolean => c === ' ';
const isBlank = (c: string | undefined): boolean => c === ' ' || c === '\t';
const isBlankz = (c: string | undefined): boolean => c === undefined || isBlank(c) || isBreak(c) || c === '\0';

/** yamlprivateh.go `is_printable` (on code points). */
function isPrintable(c: string): boolean {
  const cp = c.codePointAt(0) ?? 0;
  if (cp === 0x0a || (cp >= 0x20 && cp <= 0x7e)) return true;
  if (cp === 0x85 || (cp >= 0xa0 && cp <= 0xd7ff)) return true;
  if (cp >= 0xe000 && cp <= 0xfffd) return cp !== 0xfeff;
  return cp >= 0x10000 && cp <= 0x10ffff;
}

interface Analysis {
  multiline: boolean;
  flowPlain: boolean;
  blockPlain: boolean;
  singleQuoted: boolean;
  block: boolean;
}

/** emitterc.go `yaml_emitter_analyze_scalar`. */
function analyze(value: string): Analysis {
  if (value === '') return { multiline: false, flowPlain: false, blockPlain: true, singleQuoted: true, block: false };
  let blockIndicators = false;
  let flowIndicators = false;
  let lineBreaks = false;
  let specialCharacters = false;
  let tabCharacters = false;
  let leadingSpace = false;
  let leadingBreak = false;
  let trailingSpace = false;
  let trailingBreak = false;
  let breakSpace = false;
  let spaceBreak = false;
  let previousSpace = false;
  let previousBreak = false;
  if (value.startsWith('---') || value.startsWith('...')) {
    blockIndicators = true;
    flowIndicators = true;
  }
  const chars = Array.from(value);
  let precededByWhitespace = true;
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i] ?? '';
    const followedByWhitespace = i + 1 >= chars.length || isBlank(chars[i + 1]);
    if (i === 0) {
      if ('#,[]{}&*!|>\'"%@`'.includes(c)) {
        flowIndicators = true;
        blockIndicators = true;
      } else if (c === '?' || c === ':') {
        flowIndicators = true;
        if (followedByWhitespace) blockIndicators = true;
      } else if (c === '-' && followedByWhitespace) {
        flowIndicators = true;
        blockIndicators = true;
      }
    } else if (',?[]{}'.includes(c)) {
      flowIndicators = true;
    } else if (c === ':') {
      flowIndicators = true;
      if (followedByWhitespace) blockIndicators = true;
    } else if (c === '#' && precededByWhitespace) {
      flowIndicators = true;
      blockIndicators = true;
    }
    if (c === '\t') tabCharacters = true;
    else if (!isPrintable(c)) specialCharacters = true;
    if (isSpace(c)) {
      if (i === 0) leadingSpace = true;
      if (i === chars.length - 1) trailingSpace = true;
      if (previousBreak) breakSpace = true;
      previousSpace = true;
      previousBreak = false;
    } else if (isBreak(c)) {
      lineBreaks = true;
      if (i === 0) leadingBreak = true;
      if (i === chars.length - 1) trailingBreak = true;
      if (previousSpace) spaceBreak = true;
      previousSpace = false;
      previousBreak = true;
    } else {
      previousSpace = false;
      previousBreak = false;
    }
    precededByWhitespace = isBlankz(c);
  }
  const a: Analysis = { multiline: lineBreaks, flowPlain: true, blockPlain: true, singleQuoted: true, block: true };
  if (leadingSpace || leadingBreak || trailingSpace || trailingBreak) a.flowPlain = a.blockPlain = false;
  if (trailingSpace) a.block = false;
  if (breakSpace) a.flowPlain = a.blockPlain = a.singleQuoted = false;
  if (spaceBreak || tabCharacters || specialCharacters) a.flowPlain = a.blockPlain = a.singleQuoted = false;
  if (spaceBreak || specialCharacters) a.block = false;
  if (lineBreaks) a.flowPlain = a.blockPlain = false;
  if (flowIndicators) a.flowPlain = false;
  if (blockIndicators) a.blockPlain = false;
  return a;
}

const OLD_BOOLS = new Set(['y', 'Y', 'yes', 'Yes', 'YES', 'on', 'On', 'ON', 'n', 'N', 'no', 'No', 'NO', 'off', 'Off', 'OFF']);
const RESOLVED = new Set([
  ...['true', 'True', 'TRUE', 'false', 'False', 'FALSE', '', '~', 'null', 'Null', 'NULL'],
  ...['.nan', '.NaN', '.NAN', '.inf', '.Inf', '.INF', '+.inf', '+.Inf', '+.INF', '-.inf', '-.Inf', '-.INF', '<<'],
]);

/**
 * Whether yaml.v3 may write `s` plain (encode.go `stringv`: it must resolve to a string, and not
 * be a YAML 1.1 bool or base-60 float): resolve.go's table, numbers and timestamps.
 */
function resolvesToString(s: string): boolean {
  if (RESOLVED.has(s) || OLD_BOOLS.has(s)) return false;
  if (/^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$/.test(s)) return false;
  const plain = s.replaceAll('_', '');
  if (/^[-+]?(0b[01]+|0o?[0-7]+|0x[0-9a-fA-F]+|[0-9]+)$/.test(plain)) return false;
  if (/^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/.test(s)) return false;
  if (/^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ].*)?$/.test(s)) return false;
  return true;
}

type Style = 'plain' | 'single' | 'double' | 'literal';

/** encode.go `stringv` then emitterc.go `yaml_emitter_select_scalar_style`. */
function styleOf(s: string, where: { flow: boolean; key: boolean }): Style {
  let style: Style = s.includes('\n') ? (where.flow ? 'double' : 'literal') : resolvesToString(s) ? 'plain' : 'double';
  const a = analyze(s);
  if (where.key && a.multiline) style = 'double';
  if (style === 'plain') {
    if ((where.flow && !a.flowPlain) || (!where.flow && !a.blockPlain)) style = 'single';
    if (s === '' && (where.flow || where.key)) style = 'single';
  }
  if (style === 'single' && !a.singleQuoted) style = 'double';
  if (style === 'literal' && (!a.block || where.flow || where.key)) style = 'double';
  return style;
}

/** emitterc.go `yaml_emitter_write_double_quoted_scalar` (no folding). */
function doubleQuoted(s: string): string {
  let out = '"';
  for (const c of s) {
    const cp = c.codePointAt(0) ?? 0;
    if (!isPrintable(c) || cp === 0xfeff || isBreak(c) || c === '"' || c === '\\') {
      const named: Record<number, string> = {
        0x00: '0',
        0x07: 'a',
        0x08: 'b',
        0x09: 't',
        0x0a: 'n',
        0x0b: 'v',
        0x0c: 'f',
        0x0d: 'r',
        0x1b: 'e',
        0x22: '"',
        0x5c: '\\',
        0x85: 'N',
        0xa0: '_',
        0x2028: 'L',
        0x2029: 'P',
      };
      const n = named[cp];
      if (n !== undefined) out += `\\${n}`;
      else if (cp <= 0xff) out += `\\x${cp.toString(16).toUpperCase().padStart(2, '0')}`;
      else if (cp <= 0xffff) out += `\\u${cp.toString(16).toUpperCase().padStart(4, '0')}`;
      else out += `\\U${cp.toString(16).toUpperCase().padStart(8, '0')}`;
    } else {
      out += c;
    }
  }
  return `${out}"`;
}

/** emitterc.go `yaml_emitter_write_literal_scalar` with its block scalar hints, content at `indent`. */
function literal(s: string, indent: number): string {
  let head = '|';
  if (s.startsWith(' ') || isBreak(s[0] ?? '')) head += String(INDENT);
  if (!isBreak(s.at(-1) ?? '')) head += '-';
  else if (s.length === 1 || isBreak(s.at(-2) ?? '')) head += '+';
  const pad = ' '.repeat(indent);
  const body = s.endsWith('\n') ? s.slice(0, -1) : s;
  return `${head}\n${body
    .split('\n')
    .map((line) => (line === '' ? '' : pad + line))
    .join('\n')}`;
}

/** One string as yaml.v3 writes it; a literal's lines are indented to `indent`. */
export function yamlV3Scalar(s: string, where: { flow: boolean; key: boolean }, indent = INDENT): string {
  switch (styleOf(s, where)) {
    case 'plain':
      return s;
    case 'single':
      return `'${s.replaceAll("'", "''")}'`;
    case 'double':
      return doubleQuoted(s);
    case 'literal':
      return literal(s, indent);
  }
}

function atom(v: string | number | boolean | null, where: { flow: boolean; key: boolean }, indent: number): string {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : Number.isNaN(v) ? '.nan' : v > 0 ? '.inf' : '-.inf';
  return yamlV3Scalar(v, where, indent);
}

/**
 * The block-style YAML of a mapping, at column `indent`: `key: value` lines, a nested list or map
 * on the lines below at `indent + 4`, a {@link FlowList} inline. Entries whose value is
 * `undefined` are left out (Go's `omitempty` is the caller's business).
 */
export function yamlV3Mapping(map: Readonly<Record<string, YamlValue | FlowList | undefined>>, indent = 0): string {
  const pad = ' '.repeat(indent);
  const lines: string[] = [];
  for (const [key, value] of Object.entries(map)) {
    if (value === undefined) continue;
    const k = `${pad}${yamlV3Scalar(key, { flow: false, key: true })}:`;
    lines.push(`${k}${valueText(value, indent)}`);
  }
  return lines.join('\n');
}

function valueText(value: YamlValue | FlowList, indent: number): string {
  if (value instanceof FlowList) return ` [${value.items.map((s) => yamlV3Scalar(s, { flow: true, key: false })).join(', ')}]`;
  if (Array.isArray(value)) {
    const list = value as readonly YamlValue[];
    if (list.length === 0) return ' []';
    const pad = ' '.repeat(indent + INDENT);
    return `\n${list.map((item) => `${pad}-${valueText(item, indent + INDENT)}`).join('\n')}`;
  }
  if (value !== null && typeof value === 'object') {
    const map = value as Readonly<Record<string, YamlValue>>;
    if (Object.keys(map).length === 0) return ' {}';
    return `\n${yamlV3Mapping(map, indent + INDENT)}`;
  }
  return ` ${atom(value, { flow: false, key: false }, indent + INDENT)}`;
}
