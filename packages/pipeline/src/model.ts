/**
 * The compiled pipeline model: Vela's `compiler/types/pipeline` Go types as TypeScript
 * interfaces and zod schemas. Field names are Vela's JSON names (the Go `json` tags).
 *
 * Vela marshals almost every field with `omitempty`, so a compiled pipeline from a Vela
 * server may omit any of them; {@link parseBuild} fills every absent field with its zero
 * value ('' / 0 / false / [] / {}) so consumers never see `undefined`, and keeps unknown
 * fields as they are (a newer server may send fields this version does not know).
 */
import { z } from 'zod';

/** When a container's image is pulled (Vela `constants.Pull*`). Absent means `not_present`, Vela's default. */
export type PullPolicy = 'always' | 'not_present' | 'on_start' | 'never';

/** How ruleset patterns are compared: Go `filepath.Match` globs or Go regular expressions. */
export type Matcher = 'filepath' | 'regexp';

/** How the rules of one ruleset combine. */
export type Operator = 'and' | 'or';

/**
 * One side (`if` or `unless`) of a ruleset: each key lists patterns; a key with no patterns is ignored.
 *
 * Gotcha: since Vela v0.24 the compiler stores `operator`/`matcher` here (per side) and leaves
 * the ruleset-level ones empty; older servers set them on the {@link Ruleset}. `''` means
 * "inherit from the ruleset". `eval` is an expr-lang expression (see `parseEval` for the subset).
 */
export type Rules = z.output<Schemas['rules']>;

/**
 * When a container runs (Vela `pipeline.Ruleset`).
 *
 * Gotcha: `matcher`/`operator` here are the fallbacks for `if`/`unless` sides that leave theirs
 * empty; after parsing they default to `filepath`/`and`.
 */
export type Ruleset = z.output<Schemas['ruleset']>;

/** A secret injected into a container: the declared secret `source` exposed as env var `target`. */
export type StepSecret = z.output<Schemas['stepSecret']>;

/** A resource limit for a container (`ulimit`). */
export type Ulimit = z.output<Schemas['ulimit']>;

/** A bind mount: host `source` on container `destination`, `access_mode` `ro` or `rw` ('' = rw). */
export type Volume = z.output<Schemas['volume']>;

/** Git installation token request of a build or step. */
export type Git = z.output<Schemas['git']>;

/**
 * A container: a step, a service, the init step, or a secret origin (Vela `pipeline.Container`).
 *
 * Gotcha: `number` is the 1-based position Vela reports status under; `exit_code` is output, 0 in a
 * pipeline that has not run. `pull` is normalised to `not_present` when absent.
 */
export type Container = z.output<Schemas['container']>;

/**
 * A stage: a group of steps run in order, after the stages it `needs` (Vela `pipeline.Stage`).
 *
 * Gotcha: `independent` stages keep running when another stage fails. `done` is runtime-only
 * (Vela's `Done chan error`): never serialised, never set by parsing.
 */
export type Stage = z.output<Schemas['stage']> & {
  /** Runtime-only (Vela's `Done chan error`): never serialised, never set by parsing. */
  done?: Promise<void>;
};

/**
 * A secret the build may use (Vela `pipeline.Secret`).
 *
 * `origin` is the plugin container that produces external secrets, `null` for ordinary secrets.
 */
export type Secret = z.output<Schemas['secret']>;

/** Auto-cancel settings of the pipeline's metadata. */
export type CancelOptions = z.output<Schemas['cancelOptions']>;

/**
 * A compiled pipeline: what a Vela server hands a worker (Vela `pipeline.Build`).
 *
 * Gotcha: a build has `steps` or `stages`, never both. `environment` accepts Vela's
 * `KEY=VALUE` list form as well as a map; it is always a map after parsing.
 */
export type Build = z.output<Schemas['build']>;

// ---------------------------------------------------------------------------------------------
// Schemas. Every field is `nullish` (Go may send null for nil slices/maps/pointers, and omits
// empty values) and transforms to its zero value.

/** Builds either a loose (unknown keys kept) or strict (unknown keys are issues) object schema. */
type ObjectFactory = <S extends z.core.$ZodLooseShape>(shape: S) => z.ZodObject<S, z.core.$loose>;

const str = () =>
  z
    .string()
    .nullish()
    .transform((v) => v ?? '');
const bool = () =>
  z
    .boolean()
    .nullish()
    .transform((v) => v ?? false);
const int = () =>
  z
    .number()
    .int()
    .nullish()
    .transform((v) => v ?? 0);
const strings = () =>
  z
    .array(z.string())
    .nullish()
    .transform((v) => v ?? []);
/** Vela's Ruletype: a list of patterns; a single string is accepted as a one-item list. */
const ruletype = () =>
  z
    .union([z.array(z.string()), z.string()], { error: 'a rule must be a string or a list of strings' })
    .nullish()
    .transform((v) => (v === null || v === undefined ? [] : typeof v === 'string' ? [v] : v));

/** Vela's raw.StringSliceMap: a map of strings or a list of `KEY=VALUE` strings. */
const envMap = () =>
  z
    .union([z.record(z.string(), z.string()), z.array(z.string())], {
      error: 'environment must be a map of strings or a list of KEY=VALUE strings',
    })
    .nullish()
    .transform((v, ctx): Record<string, string> => {
      if (v === null || v === undefined) return {};
      if (!Array.isArray(v)) return { ...v };
      const out: Record<string, string> = {};
      v.forEach((item, i) => {
        const eq = item.indexOf('=');
        if (eq < 0) {
          ctx.issues.push({
            code: 'custom',
            message: `environment entry ${JSON.stringify(item)} is not KEY=VALUE`,
            path: [i],
            input: item,
          });
          return;
        }
        out[item.slice(0, eq)] = item.slice(eq + 1);
      });
      return out;
    });

const pull = () =>
  z
    .union([z.enum(['always', 'not_present', 'on_start', 'never', '']), z.boolean()], {
      error: 'pull must be one of always, not_present, on_start, never',
    })
    .nullish()
    .transform((v): PullPolicy => {
      if (v === true) return 'always';
      if (v === false || v === null || v === undefined || v === '') return 'not_present';
      return v;
    });

const nullable = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? null);

/** An object schema that is filled with zero values when absent or null. */
const zeroed = <T extends z.ZodType>(schema: T) => z.preprocess((v) => v ?? {}, schema);

/** True for null, '', 0, false, [] and objects whose values are all zero (Go's `Empty()` checks). */
function isZeroDeep(value: unknown): boolean {
  if (value === null || value === undefined || value === '' || value === 0 || value === false) return true;
  if (Array.isArray(value)) return value.length === 0;
  if (typeof value === 'object') return Object.values(value as Record<string, unknown>).every(isZeroDeep);
  return false;
}

function makeSchemas(obj: ObjectFactory) {
  const rules = obj({
    branch: ruletype(),
    comment: ruletype(),
    event: ruletype(),
    path: ruletype(),
    repo: ruletype(),
    sender: ruletype(),
    status: ruletype(),
    tag: ruletype(),
    target: ruletype(),
    label: ruletype(),
    instance: ruletype(),
    eval: str(),
    operator: z
      .enum(['and', 'or', ''])
      .nullish()
      .transform((v) => v ?? ''),
    matcher: z
      .enum(['filepath', 'regexp', 'regex', ''])
      .nullish()
      .transform((v): Matcher | '' => (v === 'regex' ? 'regexp' : (v ?? ''))),
  });
  const ruleset = obj({
    if: zeroed(rules),
    unless: zeroed(rules),
    matcher: z
      .enum(['filepath', 'regexp', 'regex', ''])
      .nullish()
      .transform((v): Matcher => (v === 'regex' || v === 'regexp' ? 'regexp' : 'filepath')),
    operator: z
      .enum(['and', 'or', ''])
      .nullish()
      .transform((v): Operator => (v === 'or' ? 'or' : 'and')),
    continue: bool(),
  });
  const stepSecret = obj({ source: str(), target: str() });
  const ulimit = obj({ name: str(), soft: int(), hard: int() });
  const volume = obj({ source: str(), destination: str(), access_mode: str() });
  const artifacts = obj({ paths: strings() });
  const git = obj({
    token: zeroed(
      obj({
        repositories: strings(),
        permissions: z
          .record(z.string(), z.string())
          .nullish()
          .transform((v) => v ?? {}),
      }),
    ),
  });
  const container = obj({
    id: str(),
    commands: strings(),
    detach: bool(),
    directory: str(),
    entrypoint: strings(),
    environment: envMap(),
    exit_code: int(),
    image: str(),
    name: str(),
    needs: strings(),
    networks: strings(),
    number: int(),
    ports: strings(),
    privileged: bool(),
    pull: pull(),
    ruleset: zeroed(ruleset),
    secrets: z
      .array(stepSecret)
      .nullish()
      .transform((v) => v ?? []),
    artifacts: zeroed(artifacts),
    ulimits: z
      .array(ulimit)
      .nullish()
      .transform((v) => v ?? []),
    volumes: z
      .array(volume)
      .nullish()
      .transform((v) => v ?? []),
    user: str(),
    report_as: str(),
    id_request: str(),
    git: nullable(git),
  });
  const containers = () =>
    z
      .array(container)
      .nullish()
      .transform((v) => v ?? []);
  const stage = obj({
    name: str(),
    needs: strings(),
    independent: bool(),
    environment: envMap(),
    steps: containers(),
  });
  const secret = obj({
    name: str(),
    value: str(),
    key: str(),
    engine: str(),
    type: str(),
    // Vela always writes an origin (`{"ruleset":{"if":{},"unless":{}}}`); an empty one means none.
    origin: z.preprocess((v) => (isZeroDeep(v) ? null : v), nullable(container)),
    pull: str(),
  });
  const cancelOptions = obj({ running: bool(), pending: bool(), default_branch: bool() });
  const metadata = obj({
    template: bool(),
    clone: bool(),
    environment: strings(),
    auto_cancel: nullable(cancelOptions),
  });
  const worker = obj({ flavor: str(), platform: str() });
  const parameter = obj({
    description: str(),
    type: str(),
    required: bool(),
    options: strings(),
    min: int(),
    max: int(),
  });
  const deployment = obj({
    targets: strings(),
    parameters: z
      .record(z.string(), parameter)
      .nullish()
      .transform((v) => v ?? {}),
  });
  const build = obj({
    id: str(),
    version: str(),
    token: str(),
    token_exp: int(),
    metadata: zeroed(metadata),
    git: nullable(git),
    environment: envMap(),
    worker: zeroed(worker),
    deployment: zeroed(deployment),
    secrets: z
      .array(secret)
      .nullish()
      .transform((v) => v ?? []),
    services: containers(),
    stages: z
      .array(stage)
      .nullish()
      .transform((v) => v ?? []),
    steps: containers(),
  });
  return {
    rules,
    ruleset,
    stepSecret,
    ulimit,
    volume,
    artifacts,
    git,
    container,
    stage,
    secret,
    cancelOptions,
    metadata,
    worker,
    parameter,
    deployment,
    build,
  };
}

type Schemas = ReturnType<typeof makeSchemas>;
let loose: Schemas | undefined;
let strict: Schemas | undefined;

/**
 * The schemas, each set built on its first parse: zod builds each object with dozens of methods,
 * which `berth exec`, `validate` and an idle worker (who parse nothing) should not pay for at
 * start-up, and a worker (whose parses are never strict) not for the strict set at all (~0.45 MB
 * of heap once a build has been parsed).
 */
function looseSchemas(): Schemas {
  loose ??= makeSchemas((shape) => z.looseObject(shape));
  return loose;
}

/** The strict twin only finds unknown keys; its objects are typed as the loose ones. */
function strictSchemas(): Schemas {
  strict ??= makeSchemas(((shape: z.core.$ZodLooseShape) => z.strictObject(shape)) as unknown as ObjectFactory);
  return strict;
}

/** One problem found while parsing: a JSON path (`steps[2].pull`) and what is wrong there. */
export interface ParseIssue {
  path: string;
  message: string;
}

/**
 * The result of {@link parseBuild} and friends: never throws.
 *
 * `unknownFields` lists the paths of fields this model does not know (kept in `value`); it is
 * filled only in strict mode, where those fields are also reported as issues.
 */
export type ParseResult<T> = { ok: true; value: T; unknownFields: string[] } | { ok: false; issues: ParseIssue[]; unknownFields: string[] };

/** Options of {@link parseBuild}. */
export interface ParseOptions {
  /** Report fields this model does not know as issues (default false: keep them silently). */
  strict?: boolean;
}

/** Formats a zod path as `steps[2].ruleset.if.branch`. */
function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else out += out === '' ? String(p) : `.${String(p)}`;
  }
  return out === '' ? '(root)' : out;
}

function toIssues(error: z.ZodError): ParseIssue[] {
  const issues: ParseIssue[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) issues.push({ path: formatPath([...issue.path, key]), message: 'unknown field' });
    } else {
      issues.push({ path: formatPath(issue.path), message: issue.message });
    }
  }
  return issues;
}

/**
 * Parses with the loose schema `which` picks, then, for a strict parse, the strict one. Without
 * zod's compiled fast path (`jitless`): a pipeline is parsed once per build, and the functions zod
 * would generate for each object schema (`new Function`) would stay in the heap (~90 KB).
 */
function parseWith<T>(which: (schemas: Schemas) => z.ZodType, json: unknown, options?: ParseOptions): ParseResult<T> {
  const result = which(looseSchemas()).safeParse(json, { jitless: true });
  if (!result.success) return { ok: false, issues: toIssues(result.error), unknownFields: [] };
  if (options?.strict === true) {
    const strictResult = which(strictSchemas()).safeParse(json, { jitless: true });
    if (!strictResult.success) {
      const issues = toIssues(strictResult.error);
      return { ok: false, issues, unknownFields: issues.filter((i) => i.message === 'unknown field').map((i) => i.path) };
    }
  }
  return { ok: true, value: result.data as T, unknownFields: [] };
}

/**
 * Parses a compiled pipeline (the JSON a Vela server sends, or {@link compilePipeline}'s output).
 *
 * Never throws: returns every problem with its path. Absent and `null` fields become zero values;
 * unknown fields are kept, and with `strict: true` are reported as issues (and in `unknownFields`).
 * Gotcha: this checks shape only; use {@link validateBuild} for cross-field rules (steps and stages
 * both present, duplicate names, unknown `needs`).
 */
export function parseBuild(json: unknown, options?: ParseOptions): ParseResult<Build> {
  return parseWith<Build>((schemas) => schemas.build, json, options);
}

/** Parses one compiled {@link Container}, like {@link parseBuild}. */
export function parseContainer(json: unknown, options?: ParseOptions): ParseResult<Container> {
  return parseWith<Container>((schemas) => schemas.container, json, options);
}

/** Parses one {@link Ruleset}, like {@link parseBuild}. */
export function parseRuleset(json: unknown, options?: ParseOptions): ParseResult<Ruleset> {
  return parseWith<Ruleset>((schemas) => schemas.ruleset, json, options);
}

/** An empty {@link Rules} (every list empty, operator and matcher inherited). */
export function emptyRules(): Rules {
  return {
    branch: [],
    comment: [],
    event: [],
    path: [],
    repo: [],
    sender: [],
    status: [],
    tag: [],
    target: [],
    label: [],
    instance: [],
    eval: '',
    operator: '',
    matcher: '',
  };
}

/** An empty {@link Ruleset}: the container runs while the build has not failed. */
export function emptyRuleset(): Ruleset {
  return { if: emptyRules(), unless: emptyRules(), matcher: 'filepath', operator: 'and', continue: false };
}

/** A {@link Container} with every field at its zero value, overridden by `fields`. */
export function emptyContainer(fields: Partial<Container> = {}): Container {
  return {
    id: '',
    commands: [],
    detach: false,
    directory: '',
    entrypoint: [],
    environment: {},
    exit_code: 0,
    image: '',
    name: '',
    needs: [],
    networks: [],
    number: 0,
    ports: [],
    privileged: false,
    pull: 'not_present',
    ruleset: emptyRuleset(),
    secrets: [],
    artifacts: { paths: [] },
    ulimits: [],
    volumes: [],
    user: '',
    report_as: '',
    id_request: '',
    git: null,
    ...fields,
  };
}

/** A {@link Build} with every field at its zero value, overridden by `fields`. */
export function emptyBuild(fields: Partial<Build> = {}): Build {
  return {
    id: '',
    version: '',
    token: '',
    token_exp: 0,
    metadata: { template: false, clone: false, environment: [], auto_cancel: null },
    git: null,
    environment: {},
    worker: { flavor: '', platform: '' },
    deployment: { targets: [], parameters: {} },
    secrets: [],
    services: [],
    stages: [],
    steps: [],
    ...fields,
  };
}

/** Keys Go marshals even when empty (no `omitempty` in Vela's json tags), per object kind. */
const ALWAYS_KEYS = new Set(['metadata', 'git', 'worker', 'deployment', 'ruleset', 'artifacts', 'if', 'unless', 'token']);

function isZero(value: unknown): boolean {
  if (value === null || value === undefined || value === '' || value === 0 || value === false) return true;
  if (Array.isArray(value)) return value.length === 0;
  return false;
}

function omitEmpty(value: unknown, parentKey: string): unknown {
  if (Array.isArray(value)) return value.map((v) => omitEmpty(v, parentKey));
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, raw] of Object.entries(value as Record<string, unknown>)) {
    if (key === 'done' && parentKey === 'stages') continue;
    // A container's git pointer has omitempty; the build's does not.
    const always = ALWAYS_KEYS.has(key) && !(key === 'git' && parentKey !== '') && !(key === 'token' && (raw === null || typeof raw !== 'object'));
    // The ruleset-level matcher/operator are only fallbacks (Vela >= 0.24 leaves them empty).
    if (parentKey === 'ruleset' && ((key === 'matcher' && raw === 'filepath') || (key === 'operator' && raw === 'and'))) continue;
    // Maps of user data (environment, permissions) keep their entries as they are.
    const isDataMap = key === 'environment' || key === 'permissions';
    const v = isDataMap && raw !== null && typeof raw === 'object' && !Array.isArray(raw) ? raw : omitEmpty(raw, key);
    if (always) {
      out[key] = v ?? null;
      continue;
    }
    // A non-nil pointer to an empty struct is still written by Go (`"auto_cancel": {}`).
    if (key === 'auto_cancel' && v !== null && typeof v === 'object') {
      out[key] = v;
      continue;
    }
    if (isZero(v)) continue;
    if (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0) continue;
    out[key] = v;
  }
  return out;
}

/**
 * A build as Vela's Go code marshals it: zero-valued fields left out (`omitempty`), except those Vela
 * always writes (`metadata`, `git` (null when unset), `worker`, `deployment`, each container's
 * `ruleset` and `artifacts`, each ruleset's `if` and `unless`). A ruleset-level `matcher: filepath` /
 * `operator: and` (the defaults) is left out too. Unknown fields are kept.
 *
 * Gotcha: `parseBuild(marshalBuild(b))` gives back `b` (zero values refilled); `done` is dropped.
 */
export function marshalBuild(build: Build): Record<string, unknown> {
  return omitEmpty(build, '') as Record<string, unknown>;
}
