/**
 * `${VAR}` substitution in a step, in the order Vela's compiler does it
 * (go-vela/server compiler/native/substitute.go `SubstituteSteps`): the step is written as YAML
 * (`yaml.Marshal`), the variables of its environment are substituted into that text
 * (drone/envsubst `Eval`), and the text is read back into the step (`yaml.Unmarshal`). So a value
 * can break the YAML around it (`image: x:${EMPTY}` reads back as `x:`, a mapping, and the step is
 * refused), a `'` ends a single-quoted string, and so on, as in Vela.
 *
 * Each top-level key of the step is written and substituted on its own; a key whose text did not
 * change keeps its value as it was, so only what a substitution touched is read again.
 */
import { isMap, isScalar, LineCounter, parseDocument, type YAMLMap } from 'yaml';
import type { Rules } from '../model.ts';
import { envsubst, velaLookup } from '../substitute.ts';
import { docOf, parseStep, type Parsed } from './containers.ts';
import { Ctx } from './document.ts';
import { RULE_KEYS } from './keys.ts';
import { FlowList, yamlV3Mapping, type YamlValue } from './yaml-v3.ts';

/** compiler/types/yaml/ruleset.go `Rules` as yaml.v3 writes it: lists in flow style, `omitempty`. */
function rulesYaml(r: Rules): Record<string, YamlValue | FlowList | undefined> {
  const out: Record<string, YamlValue | FlowList | undefined> = {};
  for (const key of RULE_KEYS) {
    if (key === 'eval') continue;
    const list = r[key] as string[];
    if (list.length > 0) out[key] = new FlowList(list);
  }
  out.eval = r.eval || undefined;
  out.operator = r.operator || undefined;
  out.matcher = r.matcher || undefined;
  return out;
}

const rulesEmpty = (r: Rules): boolean => r.eval === '' && RULE_KEYS.every((k) => k === 'eval' || (r[k] as string[]).length === 0);

/**
 * The top-level entries of compiler/types/yaml/step.go `Step` as yaml.v3 writes them (its field
 * order, `omitempty`), from a parsed step. `template` is left out: templates are expanded before.
 */
function stepEntries(p: Parsed): [string, Record<string, YamlValue | FlowList | undefined>][] {
  const c = p.container;
  const entries: Record<string, YamlValue | FlowList | undefined>[] = [];
  const r = c.ruleset;
  const ruleset: Record<string, unknown> = {
    if: rulesEmpty(r.if) ? undefined : rulesYaml(r.if),
    unless: rulesEmpty(r.unless) ? undefined : rulesYaml(r.unless),
    matcher: r.matcher || undefined,
    operator: r.operator || undefined,
    continue: r.continue || undefined,
  };
  entries.push({ ruleset: ruleset as YamlValue });
  entries.push({ commands: c.commands.length > 0 ? c.commands : undefined });
  entries.push({ entrypoint: c.entrypoint.length > 0 ? c.entrypoint : undefined });
  entries.push({ secrets: c.secrets.length > 0 ? c.secrets.map((s) => ({ source: s.source, target: s.target })) : undefined });
  entries.push({ artifacts: c.artifacts.paths.length > 0 ? { paths: c.artifacts.paths } : undefined });
  entries.push({ ulimits: c.ulimits.length > 0 ? c.ulimits.map((u) => ({ name: u.name, soft: u.soft, hard: u.hard })) : undefined });
  entries.push({
    volumes: c.volumes.length > 0 ? c.volumes.map((v) => ({ source: v.source, destination: v.destination, access_mode: v.access_mode })) : undefined,
  });
  for (const key of ['image', 'name', 'pull'] as const) entries.push({ [key]: c[key] || undefined });
  entries.push({ environment: Object.keys(c.environment).length > 0 ? c.environment : undefined });
  entries.push({ parameters: Object.keys(p.parameters).length > 0 ? (p.parameters as YamlValue) : undefined });
  entries.push({ detach: c.detach || undefined, privileged: c.privileged || undefined });
  for (const key of ['user', 'report_as', 'id_request'] as const) entries.push({ [key]: c[key] || undefined });
  if (c.git !== null) entries.push({ git: { token: { repositories: c.git.token.repositories, permissions: c.git.token.permissions } } });
  return entries.map((e) => [Object.keys(e)[0] ?? '', e]);
}

/** Fields yaml.v3 leaves as they were when the substituted value reads back as null (decode.go `null`). */
const KEEP_ON_NULL = new Set(['image', 'name', 'pull', 'user', 'report_as', 'id_request']);

export function substituteContainer(ctx: Ctx, p: Parsed): void {
  if (p.origin.node === null) return; // the built-in init and clone steps hold nothing to substitute
  const c = p.container;
  const where = p.origin.nameNode ?? p.origin.node;
  const at = docOf(ctx, p);
  const lookup = velaLookup(c.environment);
  const changed = new Set<string>();
  const texts: string[] = [];
  for (const [key, entry] of stepEntries(p)) {
    const text = yamlV3Mapping(entry);
    if (text === '') continue;
    let out: string;
    try {
      out = envsubst(text, lookup);
    } catch (error) {
      // compiler/native/substitute.go SubstituteSteps: "unable to substitute environment variables: %w"
      at.error(where, `unable to substitute environment variables in step ${c.name}: ${(error as Error).message}`, 'escape a literal ${ as $${');
      return;
    }
    if (out !== text) changed.add(key);
    texts.push(out);
  }
  if (changed.size === 0) return;

  // compiler/native/substitute.go SubstituteSteps: yaml.Unmarshal of the substituted text.
  const refuse = (reason: string): void =>
    at.error(
      where,
      `unable to unmarshal configuration after substitution for step ${c.name}: ${reason}`,
      'Vela reads the step again after substituting, so a value can break the YAML around it (quoting the field does not help: the step is written again as YAML); give the variable a value that fits, or use it in commands',
    );
  const lc = new LineCounter();
  const text = `${texts.join('\n')}\n`;
  const doc = parseDocument(text, { lineCounter: lc, uniqueKeys: true, prettyErrors: false });
  if (doc.errors.length > 0) {
    const first = doc.errors[0];
    const { line } = lc.linePos(first?.pos[0] ?? 0);
    refuse(`"${(text.split('\n')[line - 1] ?? '').trim()}": ${(first?.message ?? '').split('\n')[0]}`);
    return;
  }
  const root = doc.contents;
  if (!isMap(root)) {
    refuse('the substituted step is not a mapping');
    return;
  }
  // go.yaml.in/yaml/v3 decode.go (*decoder).null: a null scalar leaves a string field as it was.
  const isNull = (key: string): boolean => {
    const v = root.get(key, true);
    return v === undefined || v === null || (isScalar(v) && v.value === null);
  };
  for (const key of KEEP_ON_NULL) if (changed.has(key) && isNull(key)) (root as YAMLMap).set(key, c[key as 'image']);
  const sub = new Ctx('substituted step', lc, doc);
  const again = parseStep(sub, root, 'step');
  if (sub.errors.length > 0 || again === null) {
    refuse(sub.errors[0]?.message ?? 'the substituted step could not be read');
    return;
  }
  const next = again.container;
  for (const key of changed) {
    if (KEEP_ON_NULL.has(key)) {
      c[key as 'image'] = next[key as 'image'];
      continue;
    }
    switch (key) {
      case 'ruleset':
        c.ruleset = next.ruleset;
        break;
      case 'commands':
        c.commands = next.commands;
        break;
      case 'entrypoint':
        c.entrypoint = next.entrypoint;
        break;
      case 'secrets':
        c.secrets = next.secrets;
        break;
      case 'artifacts':
        c.artifacts = next.artifacts;
        break;
      case 'ulimits':
        c.ulimits = next.ulimits;
        break;
      case 'volumes':
        c.volumes = next.volumes;
        break;
      case 'environment':
        c.environment = next.environment;
        break;
      case 'git':
        c.git = next.git;
        break;
      default:
        // parameters: already turned into PARAMETER_* (compiler/native/environment.go runs first).
        break;
    }
  }
}
