/**
 * Templates, as go-vela/server's `compiler/native/expand.go` `ExpandSteps` expands them: a step
 * with `template: { name, vars }` is replaced by the steps of the named template, rendered with
 * Go `text/template` (`compiler/template/native/render.go`), each named `<step>_<template step>`;
 * the template's secrets, services and environment join the pipeline's where their names are new;
 * a template may call templates it declares itself, down to a maximum depth.
 *
 * Reading a template is the caller's business (a {@link TemplateLoader}): this package does no I/O.
 */
import { isMap, LineCounter, parseDocument, type Node } from 'yaml';
import { matchRuleset, type RuleData } from '../ruleset.ts';
import { renderGoTemplate, TemplateError, velaFunctions } from '../template/go-template.ts';
import { docOf, parseSecrets, parseStages, parseStep, parseSteps, type Parsed, type ParsedStage, type SecretEntry } from './containers.ts';
import type { Ctx, Entry } from './document.ts';
import { TOP_KEYS } from './keys.ts';

/** A template a pipeline declares under `templates:` (Vela `yaml.Template`). */
export interface TemplateReference {
  name: string;
  /** `github.com/org/repo/path.yml[@ref]`, or a path for `type: file`. */
  source: string;
  /** `github` (the default) or `file`. */
  type: string;
  /** `go` (the default, also `golang`) or `starlark`. */
  format: string;
}

/** What a {@link TemplateLoader} returns: the template's text and the file errors point into, or why not. */
export type TemplateLoad = { ok: true; file: string; text: string } | { ok: false; message: string; hint?: string };

/**
 * Reads a template's text. Called once per use; it must not throw. The worker maps
 * `--template-file NAME:PATH`, resolves `type: file` against the pipeline's directory, and fetches
 * or refuses remote sources.
 */
export type TemplateLoader = (template: TemplateReference) => TemplateLoad;

/** Where a `type: github` template lives (go-vela/server compiler/registry `Source`). */
export interface RemoteTemplateSource {
  /** The host the source names (`github.com`); Vela fetches from its configured GitHub whatever it says. */
  host: string;
  org: string;
  repo: string;
  /** The file's path in the repository. */
  path: string;
  /** The ref after `@` (branch, tag or commit); empty for the repository's default branch. */
  ref: string;
}

/**
 * Parses `github.com/org/repo/path/to/file.yml[@ref]` as go-vela/server
 * compiler/registry/github/parse.go `Parse` does: the host, then org, repo and the rest as the
 * path; a ref after `@` in the path. Returns an error message for fewer than three parts.
 */
export function parseTemplateSource(source: string): { ok: true; source: RemoteTemplateSource } | { ok: false; message: string } {
  let rest = source.trim().replace(/^[a-z][a-z0-9+.-]*:\/\//i, '');
  const slash = rest.indexOf('/');
  const host = slash < 0 ? rest : rest.slice(0, slash);
  rest = slash < 0 ? '' : rest.slice(slash + 1);
  const parts = rest.replace(/^\/+/, '').split('/');
  const org = parts[0] ?? '';
  const repo = parts[1] ?? '';
  let file = parts.slice(2).join('/');
  if (parts.length < 3 || org === '' || repo === '' || file === '')
    return { ok: false, message: `invalid template source ${source}, must contain org/repo/path_to_template` };
  let ref = '';
  const at = file.indexOf('@');
  if (at >= 0) {
    ref = file.slice(at + 1).split('@')[0] ?? '';
    file = file.slice(0, at);
  }
  return { ok: true, source: { host, org, repo, path: file, ref } };
}

/** Vela's default `VELA_MAX_TEMPLATE_DEPTH`. */
export const DEFAULT_TEMPLATE_DEPTH = 3;

interface Declared extends TemplateReference {
  node: Node;
  doc: Ctx;
  /** The declaration's own `vars` (used by render_inline). */
  vars: Record<string, unknown>;
}

/** The pipeline's (or a template's) `templates:` list, by name. */
export function parseTemplates(ctx: Ctx, entry: Entry | undefined): Map<string, Declared> {
  const out = new Map<string, Declared>();
  for (const node of ctx.list(entry, 'templates')) {
    const keys = ctx.known(node, 'template', ['name', 'source', 'type', 'format', 'vars']);
    if (keys === null) continue;
    const name = ctx.string(keys.get('name'), 'template name');
    if (name === '') {
      ctx.error(node, 'no name provided for template', 'add name: <template name>');
      continue;
    }
    const type = ctx.string(keys.get('type'), 'template type') || 'github';
    if (type !== 'github' && type !== 'file') ctx.error(keys.get('type')?.value, `unsupported template type: ${type}`, 'use github or file');
    const varsNode = keys.get('vars')?.value ?? null;
    const vars = varsNode !== null && !ctx.isNull(varsNode) ? ctx.toJS(varsNode) : {};
    const plain = vars !== null && typeof vars === 'object' && !Array.isArray(vars) ? (vars as Record<string, unknown>) : {};
    out.set(name, {
      name,
      source: ctx.string(keys.get('source'), 'template source'),
      type,
      format: ctx.string(keys.get('format'), 'template format'),
      node,
      doc: ctx,
      vars: plain,
    });
  }
  return out;
}

/** What expansion needs from the compile: where templates come from and how steps are judged. */
export interface ExpandState {
  load: TemplateLoader | undefined;
  maxDepth: number;
  /** The build's rule data: a calling step its ruleset drops is not expanded (Vela purges it first). */
  ruleData: RuleData | undefined;
  /** The environment a step's template sees through `vela "…"`. */
  stepEnvironment: (p: Parsed) => Record<string, string>;
  secretValues: Record<string, string> | undefined;
  /** The pipeline's secrets, services and environment, which templates add to. */
  secrets: SecretEntry[];
  services: Parsed[];
  environment: Record<string, string>;
}

/** Replaces every step that calls a template by the template's steps (see the module comment). */
export function expandSteps(ctx: Ctx, steps: Parsed[], templates: Map<string, Declared>, state: ExpandState, depth: number): Parsed[] {
  const out: Parsed[] = [];
  for (const p of steps) {
    const call = p.template;
    if (call === null) {
      out.push(p);
      continue;
    }
    const d = docOf(ctx, p);
    const name = p.container.name;
    if (state.ruleData !== undefined) {
      try {
        if (!matchRuleset(p.container.ruleset, { ...state.ruleData, status: 'pending', env: state.stepEnvironment(p) })) continue;
      } catch (error) {
        d.error(p.origin.node, `unable to process ruleset for step ${name}: ${(error as Error).message}`);
        continue;
      }
    }
    if (depth <= 0) {
      d.error(
        call.node,
        `max template depth of ${state.maxDepth} exceeded (step ${name} calls template ${call.name})`,
        'a template that calls itself, directly or through others, never ends; check the templates: each template declares',
      );
      continue;
    }
    const declared = templates.get(call.name);
    if (declared === undefined) {
      d.error(
        call.node,
        `missing template source for template ${call.name} in pipeline for step ${name}`,
        `declare it under templates: (name, source, type), or map it with --template-file ${call.name}:<path>`,
      );
      continue;
    }
    const rendered = renderTemplate(
      ctx,
      declared,
      state,
      { ...call.vars, VELA_TEMPLATE_NAME: call.name },
      state.stepEnvironment(p),
      name,
      `template ${call.name} used by step "${name}" at ${d.where(call.node)}`,
    );
    if (rendered === null) continue;
    const { child, top } = rendered;
    let inner = top.has('steps') ? parseSteps(child, top.get('steps'), 'template steps') : [];
    for (const s of inner) s.container.name = `${name}_${s.container.name}`;
    const nested = parseTemplates(child, top.get('templates'));
    if (inner.some((s) => s.template !== null)) inner = expandSteps(child, inner, nested, state, depth - 1);
    mergeTemplate(child, top, state, false);
    out.push(...inner);
  }
  return out;
}

/** A template's secrets, services and environment join the pipeline's (only new names, unless `all`). */
function mergeTemplate(child: Ctx, top: Map<string, Entry>, state: ExpandState, all: boolean): void {
  for (const s of parseSecrets(child, top.get('secrets'), state.secretValues)) {
    const known = state.secrets.some(
      (x) =>
        (s.secret.name !== '' && x.secret.name === s.secret.name) ||
        (s.origin !== null && x.origin !== null && x.origin.container.name === s.origin.container.name),
    );
    if (all || !known) state.secrets.push(s);
  }
  for (const node of child.list(top.get('services'), 'services')) {
    const service = parseStep(child, node, 'service');
    if (service !== null && (all || !state.services.some((x) => x.container.name === service.container.name))) state.services.push(service);
  }
  for (const [k, v] of Object.entries(child.envMap(top.get('environment'), 'environment'))) if (all || !(k in state.environment)) state.environment[k] = v;
}

/** Loads, renders and parses one template; errors are reported and give null. */
function renderTemplate(
  ctx: Ctx,
  declared: Declared,
  state: ExpandState,
  vars: Record<string, unknown>,
  environment: Record<string, string>,
  stepName: string,
  via: string,
): { child: Ctx; top: Map<string, Entry> } | null {
  const format = declared.format || 'go';
  if (format === 'starlark') {
    declared.doc.error(
      declared.node,
      `template ${declared.name} is a Starlark template, which Berth cannot render (no maintained Starlark interpreter runs on Node)`,
      'render it with the Vela CLI, or rewrite it as a Go template',
    );
    return null;
  }
  if (format !== 'go' && format !== 'golang') {
    declared.doc.error(declared.node, `format of ${format} is unsupported for template ${declared.name}`, 'use go (or golang)');
    return null;
  }
  const load: TemplateLoad = state.load?.(declared) ?? {
    ok: false,
    message: `template ${declared.name} (${declared.source}) cannot be read: no template loader was given`,
  };
  if (!load.ok) {
    declared.doc.error(declared.node, load.message, load.hint);
    return null;
  }
  let text: string;
  try {
    text = renderGoTemplate(load.text, vars, velaFunctions(environment, stepName));
  } catch (error) {
    if (!(error instanceof TemplateError)) throw error;
    ctx.errors.push({ file: load.file, line: error.line, column: 1, message: `unable to render template ${declared.name}: ${error.message} (${via})` });
    return null;
  }
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, merge: true, uniqueKeys: true, prettyErrors: false });
  const child = ctx.child(`${load.file} (rendered)`, lc, doc, via);
  if (doc.errors.length > 0) {
    for (const err of doc.errors) child.error(null, `invalid YAML after rendering: ${err.message.split('\n')[0] ?? err.message}`);
    return null;
  }
  const root = child.resolve(doc.contents);
  if (root === null || !isMap(root)) {
    child.error(root, 'a template must render to a YAML mapping with steps');
    return null;
  }
  const top = new Map<string, Entry>();
  for (const e of child.entries(root, 'template') ?? []) {
    if (TOP_KEYS.includes(e.key)) top.set(e.key, e);
    else if (!e.merged && (e.value === null || typeof e.value.anchor !== 'string')) child.unknownKey(e.keyNode, e.key, 'template', TOP_KEYS);
  }
  return { child, top };
}

/**
 * `metadata.render_inline: true`: every declared template is rendered as a whole pipeline and its
 * steps (or stages), services, secrets and environment join the pipeline, names prefixed with the
 * template's name (compiler/native/compile.go compileInline).
 */
export function renderInline(
  ctx: Ctx,
  templates: Map<string, Declared>,
  state: ExpandState,
  environment: Record<string, string>,
  depth: number,
): { steps: Parsed[]; stages: ParsedStage[] } {
  const out: { steps: Parsed[]; stages: ParsedStage[] } = { steps: [], stages: [] };
  for (const t of templates.values()) {
    if (depth <= 0) {
      t.doc.error(t.node, `max template depth of ${state.maxDepth} exceeded (template ${t.name})`, 'a template that renders itself inline never ends');
      return out;
    }
    const rendered = renderTemplate(
      ctx,
      t,
      state,
      { ...t.vars, VELA_TEMPLATE_NAME: t.name },
      environment,
      t.name,
      `template ${t.name} rendered inline from ${t.doc.where(t.node)}`,
    );
    if (rendered === null) continue;
    const { child, top } = rendered;
    const nested = parseTemplates(child, top.get('templates'));
    if (nested.size > 0 && top.has('metadata')) {
      const inner = renderInline(child, nested, state, environment, depth - 1);
      out.steps.push(...inner.steps);
      out.stages.push(...inner.stages);
    }
    const steps = top.has('steps') ? parseSteps(child, top.get('steps'), 'template steps') : [];
    for (const s of steps) s.container.name = `${t.name}_${s.container.name}`;
    const stages = top.has('stages') ? parseStages(child, top.get('stages') as Entry) : [];
    for (const st of stages) {
      st.stage.name = `${t.name}_${st.stage.name}`;
      for (const s of st.steps) s.container.name = `${t.name}_${s.container.name}`;
    }
    mergeTemplate(child, top, state, true);
    out.steps.push(...steps);
    out.stages.push(...stages);
    if (out.steps.length > 0 && out.stages.length > 0) {
      t.doc.error(t.node, `invalid template ${t.name} provided: templates cannot mix stages and steps`);
      return out;
    }
  }
  return out;
}
