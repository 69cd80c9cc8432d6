/**
 * A pipeline file as a YAML document: source positions for every problem, mapping entries with
 * merge keys resolved, unknown keys reported, and Vela's scalar decoding (go.yaml.in/yaml/v3 into
 * strings, booleans, raw.StringSlice and raw.StringSliceMap).
 */
import { isAlias, isMap, isScalar, isSeq, type Document, type LineCounter, type Node, type Pair } from 'yaml';
import { suggest } from './keys.ts';

/** One problem in a pipeline file, located where it is. Lines and columns are 1-based. */
export interface CompileError {
  file: string;
  line: number;
  column: number;
  message: string;
  /** What to do about it, when there is something obvious (`did you mean "commands"?`). */
  hint?: string;
}

export interface Entry {
  key: string;
  keyNode: Node;
  value: Node | null;
  /** The entry came from a merge key (`<<`). */
  merged: boolean;
}

export class Ctx {
  errors: CompileError[] = [];
  warnings: string[] = [];
  readonly file: string;
  readonly lc: LineCounter;
  readonly doc: Document;
  readonly strict: boolean;
  /** Where a template document was used (`template "x" used by step "y" at p.yml:3:5`), added to its messages. */
  via = '';
  constructor(file: string, lc: LineCounter, doc: Document, strict = false) {
    this.file = file;
    this.lc = lc;
    this.doc = doc;
    this.strict = strict;
  }

  /** A context for another document (a rendered template) that reports into the same lists. */
  child(file: string, lc: LineCounter, doc: Document, via: string): Ctx {
    const c = new Ctx(file, lc, doc, this.strict);
    c.errors = this.errors;
    c.warnings = this.warnings;
    c.via = via;
    return c;
  }

  /** `file:line:column` of a node of this document. */
  where(node: Node | null | undefined): string {
    const { line, col } = this.lc.linePos(node?.range?.[0] ?? 0);
    return `${this.file}:${line}:${col}`;
  }

  /** A warning located like an error: `file:line:column: message (hint)`, each once. */
  warn(node: Node | null | undefined, message: string, hint?: string): void {
    const { line, col } = this.lc.linePos(node?.range?.[0] ?? 0);
    const text = `${this.file}:${line}:${col}: ${message}${this.via !== '' ? ` (${this.via})` : ''}${hint !== undefined ? ` (${hint})` : ''}`;
    if (!this.warnings.includes(text)) this.warnings.push(text);
  }

  /**
   * An unknown key: a warning (Vela ignores unknown keys), an error with `strict`. The hint names
   * the closest known key, or lists them.
   */
  unknownKey(keyNode: Node, key: string, what: string, allowed: readonly string[]): void {
    const s = suggest(key, allowed);
    const hint = s !== undefined ? `did you mean "${s}"?` : `known keys: ${allowed.join(', ')}`;
    if (this.strict) this.error(keyNode, `unknown key "${key}" in ${what}`, hint);
    else this.warn(keyNode, `unknown key "${key}" in ${what}, ignored`, hint);
  }

  error(node: Node | null | undefined, message: string, hint?: string, fallback?: Node | null): void {
    const at = node ?? fallback ?? null;
    const offset = at?.range?.[0] ?? 0;
    const { line, col } = this.lc.linePos(offset);
    const err: CompileError = { file: this.file, line, column: col, message: this.via !== '' ? `${message} (${this.via})` : message };
    if (hint !== undefined) err.hint = hint;
    this.errors.push(err);
  }

  resolve(node: unknown): Node | null {
    let n = node;
    for (let i = 0; i < 100 && isAlias(n); i++) n = n.resolve(this.doc) ?? null;
    if (n === null || n === undefined) return null;
    return n as Node;
  }

  isNull(node: Node | null): boolean {
    return node === null || (isScalar(node) && node.value === null);
  }

  /** The entries of a mapping, merge keys (`<<`) resolved; explicit keys win over merged ones. */
  entries(node: Node, what: string): Entry[] | null {
    if (!isMap(node)) {
      this.error(node, `${what} must be a mapping`);
      return null;
    }
    const explicit: Entry[] = [];
    const merged: Entry[] = [];
    let mergeKeys = 0;
    const visit = (pair: Pair, into: Entry[], mergeInto: Entry[], top: boolean): void => {
      const keyNode = pair.key as Node;
      if (isScalar(keyNode) && (keyNode.value === '<<' || (typeof keyNode.value === 'symbol' && keyNode.value.description === '<<'))) {
        // internal/yaml.go collapseMergeAnchors: Vela collapses repeated `<<` keys into one list, with a warning.
        if (top && ++mergeKeys > 1) this.warn(keyNode, 'duplicate << keys in single YAML map');
        const target = this.resolve(pair.value);
        const sources = target !== null && isSeq(target) ? target.items.map((i) => this.resolve(i)) : [target];
        for (const source of sources) {
          if (source === null || !isMap(source)) {
            this.error(keyNode, 'a merge key (<<) must refer to a mapping', 'anchor a mapping (&name { … }) and merge that');
            continue;
          }
          for (const p of source.items) visit(p, mergeInto, mergeInto, false);
        }
        return;
      }
      if (!isScalar(keyNode) || keyNode.value === null || typeof keyNode.value === 'object') {
        this.error(keyNode, `${what} keys must be strings`);
        return;
      }
      into.push({ key: scalarText(keyNode), keyNode, value: this.resolve(pair.value), merged: into === merged });
    };
    for (const item of node.items) visit(item, explicit, merged, true);
    const seen = new Set(explicit.map((e) => e.key));
    const out = [...explicit];
    for (const e of merged) {
      if (!seen.has(e.key)) {
        seen.add(e.key);
        out.push(e);
      }
    }
    return out;
  }

  /** Entries, with unknown keys reported ({@link unknownKey}) and dropped. */
  known(node: Node, what: string, allowed: readonly string[]): Map<string, Entry> | null {
    const list = this.entries(node, what);
    if (list === null) return null;
    const out = new Map<string, Entry>();
    for (const e of list) {
      if (!allowed.includes(e.key)) {
        this.unknownKey(e.keyNode, e.key, what, allowed);
        continue;
      }
      out.set(e.key, e);
    }
    return out;
  }

  string(entry: Entry | undefined, what: string): string {
    if (entry === undefined || this.isNull(entry.value)) return '';
    const v = entry.value;
    if (v !== null && isScalar(v)) return scalarText(v);
    this.error(v, `${what} must be a string`, undefined, entry.keyNode);
    return '';
  }

  bool(entry: Entry | undefined, what: string): boolean {
    if (entry === undefined || this.isNull(entry.value)) return false;
    const v = entry.value;
    if (v !== null && isScalar(v)) {
      if (typeof v.value === 'boolean') return v.value;
      const text = scalarText(v).toLowerCase();
      if (['yes', 'on', 'y'].includes(text)) return true;
      if (['no', 'off', 'n'].includes(text)) return false;
    }
    this.error(v, `${what} must be true or false`, undefined, entry.keyNode);
    return false;
  }

  /** Vela's raw.StringSlice: a string or a list of strings. */
  strings(entry: Entry | undefined, what: string): string[] {
    if (entry === undefined || this.isNull(entry.value)) return [];
    const v = entry.value;
    if (v !== null && isScalar(v)) return [scalarText(v)];
    if (v !== null && isSeq(v)) {
      const out: string[] = [];
      for (const item of v.items) {
        const n = this.resolve(item);
        if (n !== null && isScalar(n) && n.value !== null) out.push(scalarText(n));
        else this.error(n, `${what} must be a list of strings`, undefined, v);
      }
      return out;
    }
    this.error(v, `${what} must be a string or a list of strings`, undefined, entry.keyNode);
    return [];
  }

  /** Vela's raw.StringSliceMap: a mapping of strings or a list of `KEY=VALUE`. */
  envMap(entry: Entry | undefined, what: string): Record<string, string> {
    const out: Record<string, string> = {};
    if (entry === undefined || this.isNull(entry.value)) return out;
    const v = entry.value;
    // compiler/types/raw/map.go StringSliceMap.UnmarshalYAML: a StringSlice first, and a
    // StringSlice accepts one string.
    if (v !== null && (isSeq(v) || isScalar(v))) {
      for (const item of isSeq(v) ? v.items : [v]) {
        const n = this.resolve(item);
        if (n === null || !isScalar(n)) {
          this.error(n, `${what} entries must be KEY=VALUE strings`, undefined, v);
          continue;
        }
        const text = scalarText(n);
        const eq = text.indexOf('=');
        if (eq < 0) {
          this.error(n, `${what} entry "${text}" is not KEY=VALUE`, 'write it as KEY=VALUE, or use a mapping');
          continue;
        }
        out[text.slice(0, eq)] = text.slice(eq + 1);
      }
      return out;
    }
    if (v !== null && isMap(v)) {
      for (const e of this.entries(v, what) ?? []) {
        if (e.value !== null && !isScalar(e.value)) {
          this.error(e.value, `${what} value of "${e.key}" must be a string`, 'quote it, or encode it as JSON in a string');
          continue;
        }
        out[e.key] = e.value === null || e.value.value === null ? '' : scalarText(e.value);
      }
      return out;
    }
    this.error(v, `${what} must be a mapping or a list of KEY=VALUE strings`, undefined, entry.keyNode);
    return out;
  }

  /** A YAML node as a plain JS value (for plugin parameters). */
  toJS(node: Node | null): unknown {
    if (node === null) return null;
    if (isScalar(node)) return node.value;
    if (isSeq(node)) return node.items.map((i) => this.toJS(this.resolve(i)));
    if (isMap(node)) {
      const out: Record<string, unknown> = {};
      for (const e of this.entries(node, 'parameter') ?? []) out[e.key] = this.toJS(e.value);
      return out;
    }
    return null;
  }

  list(entry: Entry | undefined, what: string): Node[] {
    if (entry === undefined || this.isNull(entry.value)) return [];
    const v = entry.value;
    if (v !== null && isSeq(v)) return v.items.map((i) => this.resolve(i)).filter((n): n is Node => n !== null);
    this.error(v, `${what} must be a list`, undefined, entry.keyNode);
    return [];
  }
}

export function scalarText(node: Node): string {
  if (!isScalar(node)) return '';
  const v = node.value;
  if (typeof v === 'string') return v;
  if (v === null || v === undefined) return '';
  // Go's yaml.v3 decodes any scalar into a string field with its source text (`1.50` stays `1.50`).
  if (typeof node.source === 'string' && node.type === 'PLAIN') return node.source;
  if (typeof v === 'symbol') return v.description ?? '';
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  return '';
}
