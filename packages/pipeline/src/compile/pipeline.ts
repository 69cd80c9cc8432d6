/**
 * A compiler for Vela pipeline files (version "1"), following go-vela/server's
 * `compiler/types/yaml` and `compiler/native`, with every error located at file:line:column.
 */
import { isMap, LineCounter, parseDocument } from 'yaml';
import { velaEnvironment, toVelaString, type EnvironmentInput } from '../environment.ts';
import { prepareBuild, type BuildIdentity } from '../ids.ts';
import { parseImageReference } from '../image.ts';
import { emptyBuild, type Build, type CancelOptions } from '../model.ts';
import { matchRuleset, type RuleData } from '../ruleset.ts';
import { skipEmptyBuild } from '../skip.ts';
import { builtinStep, parseGit, parseInt64, parseSecrets, parseStages, parseStep, parseSteps, type Parsed, type ParsedStage } from './containers.ts';
import { checkContainerIds, checkNames, checkNeeds } from './checks.ts';
import { Ctx, type CompileError, type Entry } from './document.ts';
import { METADATA_KEYS, suggest, TOP_KEYS } from './keys.ts';
import { renderGoTemplate, TemplateError, velaFunctions } from '../template/go-template.ts';
import { substituteContainer } from './substitution.ts';
import { DEFAULT_TEMPLATE_DEPTH, expandSteps, parseTemplates, renderInline, type ExpandState, type TemplateLoader } from './templates.ts';

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
  /**
   * Reads the templates steps call (`template: { name, vars }`); see {@link TemplateLoader}.
   * Without it, a step that calls a template is an error naming the template.
   */
  templates?: TemplateLoader;
  /** How deep templates may call templates (Vela's `VELA_MAX_TEMPLATE_DEPTH`, default 3). */
  templateDepth?: number;
  /**
   * `go` (or `golang`): the file itself is a Go template, rendered before it is read (Vela's
   * pipeline type). `starlark` is refused. Default `yaml`.
   */
  pipelineType?: string;
}

/**
 * The result of {@link compilePipeline}. Warnings (`file:line:column: message (hint)`) come with
 * either outcome.
 */
export type CompileResult = { ok: true; build: Build; warnings: string[] } | { ok: false; errors: CompileError[]; warnings: string[] };

/** Vela's default clone image (`target/vela-git-slim`). */
const DEFAULT_CLONE_IMAGE = 'target/vela-git-slim:latest';
/** The image of Vela's init step, which runtimes do not pull or run. */
const INIT_IMAGE = '#init';

/**
 * Compiles a Vela pipeline file (YAML; any non-empty version but `legacy`) into a {@link Build},
 * the way go-vela/server's native compiler does: init step (and clone step when enabled) first,
 * environment layering (pipeline → stage → step → VELA_* defaults → `PARAMETER_*`), `${VAR}`
 * substitution into each step's YAML text, rulesets in short and long form, pull `true`/`false`,
 * secrets, ulimits, volumes, YAML anchors and merge keys, then ids as `prepareBuild` sets them. A
 * pipeline with nothing to run compiles to init (and clone) with a `nothing to run` warning.
 *
 * Never throws: every problem comes back as a {@link CompileError} with file, line and column.
 * Berth's deviations from Vela (warnings for unknown keys and undeclared step secrets, image and
 * `needs` checks, …) are listed in the package README.
 */
export function compilePipeline(source: string, options: CompileOptions): CompileResult {
  const result = compileSource(source, options);
  return result.ok ? result : { ...result, errors: withTemplateNote(source, options, result.errors) };
}

/**
 * A file with `{{ … }}` that fails as plain YAML is most likely a Go template compiled without
 * its pipeline type (go-vela/server compiler/native/parse.go Parse renders templates only for
 * type `go`): say so first, at the first `{{`.
 */
function withTemplateNote(source: string, options: CompileOptions, errors: CompileError[]): CompileError[] {
  const type = (options.pipelineType ?? '').toLowerCase();
  if (type !== '' && type !== 'yaml') return errors;
  const at = source.search(/\{\{[\s\S]*?\}\}/);
  if (at < 0) return errors;
  const before = source.slice(0, at);
  const line = before.split('\n').length;
  const column = at - before.lastIndexOf('\n');
  return [
    {
      file: options.file,
      line,
      column,
      message: 'the file looks like a Go template ({{ … }}) but was read as plain YAML',
      hint: 'compile it as a Go template: pipeline type go (berth validate/compile/exec --pipeline-type go, as in the Vela CLI)',
    },
    ...errors,
  ];
}

function compileSource(source: string, options: CompileOptions): CompileResult {
  const file = options.file;
  const pipelineType = (options.pipelineType ?? '').toLowerCase();
  if (pipelineType === 'starlark' || /\.(star|py)$/i.test(file)) {
    return {
      ok: false,
      errors: [
        {
          file,
          line: 1,
          column: 1,
          message: 'Starlark pipelines are not supported by Berth (no maintained Starlark interpreter runs on Node)',
          hint: 'write the pipeline as YAML (version "1"), or as a Go template with --pipeline-type go',
        },
      ],
      warnings: [],
    };
  }
  if (!['', 'yaml', 'go', 'golang'].includes(pipelineType)) {
    return {
      ok: false,
      errors: [{ file, line: 1, column: 1, message: `pipeline type "${options.pipelineType ?? ''}" is not supported`, hint: 'use yaml (the default) or go' }],
      warnings: [],
    };
  }
  if (pipelineType === 'go' || pipelineType === 'golang') {
    // compiler/native/parse.go: a Go pipeline is rendered (RenderBuild) before it is read.
    try {
      source = renderGoTemplate(source, {}, velaFunctions({ ...velaEnvironment(options.metadata ?? {}), ...options.environment }, ''));
    } catch (error) {
      if (!(error instanceof TemplateError)) throw error;
      return {
        ok: false,
        errors: [{ file, line: error.line, column: 1, message: `unable to render the pipeline as a Go template: ${error.message}` }],
        warnings: [],
      };
    }
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
      const parked =
        e.key === 'aliases' || e.key.startsWith('x-') || e.key.startsWith('.') || e.merged || (e.value !== null && typeof e.value.anchor === 'string');
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
    // internal/yaml.go ParseYAML refuses "legacy" alone; compiler/native/validate.go ValidateYAML
    // only requires a non-empty version, so "1.0", "2", … compile as "1" does.
    ctx.error(versionEntry.value, "version 'legacy' is no longer supported, please update your pipeline to use version '1'");
  }
  const templates = parseTemplates(ctx, top.get('templates'));

  // metadata
  const build = emptyBuild({ version });
  let metadataClone: boolean | null = null;
  let renderInlineWanted = false;
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
          if (!['steps', 'services', 'secrets'].includes(v))
            ctx.error(m.get('environment')?.value, `invalid metadata environment "${v}"`, 'use steps, services and/or secrets');
        }
      }
      renderInlineWanted = ctx.bool(m.get('render_inline'), 'render_inline');
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
  // No steps or stages is not an error: go-vela/server's compileSteps injects init (and clone)
  // before ValidateYAML, whose "no stages, steps or templates provided" then never fires
  // (compiler/native/compile.go, validate.go); the server skips the build (see skipEmptyBuild).
  const services: Parsed[] = [];
  for (const node of ctx.list(top.get('services'), 'services')) {
    const parsed = parseStep(ctx, node, 'service');
    if (parsed !== null) services.push(parsed);
  }
  const secrets = parseSecrets(ctx, top.get('secrets'), options.secrets);
  let steps = stepsEntry !== undefined ? parseSteps(ctx, stepsEntry, 'steps') : [];
  const stages = stagesEntry !== undefined && stepsEntry === undefined ? parseStages(ctx, stagesEntry) : [];

  // templates (compiler/native/expand.go ExpandSteps, ExpandStages)
  const ruleData = options.ruleData !== undefined ? { ...options.ruleData, status: 'pending' } : undefined;
  const defaults = velaEnvironment(options.metadata ?? {});
  const forSteps = metadataEnvironment.includes('steps') ? globalEnvironment : {};
  const expansion: ExpandState = {
    load: options.templates,
    maxDepth: options.templateDepth ?? DEFAULT_TEMPLATE_DEPTH,
    ruleData,
    stepEnvironment: (p) => ({ ...forSteps, ...p.ownEnvironment, ...defaults }),
    secretValues: options.secrets,
    secrets,
    services,
    environment: globalEnvironment,
  };
  if (renderInlineWanted) {
    // compiler/native/validate.go ValidateYAML: render_inline and step templates do not mix.
    for (const p of [...steps, ...stages.flatMap((s) => s.steps)]) {
      if (p.template !== null)
        ctx.error(
          p.template.node,
          `step ${p.container.name}: cannot combine render_inline and a step that references a template`,
          "remove render_inline, or the step's template:",
        );
    }
    const inline = renderInline(ctx, templates, expansion, { ...globalEnvironment, ...defaults }, expansion.maxDepth);
    steps.push(...inline.steps);
    stages.push(...inline.stages);
    if (steps.length > 0 && stages.length > 0)
      ctx.error(root, 'stages and steps provided after rendering the inline templates', 'use either steps or stages, in the pipeline and its templates');
  }
  steps = expandSteps(ctx, steps, templates, expansion, expansion.maxDepth);
  for (const s of stages) s.steps = expandSteps(ctx, s.steps, templates, expansion, expansion.maxDepth);

  checkNeeds(ctx, stages, cloneWanted);

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
  } else {
    const builtins = [builtinStep('init', INIT_IMAGE)];
    if (cloneWanted) builtins.push(builtinStep('clone', cloneImage));
    steps.unshift(...builtins);
  }

  // environment: pipeline → stage → step → VELA_* defaults → local extras → PARAMETER_*
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
    // `${KEY}` left by compile-time substitution is filled at run time (a step's outputs, go-vela/worker
    // executor/linux/build.go ExecBuild: Substitute after outputs.Process); Vela's compiler checks only
    // that an image is given (go-vela/server compiler/native/validate.go). The rest of the reference
    // must still be valid: each `${…}` is checked as a plain name component.
    const parsed = parseImageReference(image.includes('${') ? imageTemplateProbe(image) : image);
    if (!parsed.ok)
      ctx.error(
        p.origin.imageNode ?? p.origin.nameNode ?? p.origin.node,
        `invalid image "${image}" for ${p.container.name}: ${parsed.error}`,
        'use a reference such as alpine:3.20 or registry.example.com/team/tool:1.2',
      );
  }

  // transform (purge by compile-time rules, number)
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

  // secret references: go-vela/server's compiler never checks a step's secrets against the
  // secrets block (compiler/native/validate.go), and go-vela/worker executor/linux/secret.go
  // injectSecrets skips one it has no value for. Berth warns, for the containers that run.
  const declared = new Set(secrets.map((s) => s.secret.name));
  // Secret origins (plugins) produce secrets whose names are only known at run time.
  const hasOrigins = secrets.some((s) => s.origin !== null);
  const keptOrigins = secrets.flatMap((s) => (s.origin !== null && (ruleData === undefined || s.origin.container.number > 0) ? [s.origin] : []));
  for (const p of [...keptSteps, ...keptStages.flatMap((s) => s.steps), ...keptOrigins]) {
    for (const ref of p.container.secrets) {
      if (declared.has(ref.source) || hasOrigins) continue;
      const hint = suggest(ref.source, [...declared]);
      ctx.warn(
        p.origin.nameNode ?? p.origin.node,
        `step ${p.container.name} uses secret "${ref.source}", which is not declared under secrets: (Vela compiles it, and the step runs without that variable)`,
        hint !== undefined ? `did you mean "${hint}"?` : `declare it under the top-level secrets: key`,
      );
    }
  }

  const duplicates = checkNames(ctx, { services: keptServices, steps: keptSteps, stages, keptStages }, cloneWanted, ruleData === undefined);

  if (ctx.errors.length > 0) {
    ctx.errors.sort((a, b) => a.line - b.line || a.column - b.column);
    return { ok: false, errors: ctx.errors, warnings: ctx.warnings };
  }

  build.steps = keptSteps.map((p) => p.container);
  build.services = keptServices.map((p) => p.container);
  build.stages = keptStages.map((s) => ({ ...s.stage, steps: s.steps.map((p) => p.container) }));
  build.secrets = secrets.filter((s) => s.origin === null || s.origin.container.number > 0 || ruleData === undefined).map((s) => s.secret);
  const identity: BuildIdentity = options.identity ?? {
    org: options.metadata?.repo?.org ?? '',
    repo: options.metadata?.repo?.name ?? '',
    number: options.metadata?.build?.number ?? 0,
    local: true,
  };
  prepareBuild(build, identity);

  checkContainerIds(ctx, { services: keptServices, steps: keptSteps, keptStages }, duplicates, root);
  if (ctx.errors.length > 0) return { ok: false, errors: ctx.errors, warnings: ctx.warnings };
  const skip = skipEmptyBuild(build);
  if (skip !== '')
    ctx.warn(stepsEntry?.keyNode ?? stagesEntry?.keyNode ?? root, `nothing to run: ${skip}`, "Vela's server marks such a build skipped and runs nothing");
  return { ok: true, build, warnings: ctx.warnings };
}

/** `image` with each `${…}` (not `$${`, an escaped `$`) replaced by a valid name component, to check the rest of a run-time template. */
function imageTemplateProbe(image: string): string {
  return image.replace(/\$\$|\$\{[^}]*\}/g, (m) => (m === '$$' ? '$$' : 'x'));
}
