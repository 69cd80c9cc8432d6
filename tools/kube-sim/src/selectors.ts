// Label selectors (equality- and set-based) and field selectors, parsed as the API server
// parses them and matched against stored objects.

import { badRequest } from './status.ts';
import { type KubeObject } from './types.ts';

/** One requirement of a label selector. */
interface LabelRequirement {
  key: string;
  op: 'exists' | 'notexists' | 'in' | 'notin' | 'gt' | 'lt';
  values: string[];
}

/** A parsed label selector: all requirements must hold. */
export type LabelSelector = LabelRequirement[];

function splitTopLevel(input: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of input) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(current);
      current = '';
    } else {
      current += ch;
    }
  }
  parts.push(current);
  return parts.map((p) => p.trim()).filter((p) => p !== '');
}

const labelKey = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const labelValue = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

function checkKey(key: string, raw: string): string {
  if (!labelKey.test(key)) throw badRequest(`unable to parse requirement: invalid label key "${key}" in selector "${raw}"`);
  return key;
}

function checkValue(value: string, raw: string): string {
  if (value.length > 63 || !labelValue.test(value)) {
    throw badRequest(`unable to parse requirement: invalid label value: "${value}" in selector "${raw}"`);
  }
  return value;
}

/** Parses `a=b,c!=d,e in (x,y),f notin (z),g,!h`. Throws a 400 ApiError on bad syntax. */
export function parseLabelSelector(raw: string | null | undefined): LabelSelector {
  if (!raw) return [];
  const result: LabelSelector = [];
  for (const part of splitTopLevel(raw)) {
    let m: RegExpMatchArray | null;
    if ((m = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(part))) {
      const values = (m[3] ?? '').split(',').map((v) => checkValue(v.trim(), raw));
      result.push({ key: checkKey(m[1] ?? '', raw), op: m[2] === 'in' ? 'in' : 'notin', values });
    } else if ((m = /^!\s*(\S+)$/.exec(part))) {
      result.push({ key: checkKey(m[1] ?? '', raw), op: 'notexists', values: [] });
    } else if ((m = /^([^=!<>\s]+)\s*(==|=|!=|>|<)\s*(\S*)$/.exec(part))) {
      const key = checkKey(m[1] ?? '', raw);
      const value = m[3] ?? '';
      switch (m[2]) {
        case '!=':
          result.push({ key, op: 'notin', values: [checkValue(value, raw)] });
          break;
        case '>':
        case '<':
          if (!/^-?\d+$/.test(value)) throw badRequest(`unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer`);
          result.push({ key, op: m[2] === '>' ? 'gt' : 'lt', values: [value] });
          break;
        default:
          result.push({ key, op: 'in', values: [checkValue(value, raw)] });
      }
    } else if ((m = /^(\S+)$/.exec(part))) {
      result.push({ key: checkKey(m[1] ?? '', raw), op: 'exists', values: [] });
    } else {
      throw badRequest(`unable to parse requirement: found '${part}', expected: identifier`);
    }
  }
  return result;
}

/** True when the labels satisfy every requirement. */
export function matchLabels(selector: LabelSelector, labels: Record<string, string> | undefined): boolean {
  const l = labels ?? {};
  return selector.every((r) => {
    const has = Object.hasOwn(l, r.key);
    const v = l[r.key];
    switch (r.op) {
      case 'exists':
        return has;
      case 'notexists':
        return !has;
      case 'in':
        return has && r.values.includes(v ?? '');
      case 'notin':
        return !has || !r.values.includes(v ?? '');
      case 'gt':
        return has && /^-?\d+$/.test(v ?? '') && Number(v) > Number(r.values[0]);
      case 'lt':
        return has && /^-?\d+$/.test(v ?? '') && Number(v) < Number(r.values[0]);
    }
  });
}

/** One requirement of a field selector. */
interface FieldRequirement {
  field: string;
  op: '=' | '!=';
  value: string;
}

/** A parsed field selector. */
export type FieldSelector = FieldRequirement[];

function unescapeField(value: string): string {
  return value.replace(/\\(.)/g, '$1');
}

/** Parses `a=b,c!=d` (with `\,` `\=` `\\` escapes), checking each field against `supported`. */
export function parseFieldSelector(raw: string | null | undefined, supported: readonly string[]): FieldSelector {
  if (!raw) return [];
  const result: FieldSelector = [];
  const parts = raw.split(/(?<!\\),/).filter((p) => p.trim() !== '');
  for (const part of parts) {
    const m = /^(.*?)(?<!\\)(!=|==|=)(.*)$/.exec(part);
    if (!m) throw badRequest(`invalid field selector: '${part}' is not a valid field selector: no operator`);
    const field = unescapeField((m[1] ?? '').trim());
    if (!supported.includes(field)) throw badRequest(`field label not supported: ${field}`);
    result.push({ field, op: m[2] === '!=' ? '!=' : '=', value: unescapeField(m[3] ?? '') });
  }
  return result;
}

/** Reads a dotted path such as `involvedObject.name` from an object, as a selector string. */
function fieldValue(obj: KubeObject, field: string): string {
  let cur: unknown = obj;
  for (const key of field.split('.')) {
    if (cur === null || typeof cur !== 'object') return '';
    cur = (cur as Record<string, unknown>)[key];
  }
  if (cur === undefined || cur === null) return '';
  if (typeof cur === 'string') return cur;
  if (typeof cur === 'number' || typeof cur === 'boolean') return String(cur);
  if (typeof cur === 'object') return (cur as { component?: string }).component ?? '';
  return '';
}

/** True when the object satisfies every field requirement. */
function matchFields(selector: FieldSelector, obj: KubeObject): boolean {
  return selector.every((r) => (fieldValue(obj, r.field) === r.value) === (r.op === '='));
}

/** The filter a list or watch applies. */
export interface ObjectFilter {
  namespace?: string;
  labels: LabelSelector;
  fields: FieldSelector;
}

/** True when the object passes namespace, label and field selection. */
export function matchFilter(filter: ObjectFilter, obj: KubeObject): boolean {
  if (filter.namespace !== undefined && obj.metadata.namespace !== filter.namespace) return false;
  return matchLabels(filter.labels, obj.metadata.labels) && matchFields(filter.fields, obj);
}
