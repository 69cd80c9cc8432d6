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
import { docOf, parseSecrets, parseStep, parseSteps, type Parsed, type SecretEntry } from './containers.ts';
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

/** Vela's default `VELA_MAX_TEMPLATE_DEPTH`. */
export const DEFAULT_TEMPLATE_DEPTH = 3;

interface Declared extends TemplateReference {
  node: Node;
  doc: Ctx;
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
    out.set(name, { name, source: ctx.string(keys.get('source'), 'template source'), type, format: ctx.string(keys.get('format'), 'template format'), node, doc: ctx });
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
      d.error(call.node, `max template depth of ${state.maxDepth} exceeded (step ${name} calls template ${call.name})`, 'a template that calls itself, directly or through others, never ends; check the templates: each template declares');
      continue;
    }
    const declared = templates.get(call.name);
    if (declared === undefined) {
      d.error(call.node, `missing template source for template ${call.name} in pipeline for step ${name}`, `declare it under templates: (name, source, type), or map it with --template-file ${call.name}:<path>`);
      continue;
    }
    const format = declared.format || 'go';
    if (format === 'starlark') {
      declared.doc.error(declared.node, `template ${call.name} is a Starlark template, which Berth cannot render (no maintained Starlark interpreter runs on Node)`, 'render it with the Vela CLI, or rewrite it as a Go template');
      continue;
    }
    if (format !== 'go' && format !== 'golang') {
      declared.doc.error(declared.node, `format of ${format} is unsupported for template ${call.name}`, 'use go (or golang)');
      continue;
    }
    const load: TemplateLoad = state.load?.(declared) ?? { ok: false, message: `template ${call.name} (${declared.source}) cannot be read: no template loader was given` };
    if (!load.ok) {
      declared.doc.error(declared.node, load.message, load.hint);
      continue;
    }
    const via = `template ${call.name} used by step "${name}" at ${d.where(call.node)}`;
    let text: string;
    try {
      text = renderGoTemplate(load.text, { ...call.vars, VELA_TEMPLATE_NAME: call.name }, velaFunctions(state.stepEnvironment(p), name));
    } catch (error) {
      if (!(error instanceof TemplateError)) throw error;
      ctx.errors.push({ file: load.file, line: error.line, column: 1, message: `unable to render template ${call.name}: ${error.message} (${via})` });
      continue;
    }
    const lc = new LineCounter();
    const doc = parseDocument(text, { lineCounter: lc, merge: true, uniqueKeys: true, prettyErrors: false });
    const child = ctx.child(`${load.file} (rendered)`, lc, doc, via);
    if (doc.errors.length > 0) {
      for (const err of doc.errors) child.error(null, `invalid YAML after rendering: ${err.message.split('\n')[0] ?? err.message}`);
      continue;
    }
    const root = child.resolve(doc.contents);
    if (root === null || !isMap(root)) {
      child.error(root, 'a template must render to a YAML mapping with steps');
      continue;
    }
    const top = new Map<string, Entry>();
    for (const e of child.entries(root, 'template') ?? []) {
      if (TOP_KEYS.includes(e.key)) top.set(e.key, e);
      else if (!e.merged && (e.value === null || typeof e.value.anchor !== 'string')) child.unknownKey(e.keyNode, e.key, 'template', TOP_KEYS);
    }
    let inner = top.has('steps') ? parseSteps(child, top.get('steps'), 'template steps') : [];
    for (const s of inner) s.container.name = `${name}_${s.container.name}`;
    const nested = parseTemplates(child, top.get('templates'));
    if (inner.some((s) => s.template !== null)) inner = expandSteps(child, inner, nested, state, depth - 1);
    for (const s of parseSecrets(child, top.get('secrets'), state.secretValues)) {
      const known = state.secrets.some((x) => (s.secret.name !== '' && x.secret.name === s.secret.name) || (s.origin !== null && x.origin !== null && x.origin.container.name === s.origin.container.name));
      if (!known) state.secrets.push(s);
    }
    for (const node of child.list(top.get('services'), 'services')) {
      const service = parseStep(child, node, 'service');
      if (service !== null && !state.services.some((x) => x.container.name === service.container.name)) state.services.push(service);
    }
    for (const [k, v] of Object.entries(child.envMap(top.get('environment'), 'environment'))) if (!(k in state.environment)) state.environment[k] = v;
    out.push(...inner);
  }
  return out;
}
