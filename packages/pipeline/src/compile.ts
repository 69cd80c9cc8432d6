/**
 * A compiler for Vela pipeline files (version "1"), following go-vela/server's
 * `compiler/types/yaml` and `compiler/native`, with every error located at file:line:column.
 */
import { isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node, type Pair } from 'yaml';
import { velaEnvironment, toVelaString, type EnvironmentInput } from './environment.ts';
import { EVAL_SUBSET, parseEval } from './eval.ts';
import { filepathMatch } from './glob.ts';
import { prepareBuild, sanitizeContainerId, type BuildIdentity } from './ids.ts';
import { parseImageReference } from './image.ts';
import {
  emptyBuild,
  emptyContainer,
  emptyRules,
  type Build,
  type CancelOptions,
  type Container,
  type Git,
  type Matcher,
  type Operator,
  type PullPolicy,
  type Rules,
  type Ruleset,
  type Secret,
  type Stage,
  type StepSecret,
  type Ulimit,
  type Volume,
} from './model.ts';
import { goRegExp, matchRuleset, rulesEmpty, type RuleData } from './ruleset.ts';
import { envsubst, velaLookup } from './substitute.ts';

/** One problem in a pipeline file, located where it is. Lines and columns are 1-based. */
export interface CompileError {
  file: string;
  line: number;
  column: number;
  message: string;
  /** What to do about it, when there is something obvious (`did you mean "commands"?`). */
  hint?: string;
}

/** Options of {@link compilePipeline}. */
export interface CompileOptions {
  /** The file name errors are reported under (also decides `.star`/`.py` refusal). */
  file: string;
  /**
   * Values of the secrets the pipeline declares, by secret name. When given, a declared secret
   * without a value is an error; when absent, values are left empty (validation only).
   */
  secrets?: Record<string, string>;
  /**
   * Extra variables for non-detached steps and secret origins, laid over everything else but
   * `PARAMETER_*` (Vela's local mode does this with the process environment).
   */
  environment?: Record<string, string>;
  /** Build, repo, user and server facts for the VELA_* environment ({@link velaEnvironment}). */
  metadata?: EnvironmentInput;
  /** The ids' org, repo and number; default: a local build (`localOrg_localRepo_1`). */
  identity?: BuildIdentity;
  /**
   * Add Vela's clone step (default false: Berth has no SCM). Even when true, the pipeline's
   * `metadata.clone: false` turns it off. A string sets the clone image.
   */
  clone?: boolean | string;
  /**
   * Compile-time rule data: when given, containers whose ruleset does not match are dropped (and
   * stages left empty), as Vela's compiler does for the build's branch, event, … Status rules are
   * ignored at this point (status `pending`). When absent, every container is kept.
   */
  ruleData?: RuleData;
  /**
   * Unknown keys are errors instead of warnings (Vela ignores them silently; Berth warns by
   * default, naming the closest known key).
   */
  strict?: boolean;
}

/**
 * The result of {@link compilePipeline}. Warnings (`file:line:column: message (hint)`) come with
 * either outcome.
 */
export type CompileResult = { ok: true; build: Build; warnings: string[] } | { ok: false; errors: CompileError[]; warnings: string[] };

/** Vela's default clone image (`target/vela-git-slim`). */
export const DEFAULT_CLONE_IMAGE = 'target/vela-git-slim:latest';
/** The image of Vela's init step, which runtimes do not pull or run. */
export const INIT_IMAGE = '#init';

const TOP_KEYS = ['version', 'metadata', 'environment', 'worker', 'secrets', 'services', 'stages', 'steps', 'templates', 'deployment', 'git'];
const METADATA_KEYS = ['template', 'clone', 'environment', 'auto_cancel', 'render_inline'];
const STEP_KEYS = [
  'name',
  'image',
  'commands',
  'entrypoint',
  'environment',
  'parameters',
  'secrets',
  'template',
  'ruleset',
  'pull',
  'detach',
  'privileged',
  'user',
  'ulimits',
  'volumes',
  'report_as',
  'id_request',
  'git',
  'artifacts',
];
const SERVICE_KEYS = ['name', 'image', 'entrypoint', 'environment', 'ports', 'pull', 'ulimits', 'user', 'ruleset'];
const STAGE_KEYS = ['name', 'needs', 'independent', 'environment', 'steps'];
const SECRET_KEYS = ['name', 'key', 'engine', 'type', 'origin', 'pull'];
const ORIGIN_KEYS = ['name', 'image', 'environment', 'parameters', 'secrets', 'pull', 'ruleset', 'id_request'];
const RULE_KEYS = ['branch', 'comment', 'event', 'path', 'repo', 'sender', 'status', 'tag', 'target', 'label', 'instance', 'eval'];
const RULESET_KEYS = [...RULE_KEYS, 'if', 'unless', 'matcher', 'operator', 'continue'];
const RULES_KEYS = [...RULE_KEYS, 'matcher', 'operator'];

/** Levenshtein distance, for "did you mean" hints. */
export function editDistance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0] ?? 0;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j] ?? 0;
      prev[j] = Math.min(up + 1, (prev[j - 1] ?? 0) + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return prev[b.length] ?? 0;
}

/** The closest candidate to `word` when it is close enough to be a likely typo. */
export function suggest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const d = editDistance(word.toLowerCase(), c);
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return bestDistance <= Math.max(2, Math.floor(word.length / 3)) ? best : undefined;
}

interface Entry {
  key: string;
  keyNode: Node;
  value: Node | null;
  /** The entry came from a merge key (`<<`). */
  merged: boolean;
}

class Ctx {
  readonly errors: CompileError[] = [];
  readonly warnings: string[] = [];
  readonly file: string;
  readonly lc: LineCounter;
  readonly doc: Document;
  readonly strict: boolean;
  constructor(file: string, lc: LineCounter, doc: Document, strict = false) {
    this.file = file;
    this.lc = lc;
    this.doc = doc;
    this.strict = strict;
  }

  /** A warning located like an error: `file:line:column: message (hint)`, each once. */
  warn(node: Node | null | undefined, message: string, hint?: string): void {
    const { line, col } = this.lc.linePos(node?.range?.[0] ?? 0);
    const text = `${this.file}:${line}:${col}: ${message}${hint !== undefined ? ` (${hint})` : ''}`;
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
    const err: CompileError = { file: this.file, line, column: col, message };
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

function scalarText(node: Node): string {
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

/** Where a compiled container came from, for errors found after transformation. */
interface Origin {
  /** null for the implicit init and clone steps. */
  node: Node | null;
  nameNode: Node | null;
  /** The `image` value, where image errors point. */
  imageNode: Node | null;
}

interface Parsed {
  container: Container;
  parameters: Record<string, unknown>;
  ownEnvironment: Record<string, string>;
  origin: Origin;
  template: boolean;
}

const PULL_VALUES: readonly string[] = ['always', 'not_present', 'on_start', 'never'];

function parsePull(ctx: Ctx, entry: Entry | undefined): PullPolicy {
  const text = ctx.string(entry, 'pull');
  if (text === '') return 'not_present';
  const lower = text.toLowerCase();
  if (lower === 'true') return 'always';
  if (lower === 'false') return 'not_present';
  if (PULL_VALUES.includes(text)) return text as PullPolicy;
  const s = suggest(text, PULL_VALUES);
  ctx.error(entry?.value, `invalid pull policy "${text}"`, `use one of always, not_present, on_start, never${s !== undefined ? ` (did you mean "${s}"?)` : ''}`, entry?.keyNode);
  return 'not_present';
}

function expandEvents(events: string[]): string[] {
  const out: string[] = [];
  for (const e of events) {
    if (e === 'pull_request') out.push('pull_request:opened', 'pull_request:synchronize', 'pull_request:reopened');
    else if (e === 'deployment') out.push('deployment:created');
    else if (e === 'comment') out.push('comment:created', 'comment:edited');
    else out.push(e);
  }
  return out;
}

function parseMatcher(ctx: Ctx, entry: Entry | undefined): Matcher | '' {
  const text = ctx.string(entry, 'matcher');
  if (text === '') return '';
  if (text === 'filepath' || text === 'regexp') return text;
  if (text === 'regex') return 'regexp';
  ctx.error(entry?.value, `invalid matcher "${text}"`, 'use filepath or regexp', entry?.keyNode);
  return '';
}

function parseOperator(ctx: Ctx, entry: Entry | undefined): Operator | '' {
  const text = ctx.string(entry, 'operator');
  if (text === '') return '';
  if (text.toLowerCase() === 'and' || text.toLowerCase() === 'or') return text.toLowerCase() as Operator;
  ctx.error(entry?.value, `invalid operator "${text}"`, 'use and or or', entry?.keyNode);
  return '';
}

function parseRuleLists(ctx: Ctx, keys: Map<string, Entry>, rules: Rules): void {
  for (const key of RULE_KEYS) {
    const entry = keys.get(key);
    if (entry === undefined) continue;
    if (key === 'eval') {
      // compiler/types/pipeline/ruleset.go MatchRules compiles it with expr-lang: check it now.
      const source = ctx.string(entry, 'ruleset eval');
      const parsed = parseEval(source);
      if (!parsed.ok) ctx.error(entry.value, `ruleset eval ${JSON.stringify(source)}: ${parsed.error}`, EVAL_SUBSET, entry.keyNode);
      rules.eval = source;
      continue;
    }
    let values = ctx.strings(entry, `ruleset ${key}`);
    if (key === 'event') values = expandEvents(values);
    (rules[key] as string[]).push(...values);
  }
}

function checkPatterns(ctx: Ctx, rules: Rules, node: Node): void {
  for (const key of RULE_KEYS) {
    if (key === 'eval') continue;
    for (const pattern of rules[key] as string[]) {
      try {
        if (rules.matcher === 'regexp') goRegExp(pattern);
        else filepathMatch(pattern, '');
      } catch (error) {
        ctx.error(node, `invalid ${key} pattern "${pattern}": ${(error as Error).message}`);
      }
    }
  }
}

/** Vela's `Ruleset.UnmarshalYAML`: short-form rules go to `if`; operator/matcher move onto each side. */
function parseRuleset(ctx: Ctx, entry: Entry | undefined): Ruleset {
  const ruleset: Ruleset = { if: emptyRules(), unless: emptyRules(), matcher: 'filepath', operator: 'and', continue: false };
  if (entry === undefined || ctx.isNull(entry.value) || entry.value === null) return ruleset;
  const keys = ctx.known(entry.value, 'ruleset', RULESET_KEYS);
  if (keys === null) return ruleset;
  const matcher = parseMatcher(ctx, keys.get('matcher')) || 'filepath';
  const operator = parseOperator(ctx, keys.get('operator')) || 'and';
  ruleset.continue = ctx.bool(keys.get('continue'), 'ruleset continue');
  const side = (name: 'if' | 'unless'): Rules | null => {
    const e = keys.get(name);
    if (e === undefined || e.value === null || ctx.isNull(e.value)) return null;
    const rules = emptyRules();
    const sideKeys = ctx.known(e.value, `ruleset ${name}`, RULES_KEYS);
    if (sideKeys === null) return rules;
    parseRuleLists(ctx, sideKeys, rules);
    rules.matcher = parseMatcher(ctx, sideKeys.get('matcher'));
    rules.operator = parseOperator(ctx, sideKeys.get('operator'));
    return rules;
  };
  const ifRules = side('if') ?? emptyRules();
  parseRuleLists(ctx, keys, ifRules);
  if (ifRules.operator === '') ifRules.operator = operator;
  if (ifRules.matcher === '') ifRules.matcher = matcher;
  ruleset.if = ifRules;
  const unlessRules = side('unless');
  if (unlessRules !== null) {
    if (unlessRules.operator === '') unlessRules.operator = operator;
    if (unlessRules.matcher === '') unlessRules.matcher = matcher;
    ruleset.unless = unlessRules;
  }
  checkPatterns(ctx, ruleset.if, entry.value);
  checkPatterns(ctx, ruleset.unless, entry.value);
  return ruleset;
}

function parseInt64(text: string): number | null {
  if (!/^[+-]?\d+$/.test(text)) return null;
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : null;
}

function parseUlimits(ctx: Ctx, entry: Entry | undefined): Ulimit[] {
  const out: Ulimit[] = [];
  for (const node of ctx.list(entry, 'ulimits')) {
    if (isScalar(node)) {
      const text = scalarText(node);
      const parts = text.split('=');
      if (parts.length !== 2) {
        ctx.error(node, `ulimit ${text} must contain 1 \`=\` (equal)`, 'write it as name=soft:hard, e.g. nofile=1024:2048');
        continue;
      }
      const limits = (parts[1] ?? '').split(':');
      if (limits.length > 2) {
        ctx.error(node, `ulimit ${text} can only contain 1 \`:\` (colon)`, 'write it as name=soft:hard');
        continue;
      }
      const soft = parseInt64(limits[0] ?? '');
      const hard = limits.length === 2 ? parseInt64(limits[1] ?? '') : soft;
      if (soft === null || hard === null) {
        ctx.error(node, `ulimit ${text} must have integer limits`, 'write it as name=soft:hard, e.g. nofile=1024:2048');
        continue;
      }
      out.push({ name: parts[0] ?? '', soft, hard });
      continue;
    }
    const keys = ctx.known(node, 'ulimit', ['name', 'soft', 'hard']);
    if (keys === null) continue;
    const num = (key: string): number => {
      const text = ctx.string(keys.get(key), `ulimit ${key}`);
      if (text === '') return 0;
      const n = parseInt64(text);
      if (n === null) ctx.error(keys.get(key)?.value, `ulimit ${key} must be an integer`);
      return n ?? 0;
    };
    const soft = num('soft');
    const hard = num('hard');
    out.push({ name: ctx.string(keys.get('name'), 'ulimit name'), soft, hard: hard === 0 ? soft : hard });
  }
  return out;
}

function parseVolumes(ctx: Ctx, entry: Entry | undefined): Volume[] {
  const out: Volume[] = [];
  for (const node of ctx.list(entry, 'volumes')) {
    if (isScalar(node)) {
      const text = scalarText(node);
      const parts = text.split(':');
      if (parts.length > 3) {
        ctx.error(node, `volume ${text} must contain at least 1 but no more than 2 \`:\`(colons)`, 'write it as source:destination:mode');
        continue;
      }
      const [source = '', destination = source, mode = 'ro'] = parts;
      out.push({ source, destination, access_mode: mode });
      continue;
    }
    const keys = ctx.known(node, 'volume', ['source', 'destination', 'access_mode']);
    if (keys === null) continue;
    const source = ctx.string(keys.get('source'), 'volume source');
    const destination = ctx.string(keys.get('destination'), 'volume destination') || source;
    out.push({ source, destination, access_mode: ctx.string(keys.get('access_mode'), 'volume access_mode') || 'ro' });
  }
  return out;
}

function parseStepSecrets(ctx: Ctx, entry: Entry | undefined): StepSecret[] {
  const out: StepSecret[] = [];
  if (entry !== undefined && entry.value !== null && isScalar(entry.value) && entry.value.value !== null) {
    const source = scalarText(entry.value);
    return [{ source, target: source.toUpperCase() }];
  }
  for (const node of ctx.list(entry, 'secrets')) {
    if (isScalar(node)) {
      const source = scalarText(node);
      out.push({ source, target: source.toUpperCase() });
      continue;
    }
    const keys = ctx.known(node, 'secret reference', ['source', 'target']);
    if (keys === null) continue;
    const source = ctx.string(keys.get('source'), 'secret source');
    const target = ctx.string(keys.get('target'), 'secret target');
    if (source === '' || target === '') {
      ctx.error(node, 'no secret source or target found', 'write { source: <declared secret>, target: <ENV_NAME> }');
      continue;
    }
    out.push({ source, target: target.toUpperCase() });
  }
  return out;
}

function parseGit(ctx: Ctx, entry: Entry | undefined): Git | null {
  if (entry === undefined || entry.value === null || ctx.isNull(entry.value)) return null;
  const keys = ctx.known(entry.value, 'git', ['token', 'repositories', 'permissions']);
  if (keys === null) return null;
  let tokenKeys = keys;
  const token = keys.get('token');
  if (token?.value != null) tokenKeys = ctx.known(token.value, 'git token', ['repositories', 'permissions']) ?? new Map<string, Entry>();
  const repositories = ctx.strings(tokenKeys.get('repositories'), 'git repositories');
  const permissions = ctx.envMap(tokenKeys.get('permissions'), 'git permissions');
  if (repositories.length === 0 && Object.keys(permissions).length === 0) return null;
  return { token: { repositories, permissions } };
}

function parseParameters(ctx: Ctx, entry: Entry | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (entry === undefined || entry.value === null || ctx.isNull(entry.value)) return out;
  for (const e of ctx.entries(entry.value, 'parameters') ?? []) out[e.key] = ctx.toJS(e.value);
  return out;
}

function nameOf(ctx: Ctx, keys: Map<string, Entry>, node: Node, what: string, fallback = ''): { name: string; nameNode: Node | null } {
  const entry = keys.get('name');
  const name = ctx.string(entry, `${what} name`) || fallback;
  if (name === '') ctx.error(node, `no name provided for ${what}`, `add name: <${what} name>`);
  return { name, nameNode: entry?.value ?? null };
}

function parseStep(ctx: Ctx, node: Node, kind: 'step' | 'service' | 'secret origin'): Parsed | null {
  const allowed = kind === 'step' ? STEP_KEYS : kind === 'service' ? SERVICE_KEYS : ORIGIN_KEYS;
  const keys = ctx.known(node, kind, allowed);
  if (keys === null) return null;
  const { name, nameNode } = nameOf(ctx, keys, node, kind);
  const template = keys.has('template');
  if (template) {
    ctx.error(keys.get('template')?.keyNode, `templates are not supported by Berth (step ${name})`, 'inline the template\'s steps in the pipeline');
  }
  const c = emptyContainer({ name });
  c.image = ctx.string(keys.get('image'), `${kind} image`);
  if (c.image === '' && !template) ctx.error(nameNode ?? node, `no image provided for ${kind} ${name}`, 'add image: <image reference>, e.g. alpine:3.20');
  c.commands = ctx.strings(keys.get('commands'), 'commands');
  c.entrypoint = ctx.strings(keys.get('entrypoint'), 'entrypoint');
  const ownEnvironment = ctx.envMap(keys.get('environment'), 'environment');
  c.environment = { ...ownEnvironment };
  c.pull = parsePull(ctx, keys.get('pull'));
  c.ruleset = parseRuleset(ctx, keys.get('ruleset'));
  c.secrets = parseStepSecrets(ctx, keys.get('secrets'));
  c.ulimits = parseUlimits(ctx, keys.get('ulimits'));
  c.volumes = parseVolumes(ctx, keys.get('volumes'));
  c.ports = ctx.strings(keys.get('ports'), 'ports');
  c.detach = kind === 'service' ? true : ctx.bool(keys.get('detach'), 'detach');
  c.privileged = ctx.bool(keys.get('privileged'), 'privileged');
  c.user = ctx.string(keys.get('user'), 'user');
  c.report_as = ctx.string(keys.get('report_as'), 'report_as');
  c.id_request = ctx.string(keys.get('id_request'), 'id_request');
  c.git = parseGit(ctx, keys.get('git'));
  const artifacts = keys.get('artifacts');
  if (artifacts?.value != null && !ctx.isNull(artifacts.value)) {
    const a = ctx.known(artifacts.value, 'artifacts', ['paths']);
    c.artifacts = { paths: ctx.strings(a?.get('paths'), 'artifacts paths') };
  }
  const parameters = parseParameters(ctx, keys.get('parameters'));
  if (
    kind === 'step' &&
    !template &&
    name !== 'clone' &&
    name !== 'init' &&
    c.commands.length === 0 &&
    Object.keys(ownEnvironment).length === 0 &&
    Object.keys(parameters).length === 0 &&
    c.secrets.length === 0 &&
    !c.detach
  ) {
    ctx.error(nameNode ?? node, `no commands, environment, parameters, secrets or template provided for step ${name}`, 'add commands: [...] (or parameters for a plugin)');
  }
  return { container: c, parameters, ownEnvironment, origin: { node, nameNode, imageNode: keys.get('image')?.value ?? null }, template };
}

function builtinStep(name: string, image: string): Parsed {
  return {
    container: emptyContainer({ name, image, pull: 'not_present' }),
    parameters: {},
    ownEnvironment: {},
    origin: { node: null, nameNode: null, imageNode: null },
    template: false,
  };
}

interface ParsedStage {
  stage: Stage;
  steps: Parsed[];
  node: Node;
  keyNode: Node | null;
  needsNode: Node | null;
  ownEnvironment: Record<string, string>;
}

function parseSteps(ctx: Ctx, entry: Entry | undefined, what: string): Parsed[] {
  const out: Parsed[] = [];
  const nodes = ctx.list(entry, what);
  if (entry !== undefined && nodes.length === 0 && !ctx.isNull(entry.value) && entry.value !== null && isSeq(entry.value)) {
    ctx.error(entry.keyNode, `${what} is empty`, 'add at least one step');
  }
  for (const node of nodes) {
    if (!isMap(node)) {
      ctx.error(node, `each of ${what} must be a mapping`, 'write - name: …\n  image: …');
      continue;
    }
    const parsed = parseStep(ctx, node, 'step');
    if (parsed !== null) out.push(parsed);
  }
  return out;
}

function parseSecrets(ctx: Ctx, entry: Entry | undefined, values: Record<string, string> | undefined): { secret: Secret; origin: Parsed | null; node: Node }[] {
  const out: { secret: Secret; origin: Parsed | null; node: Node }[] = [];
  for (const node of ctx.list(entry, 'secrets')) {
    const keys = ctx.known(node, 'secret', SECRET_KEYS);
    if (keys === null) continue;
    const originEntry = keys.get('origin');
    let origin: Parsed | null = null;
    if (originEntry?.value != null && !ctx.isNull(originEntry.value)) origin = parseStep(ctx, originEntry.value, 'secret origin');
    const secret: Secret = {
      name: ctx.string(keys.get('name'), 'secret name'),
      value: '',
      key: ctx.string(keys.get('key'), 'secret key'),
      engine: ctx.string(keys.get('engine'), 'secret engine'),
      type: ctx.string(keys.get('type'), 'secret type'),
      origin: origin?.container ?? null,
      pull: ctx.string(keys.get('pull'), 'secret pull'),
    };
    if (origin === null) {
      if (secret.name === '') {
        ctx.error(node, 'no name provided for secret', 'add name: <secret name>');
        continue;
      }
      if (secret.key === '') secret.key = secret.name;
      if (secret.engine === '') secret.engine = 'native';
      if (secret.type === '') secret.type = 'repo';
      if (secret.pull === '') secret.pull = 'build_start';
      if (!['native', 'vault'].includes(secret.engine)) ctx.error(keys.get('engine')?.value, `invalid secret engine "${secret.engine}"`, 'use native or vault');
      if (!['repo', 'org', 'shared'].includes(secret.type)) ctx.error(keys.get('type')?.value, `invalid secret type "${secret.type}"`, 'use repo, org or shared');
      if (!['build_start', 'step_start'].includes(secret.pull)) ctx.error(keys.get('pull')?.value, `invalid secret pull "${secret.pull}"`, 'use build_start or step_start');
      if (values !== undefined) {
        const value = values[secret.name];
        if (value === undefined) ctx.error(keys.get('name')?.value ?? node, `no value supplied for secret "${secret.name}"`, 'pass it in the secrets option');
        else secret.value = value;
      }
    }
    out.push({ secret, origin, node });
  }
  return out;
}

function parseStages(ctx: Ctx, entry: Entry): ParsedStage[] {
  const out: ParsedStage[] = [];
  if (entry.value === null || ctx.isNull(entry.value)) return out;
  const list = ctx.entries(entry.value, 'stages');
  if (list === null) return out;
  if (list.length === 0) ctx.error(entry.keyNode, 'stages is empty', 'add at least one stage');
  for (const e of list) {
    if (e.value === null || !isMap(e.value)) {
      ctx.error(e.value ?? e.keyNode, `stage ${e.key} must be a mapping`, 'write <stage>:\n  steps: [...]');
      continue;
    }
    const keys = ctx.known(e.value, `stage ${e.key}`, STAGE_KEYS);
    if (keys === null) continue;
    const name = ctx.string(keys.get('name'), 'stage name') || e.key;
    const needs = ctx.strings(keys.get('needs'), 'needs');
    const ownEnvironment = ctx.envMap(keys.get('environment'), 'environment');
    const stepsEntry = keys.get('steps');
    if (stepsEntry === undefined) ctx.error(e.keyNode, `stage ${name} has no steps`, 'add steps: [...]');
    const steps = parseSteps(ctx, stepsEntry, `stage ${name} steps`);
    if (needs.includes(name)) ctx.error(keys.get('needs')?.value, `stage ${name} references itself in 'needs' declaration`);
    out.push({
      stage: { name, needs, independent: ctx.bool(keys.get('independent'), 'independent'), environment: {}, steps: [] },
      steps,
      node: e.value,
      keyNode: e.keyNode,
      needsNode: keys.get('needs')?.value ?? null,
      ownEnvironment,
    });
  }
  return out;
}

function substituteContainer(ctx: Ctx, p: Parsed): void {
  const lookup = velaLookup(p.container.environment);
  const sub = (s: string): string => {
    try {
      return envsubst(s, lookup);
    } catch (error) {
      ctx.error(p.origin.node, `unable to substitute environment variables in step ${p.container.name}: ${(error as Error).message}`, 'escape a literal ${ as $${');
      return s;
    }
  };
  const c = p.container;
  c.name = sub(c.name);
  c.image = sub(c.image);
  c.commands = c.commands.map(sub);
  c.entrypoint = c.entrypoint.map(sub);
  c.user = sub(c.user);
  c.report_as = sub(c.report_as);
  c.environment = Object.fromEntries(Object.entries(c.environment).map(([k, v]) => [k, sub(v)]));
  c.volumes = c.volumes.map((v) => ({ source: sub(v.source), destination: sub(v.destination), access_mode: sub(v.access_mode) }));
  c.secrets = c.secrets.map((s) => ({ source: sub(s.source), target: sub(s.target) }));
  for (const side of [c.ruleset.if, c.ruleset.unless]) {
    for (const key of RULE_KEYS) {
      if (key !== 'eval') side[key] = (side[key] as string[]).map(sub);
    }
  }
}

function findCycle(stages: ParsedStage[]): string[] | null {
  const byName = new Map(stages.map((s) => [s.stage.name, s]));
  const state = new Map<string, 1 | 2>();
  const stack: string[] = [];
  const visit = (name: string): string[] | null => {
    const st = state.get(name);
    if (st === 2) return null;
    if (st === 1) return [...stack.slice(stack.indexOf(name)), name];
    state.set(name, 1);
    stack.push(name);
    for (const need of byName.get(name)?.stage.needs ?? []) {
      if (!byName.has(need) || need === name) continue;
      const cycle = visit(need);
      if (cycle !== null) return cycle;
    }
    stack.pop();
    state.set(name, 2);
    return null;
  };
  for (const s of stages) {
    const cycle = visit(s.stage.name);
    if (cycle !== null) return cycle;
  }
  return null;
}

/**
 * Compiles a Vela pipeline file (YAML, `version: "1"`) into a {@link Build}, the way go-vela/server's
 * native compiler does: init step (and clone step when enabled) first, environment layering
 * (pipeline → stage → step → VELA_* defaults → `PARAMETER_*`), `${VAR}` substitution in steps,
 * rulesets in short and long form, pull `true`/`false`, secrets, ulimits, volumes, YAML anchors and
 * merge keys, then ids as `prepareBuild` sets them.
 *
 * Never throws: every problem comes back as a {@link CompileError} with file, line and column.
 * Berth's deviations from Vela: unknown keys are errors (Vela ignores them) except top-level
 * `aliases` and `x-*` keys meant to hold anchors; templates, starlark, `render_inline` and ruleset
 * `eval` are refused; image references are validated; `needs` must name existing stages and
 * must not form a cycle; stages only get the implicit `clone` need when the clone step exists.
 */
export function compilePipeline(source: string, options: CompileOptions): CompileResult {
  const file = options.file;
  if (/\.(star|py)$/i.test(file)) {
    return { ok: false, errors: [{ file, line: 1, column: 1, message: 'starlark pipelines are not supported by Berth', hint: 'write the pipeline as YAML (version "1")' }], warnings: [] };
  }
  const lc = new LineCounter();
  const doc = parseDocument(source, { lineCounter: lc, merge: true, uniqueKeys: true, prettyErrors: false });
  const ctx = new Ctx(file, lc, doc, options.strict === true);
  if (doc.errors.length > 0) {
    for (const err of doc.errors) {
      const { line, col } = lc.linePos(err.pos[0]);
      ctx.errors.push({ file, line, column: col, message: `invalid YAML: ${err.message.split('\n')[0] ?? err.message}` });
    }
    return { ok: false, errors: ctx.errors, warnings: ctx.warnings };
  }
  const root = ctx.resolve(doc.contents);
  if (root === null || !isMap(root)) {
    ctx.error(root, 'a pipeline must be a YAML mapping with version and steps or stages', 'start with version: "1"');
    return { ok: false, errors: ctx.errors, warnings: ctx.warnings };
  }
  const all = ctx.entries(root, 'pipeline') ?? [];
  const top = new Map<string, Entry>();
  for (const e of all) {
    if (!TOP_KEYS.includes(e.key)) {
      // Anchors are parked under top-level keys (`aliases:`, `x-*:`, `step-anchor: &a`, or a
      // top-level `<<: &a`): those stay silent.
      const parked = e.key === 'aliases' || e.key.startsWith('x-') || e.key.startsWith('.') || e.merged || (e.value !== null && typeof e.value.anchor === 'string');
      if (!parked) ctx.unknownKey(e.keyNode, e.key, 'pipeline', TOP_KEYS);
      continue;
    }
    top.set(e.key, e);
  }

  const versionEntry = top.get('version');
  const version = ctx.string(versionEntry, 'version');
  if (versionEntry === undefined || version === '') {
    ctx.error(versionEntry?.keyNode ?? root, 'no "version:" YAML property provided', 'add version: "1" at the top of the file');
  } else if (version === 'legacy') {
    ctx.error(versionEntry.value, "version 'legacy' is no longer supported, please update your pipeline to use version '1'");
  } else if (version !== '1') {
    ctx.error(versionEntry.value, `pipeline version "${version}" is not supported`, 'use version: "1"');
  }
  const templates = top.get('templates');
  if (templates !== undefined) ctx.error(templates.keyNode, 'templates are not supported by Berth', 'inline the templates\' steps in the pipeline');

  // metadata
  const build = emptyBuild({ version });
  let metadataClone: boolean | null = null;
  let metadataEnvironment = ['steps', 'services', 'secrets'];
  const metadataEntry = top.get('metadata');
  if (metadataEntry?.value != null && !ctx.isNull(metadataEntry.value)) {
    const m = ctx.known(metadataEntry.value, 'metadata', METADATA_KEYS);
    if (m !== null) {
      build.metadata.template = ctx.bool(m.get('template'), 'metadata template');
      if (m.has('clone') && !ctx.isNull(m.get('clone')?.value ?? null)) metadataClone = ctx.bool(m.get('clone'), 'metadata clone');
      if (m.has('environment')) {
        metadataEnvironment = ctx.strings(m.get('environment'), 'metadata environment');
        for (const v of metadataEnvironment) {
          if (!['steps', 'services', 'secrets'].includes(v)) ctx.error(m.get('environment')?.value, `invalid metadata environment "${v}"`, 'use steps, services and/or secrets');
        }
      }
      if (ctx.bool(m.get('render_inline'), 'render_inline')) ctx.error(m.get('render_inline')?.keyNode, 'render_inline templates are not supported by Berth');
      const ac = m.get('auto_cancel');
      const autoCancel: CancelOptions = { running: false, pending: false, default_branch: false };
      if (ac?.value != null && !ctx.isNull(ac.value)) {
        const a = ctx.known(ac.value, 'auto_cancel', ['running', 'pending', 'default_branch']);
        if (a !== null) {
          autoCancel.pending = a.has('pending') ? ctx.bool(a.get('pending'), 'auto_cancel pending') : true;
          autoCancel.running = ctx.bool(a.get('running'), 'auto_cancel running');
          autoCancel.default_branch = ctx.bool(a.get('default_branch'), 'auto_cancel default_branch');
        }
      }
      build.metadata.auto_cancel = autoCancel;
    }
  }
  if (build.metadata.auto_cancel === null) build.metadata.auto_cancel = { running: false, pending: false, default_branch: false };
  build.metadata.environment = metadataEnvironment;
  const cloneWanted = options.clone !== undefined && options.clone !== false && metadataClone !== false;
  const cloneImage = typeof options.clone === 'string' ? options.clone : DEFAULT_CLONE_IMAGE;
  build.metadata.clone = cloneWanted;

  const globalEnvironment = ctx.envMap(top.get('environment'), 'environment');
  const workerEntry = top.get('worker');
  if (workerEntry?.value != null && !ctx.isNull(workerEntry.value)) {
    const w = ctx.known(workerEntry.value, 'worker', ['flavor', 'platform']);
    if (w !== null) build.worker = { flavor: ctx.string(w.get('flavor'), 'worker flavor'), platform: ctx.string(w.get('platform'), 'worker platform') };
  }
  const deploymentEntry = top.get('deployment');
  if (deploymentEntry?.value != null && !ctx.isNull(deploymentEntry.value)) {
    const d = ctx.known(deploymentEntry.value, 'deployment', ['targets', 'parameters', 'template']);
    if (d !== null) {
      if (d.has('template')) ctx.error(d.get('template')?.keyNode, 'deployment templates are not supported by Berth');
      build.deployment.targets = ctx.strings(d.get('targets'), 'deployment targets');
      const params = d.get('parameters');
      if (params?.value != null && !ctx.isNull(params.value)) {
        for (const p of ctx.entries(params.value, 'deployment parameters') ?? []) {
          if (p.value === null || ctx.isNull(p.value)) continue;
          const k = ctx.known(p.value, `deployment parameter ${p.key}`, ['description', 'type', 'required', 'options', 'min', 'max']);
          if (k === null) continue;
          const int = (key: string): number => parseInt64(ctx.string(k.get(key), key)) ?? 0;
          build.deployment.parameters[p.key] = {
            description: ctx.string(k.get('description'), 'description'),
            type: ctx.string(k.get('type'), 'type'),
            required: ctx.bool(k.get('required'), 'required'),
            options: ctx.strings(k.get('options'), 'options'),
            min: int('min'),
            max: int('max'),
          };
        }
      }
    }
  }
  build.git = parseGit(ctx, top.get('git'));

  // containers
  const stepsEntry = top.get('steps');
  const stagesEntry = top.get('stages');
  if (stepsEntry !== undefined && stagesEntry !== undefined) {
    ctx.error(stagesEntry.keyNode, 'stages and steps provided', 'use either steps or stages, not both');
  }
  if ((stepsEntry === undefined || ctx.isNull(stepsEntry.value)) && (stagesEntry === undefined || ctx.isNull(stagesEntry.value))) {
    ctx.error(stepsEntry?.keyNode ?? stagesEntry?.keyNode ?? root, 'no stages, steps or templates provided', 'add steps: [...]');
  }
  const services: Parsed[] = [];
  for (const node of ctx.list(top.get('services'), 'services')) {
    const parsed = parseStep(ctx, node, 'service');
    if (parsed !== null) services.push(parsed);
  }
  const secrets = parseSecrets(ctx, top.get('secrets'), options.secrets);
  const steps = stepsEntry !== undefined ? parseSteps(ctx, stepsEntry, 'steps') : [];
  const stages = stagesEntry !== undefined && stepsEntry === undefined ? parseStages(ctx, stagesEntry) : [];

  // needs
  const stageNames = new Set(stages.map((s) => s.stage.name));
  for (const s of stages) {
    for (const need of s.stage.needs) {
      if (need === s.stage.name || stageNames.has(need) || (need === 'clone' && cloneWanted)) continue;
      const hint = suggest(need, [...stageNames]);
      ctx.error(s.needsNode ?? s.keyNode, `stage ${s.stage.name} needs unknown stage "${need}"`, hint !== undefined ? `did you mean "${hint}"?` : `known stages: ${[...stageNames].join(', ')}`);
    }
  }
  const cycle = findCycle(stages);
  if (cycle !== null) {
    const first = stages.find((s) => s.stage.name === cycle[0]);
    ctx.error(first?.needsNode ?? first?.keyNode, `stages form a cycle through needs: ${cycle.join(' -> ')}`, 'remove one of the needs');
  }

  // implicit init (and clone) steps
  if (stages.length > 0) {
    const builtins: ParsedStage[] = [];
    const mk = (name: string, image: string): ParsedStage => ({
      stage: { name, needs: [], independent: false, environment: {}, steps: [] },
      steps: [builtinStep(name, image)],
      node: root,
      keyNode: null,
      needsNode: null,
      ownEnvironment: {},
    });
    builtins.push(mk('init', INIT_IMAGE));
    if (cloneWanted) builtins.push(mk('clone', cloneImage));
    for (const s of stages) {
      if (cloneWanted && s.stage.name !== 'clone' && s.stage.name !== 'init' && !s.stage.needs.includes('clone')) s.stage.needs.push('clone');
    }
    stages.unshift(...builtins);
  } else if (stepsEntry !== undefined) {
    const builtins = [builtinStep('init', INIT_IMAGE)];
    if (cloneWanted) builtins.push(builtinStep('clone', cloneImage));
    steps.unshift(...builtins);
  }

  // environment: pipeline → stage → step → VELA_* defaults → local extras → PARAMETER_*
  const defaults = velaEnvironment(options.metadata ?? {});
  const forSteps = metadataEnvironment.includes('steps') ? globalEnvironment : {};
  const forServices = metadataEnvironment.includes('services') ? globalEnvironment : {};
  const forSecrets = metadataEnvironment.includes('secrets') ? globalEnvironment : {};
  const extras = options.environment ?? {};
  const stepEnvironment = (p: Parsed, base: Record<string, string>, local: boolean): void => {
    const env = { ...base, ...p.container.environment, ...defaults };
    if (local) Object.assign(env, extras);
    for (const [k, v] of Object.entries(p.parameters)) {
      if (v === null || v === undefined) continue;
      env[`PARAMETER_${k.toUpperCase()}`] = toVelaString(v);
    }
    p.container.environment = env;
  };
  for (const p of services) p.container.environment = { ...forServices, ...p.container.environment, ...defaults };
  for (const s of secrets) if (s.origin !== null) stepEnvironment(s.origin, forSecrets, true);
  for (const p of steps) stepEnvironment(p, forSteps, !p.container.detach);
  for (const s of stages) {
    s.stage.environment = { ...forSteps, ...s.ownEnvironment, ...defaults };
    for (const p of s.steps) stepEnvironment(p, s.stage.environment, !p.container.detach);
  }
  for (const p of steps) substituteContainer(ctx, p);
  for (const s of stages) for (const p of s.steps) substituteContainer(ctx, p);

  // images
  for (const p of [...services, ...steps, ...stages.flatMap((s) => s.steps), ...secrets.flatMap((s) => (s.origin === null ? [] : [s.origin]))]) {
    const image = p.container.image;
    if (image === '' || image === INIT_IMAGE) continue;
    const parsed = parseImageReference(image);
    if (!parsed.ok) ctx.error(p.origin.imageNode ?? p.origin.nameNode ?? p.origin.node, `invalid image "${image}" for ${p.container.name}: ${parsed.error}`, 'use a reference such as alpine:3.20 or registry.example.com/team/tool:1.2');
  }

  // secret references
  const declared = new Set(secrets.map((s) => s.secret.name));
  // Secret origins (plugins) produce secrets whose names are only known at run time.
  const hasOrigins = secrets.some((s) => s.origin !== null);
  for (const p of [...steps, ...stages.flatMap((s) => s.steps), ...secrets.flatMap((s) => (s.origin === null ? [] : [s.origin]))]) {
    for (const ref of p.container.secrets) {
      if (declared.has(ref.source) || hasOrigins) continue;
      const hint = suggest(ref.source, [...declared]);
      ctx.error(p.origin.nameNode ?? p.origin.node, `step ${p.container.name} uses secret "${ref.source}", which is not declared`, hint !== undefined ? `did you mean "${hint}"?` : `declare it under the top-level secrets: key`);
    }
  }

  // transform (purge by compile-time rules, number)
  const ruleData = options.ruleData !== undefined ? { ...options.ruleData, status: 'pending' } : undefined;
  const keep = (p: Parsed): boolean => {
    if (ruleData === undefined) return true;
    try {
      // compiler/types/pipeline/container.go ContainerSlice.Purge: eval sees the container's environment.
      return matchRuleset(p.container.ruleset, { ...ruleData, env: p.container.environment });
    } catch (error) {
      ctx.error(p.origin.node, `unable to process ruleset for step ${p.container.name}: ${(error as Error).message}`);
      return false;
    }
  };
  let counter = 1;
  const number = (list: Parsed[]): Parsed[] => {
    const kept = list.filter(keep);
    for (const p of kept) p.container.number = counter++;
    return kept;
  };
  const keptSteps = number(steps);
  const keptStages: ParsedStage[] = [];
  for (const s of stages) {
    const kept = number(s.steps);
    if (kept.length === 0) continue;
    s.steps = kept;
    keptStages.push(s);
  }
  counter = 1;
  const keptServices = number(services);
  counter = 1;
  for (const s of secrets) if (s.origin !== null && keep(s.origin)) s.origin.container.number = counter++;

  // Names, after the purge as Vela's ValidatePipeline (compiler/native/validate.go
  // validatePipelineContainers): a duplicate that a ruleset drops for this build is fine.
  const hasRules = (p: Parsed): boolean => !rulesEmpty(p.container.ruleset.if) || !rulesEmpty(p.container.ruleset.unless);
  const duplicates = new Set<Parsed>();
  const reportAs = new Map<string, string>();
  const checkNames = (list: Parsed[], what: string): void => {
    const seen = new Map<string, Parsed>();
    for (const p of list) {
      const c = p.container;
      if (p.origin.node === null) continue;
      const at = p.origin.nameNode ?? p.origin.node;
      if (c.name === 'init' || (c.name === 'clone' && cloneWanted)) {
        ctx.error(at, `${what} name "${c.name}" is reserved for Vela's ${c.name} step`, c.name === 'clone' ? 'rename it, or set metadata.clone: false to replace the built-in clone step' : 'rename it');
        continue;
      }
      const first = seen.get(c.name);
      if (first !== undefined) {
        duplicates.add(p);
        if (ruleData === undefined && (hasRules(first) || hasRules(p))) {
          ctx.warn(at, `${what} \`${c.name}\` is defined twice, which works only if rulesets drop one of them for each build (check with an event, e.g. --event push)`);
        } else {
          ctx.error(at, `${what} \`${c.name}\` is already defined`, `give each ${what} a unique name`);
        }
      } else {
        seen.set(c.name, p);
      }
      if (c.report_as !== '') {
        const other = reportAs.get(c.report_as);
        if (other !== undefined) ctx.error(at, `report_as to ${c.report_as} for step ${c.name} is already targeted by step ${other}`);
        reportAs.set(c.report_as, c.name);
      }
    }
  };
  checkNames(keptSteps, 'step');
  checkNames(keptServices, 'service');
  const stageSeen = new Set<string>();
  for (const s of stages) {
    if (stageSeen.has(s.stage.name)) ctx.error(s.keyNode ?? s.node, `stage \`${s.stage.name}\` is already defined`, 'give each stage a unique name');
    stageSeen.add(s.stage.name);
    if (s.keyNode !== null && (s.stage.name === 'init' || (s.stage.name === 'clone' && cloneWanted))) {
      ctx.error(s.keyNode, `stage name "${s.stage.name}" is reserved for Vela's ${s.stage.name} stage`, 'rename it');
    }
  }
  for (const s of keptStages) checkNames(s.steps, 'step');

  if (ctx.errors.length > 0) {
    ctx.errors.sort((a, b) => a.line - b.line || a.column - b.column);
    return { ok: false, errors: ctx.errors, warnings: ctx.warnings };
  }

  build.steps = keptSteps.map((p) => p.container);
  build.services = keptServices.map((p) => p.container);
  build.stages = keptStages.map((s) => ({ ...s.stage, steps: s.steps.map((p) => p.container) }));
  build.secrets = secrets
    .filter((s) => s.origin === null || s.origin.container.number > 0 || ruleData === undefined)
    .map((s) => s.secret);
  const identity: BuildIdentity = options.identity ?? {
    org: options.metadata?.repo?.org ?? '',
    repo: options.metadata?.repo?.name ?? '',
    number: options.metadata?.build?.number ?? 0,
    local: true,
  };
  prepareBuild(build, identity);

  // Container ids that collide after Vela's name joining (stage `three_word_key` + step `build`
  // and stage `three` + step `word_key_build`), or after the runtime's sanitizing (`a b`, `a-b`),
  // would fail at run time with a name conflict. Vela refuses the first kind at compile time.
  const byId = new Map<string, { p: Parsed; label: string }>();
  const located = (p: Parsed): string => {
    const at = p.origin.nameNode ?? p.origin.node;
    return at === null ? '' : ` (line ${lc.linePos(at.range?.[0] ?? 0).line})`;
  };
  const claim = (p: Parsed, label: string): void => {
    if (duplicates.has(p)) return;
    const id = sanitizeContainerId(p.container.id, 'docker');
    const other = byId.get(id);
    if (other === undefined) {
      byId.set(id, { p, label });
      return;
    }
    ctx.error(p.origin.nameNode ?? p.origin.node ?? root, `${label} and ${other.label}${located(other.p)} get the same container id ${id}`, 'rename one of them');
  };
  for (const p of keptSteps) claim(p, `step "${p.container.name}"`);
  for (const s of keptStages) for (const p of s.steps) claim(p, `step "${p.container.name}" of stage "${s.stage.name}"`);
  for (const p of keptServices) claim(p, `service "${p.container.name}"`);
  if (ctx.errors.length > 0) return { ok: false, errors: ctx.errors, warnings: ctx.warnings };
  return { ok: true, build, warnings: ctx.warnings };
}
