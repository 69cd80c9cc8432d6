/**
 * Steps, services, secrets (with origins) and stages as Vela's `compiler/types/yaml` step.go,
 * service.go, secret.go, stage.go, ulimit.go and volume.go read them, each kept with the YAML
 * nodes it came from so later errors point at the right line.
 */
import { isMap, isScalar, type Node } from 'yaml';
import { emptyContainer, type Container, type Git, type PullPolicy, type Secret, type Stage, type StepSecret, type Ulimit, type Volume } from '../model.ts';
import { scalarText, type Ctx, type Entry } from './document.ts';
import { ORIGIN_KEYS, SECRET_KEYS, SERVICE_KEYS, STAGE_KEYS, STEP_KEYS, suggest } from './keys.ts';
import { parseRuleset } from './rules.ts';

/** Where a compiled container came from, for errors found after transformation. */
interface Origin {
  /** The document the nodes belong to (a template's, or null for the pipeline file's). */
  doc: Ctx | null;
  /** null for the implicit init and clone steps. */
  node: Node | null;
  nameNode: Node | null;
  /** The `image` value, where image errors point. */
  imageNode: Node | null;
}

export interface Parsed {
  container: Container;
  parameters: Record<string, unknown>;
  ownEnvironment: Record<string, string>;
  origin: Origin;
  /** The step's `template:` call, when it has one (expanded by templates.ts). */
  template: TemplateCall | null;
}

/** A step's `template:` key: which template, with which `vars`. */
interface TemplateCall {
  name: string;
  vars: Record<string, unknown>;
  node: Node;
}

/** The context that positions errors about `p`: its own document's. */
export function docOf(ctx: Ctx, p: Parsed): Ctx {
  return p.origin.doc ?? ctx;
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
  ctx.error(
    entry?.value,
    `invalid pull policy "${text}"`,
    `use one of always, not_present, on_start, never${s !== undefined ? ` (did you mean "${s}"?)` : ''}`,
    entry?.keyNode,
  );
  return 'not_present';
}

export function parseInt64(text: string): number | null {
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

export function parseGit(ctx: Ctx, entry: Entry | undefined): Git | null {
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

export function parseStep(ctx: Ctx, node: Node, kind: 'step' | 'service' | 'secret origin'): Parsed | null {
  const allowed = kind === 'step' ? STEP_KEYS : kind === 'service' ? SERVICE_KEYS : ORIGIN_KEYS;
  const keys = ctx.known(node, kind, allowed);
  if (keys === null) return null;
  const { name, nameNode } = nameOf(ctx, keys, node, kind);
  const template = parseTemplateCall(ctx, keys.get('template'));
  const c = emptyContainer({ name });
  c.image = ctx.string(keys.get('image'), `${kind} image`);
  if (c.image === '' && template === null)
    ctx.error(nameNode ?? node, `no image provided for ${kind} ${name}`, 'add image: <image reference>, e.g. alpine:3.20');
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
    template === null &&
    name !== 'clone' &&
    name !== 'init' &&
    c.commands.length === 0 &&
    Object.keys(ownEnvironment).length === 0 &&
    Object.keys(parameters).length === 0 &&
    c.secrets.length === 0 &&
    !c.detach
  ) {
    ctx.error(
      nameNode ?? node,
      `no commands, environment, parameters, secrets or template provided for step ${name}`,
      'add commands: [...] (or parameters for a plugin)',
    );
  }
  return {
    container: c,
    parameters,
    ownEnvironment,
    origin: { doc: ctx.via !== '' ? ctx : null, node, nameNode, imageNode: keys.get('image')?.value ?? null },
    template,
  };
}

export function builtinStep(name: string, image: string): Parsed {
  return {
    container: emptyContainer({ name, image, pull: 'not_present' }),
    parameters: {},
    ownEnvironment: {},
    origin: { doc: null, node: null, nameNode: null, imageNode: null },
    template: null,
  };
}

export interface ParsedStage {
  stage: Stage;
  steps: Parsed[];
  node: Node;
  keyNode: Node | null;
  needsNode: Node | null;
  ownEnvironment: Record<string, string>;
}

export function parseSteps(ctx: Ctx, entry: Entry | undefined, what: string): Parsed[] {
  const out: Parsed[] = [];
  const nodes = ctx.list(entry, what);
  // An empty list compiles: go-vela/server injects init (and clone) before ValidateYAML
  // (compiler/native/compile.go compileSteps), and its server then skips the build.
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

/** A declared secret, with its origin container when it has one. */
export interface SecretEntry {
  secret: Secret;
  origin: Parsed | null;
  node: Node;
}

export function parseSecrets(ctx: Ctx, entry: Entry | undefined, values: Record<string, string> | undefined): SecretEntry[] {
  const out: SecretEntry[] = [];
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
      if (!['repo', 'org', 'shared'].includes(secret.type))
        ctx.error(keys.get('type')?.value, `invalid secret type "${secret.type}"`, 'use repo, org or shared');
      if (!['build_start', 'step_start'].includes(secret.pull))
        ctx.error(keys.get('pull')?.value, `invalid secret pull "${secret.pull}"`, 'use build_start or step_start');
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

export function parseStages(ctx: Ctx, entry: Entry): ParsedStage[] {
  const out: ParsedStage[] = [];
  if (entry.value === null || ctx.isNull(entry.value)) return out;
  const list = ctx.entries(entry.value, 'stages');
  if (list === null) return out;
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

/** A step's `template: { name, vars }` (compiler/types/yaml/template.go StepTemplate). */
function parseTemplateCall(ctx: Ctx, entry: Entry | undefined): TemplateCall | null {
  if (entry === undefined || entry.value === null || ctx.isNull(entry.value)) return null;
  const keys = ctx.known(entry.value, 'step template', ['name', 'vars']);
  if (keys === null) return null;
  const name = ctx.string(keys.get('name'), 'template name');
  if (name === '') ctx.error(entry.value, "no name provided for the step's template", 'add name: <a name under templates:>');
  const varsEntry = keys.get('vars');
  const vars = varsEntry?.value != null && !ctx.isNull(varsEntry.value) ? ctx.toJS(varsEntry.value) : {};
  if (vars === null || typeof vars !== 'object' || Array.isArray(vars)) {
    ctx.error(varsEntry?.value, 'template vars must be a mapping');
    return { name, vars: {}, node: keys.get('name')?.value ?? entry.value };
  }
  return { name, vars: vars as Record<string, unknown>, node: keys.get('name')?.value ?? entry.value };
}
