/**
 * Cross-container checks after parsing: `needs` and their cycles, names after the ruleset purge,
 * and container ids that collide.
 */
import type { Node } from 'yaml';
import { rulesEmpty } from '../ruleset.ts';
import { sanitizeContainerId } from '../ids.ts';
import type { Parsed, ParsedStage } from './containers.ts';
import type { Ctx } from './document.ts';
import { suggest } from './keys.ts';

/** The first cycle through stages' `needs`, as the list of stage names around it. */
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

/** Every `needs` must name a stage (or the clone stage when it exists), and must not form a cycle. */
export function checkNeeds(ctx: Ctx, stages: ParsedStage[], cloneWanted: boolean): void {
  const stageNames = new Set(stages.map((s) => s.stage.name));
  for (const s of stages) {
    for (const need of s.stage.needs) {
      if (need === s.stage.name || stageNames.has(need) || (need === 'clone' && cloneWanted)) continue;
      const hint = suggest(need, [...stageNames]);
      ctx.error(
        s.needsNode ?? s.keyNode,
        `stage ${s.stage.name} needs unknown stage "${need}"`,
        hint !== undefined ? `did you mean "${hint}"?` : `known stages: ${[...stageNames].join(', ')}`,
      );
    }
  }
  const cycle = findCycle(stages);
  if (cycle !== null) {
    const first = stages.find((s) => s.stage.name === cycle[0]);
    ctx.error(first?.needsNode ?? first?.keyNode, `stages form a cycle through needs: ${cycle.join(' -> ')}`, 'remove one of the needs');
  }
}

/** The containers of a build after the ruleset purge. */
export interface KeptContainers {
  services: Parsed[];
  steps: Parsed[];
  /** Every stage, before the purge (stage names are checked on all of them). */
  stages?: ParsedStage[];
  keptStages: ParsedStage[];
}

/**
 * Names, after the purge as Vela's ValidatePipeline (compiler/native/validate.go
 * validatePipelineContainers): reserved names, duplicates (a warning instead of an error when no
 * rule data was given and a ruleset may drop one of them), and report_as targets. Returns the
 * duplicates, which {@link checkContainerIds} skips.
 */
export function checkNames(ctx: Ctx, kept: KeptContainers, cloneWanted: boolean, noRuleData: boolean): Set<Parsed> {
  const hasRules = (p: Parsed): boolean => !rulesEmpty(p.container.ruleset.if) || !rulesEmpty(p.container.ruleset.unless);
  const duplicates = new Set<Parsed>();
  const reportAs = new Map<string, string>();
  const check = (list: Parsed[], what: string): void => {
    const seen = new Map<string, Parsed>();
    for (const p of list) {
      const c = p.container;
      if (p.origin.node === null) continue;
      const at = p.origin.nameNode ?? p.origin.node;
      if (c.name === 'init' || (c.name === 'clone' && cloneWanted)) {
        ctx.error(
          at,
          `${what} name "${c.name}" is reserved for Vela's ${c.name} step`,
          c.name === 'clone' ? 'rename it, or set metadata.clone: false to replace the built-in clone step' : 'rename it',
        );
        continue;
      }
      const first = seen.get(c.name);
      if (first !== undefined) {
        duplicates.add(p);
        if (noRuleData && (hasRules(first) || hasRules(p))) {
          ctx.warn(
            at,
            `${what} \`${c.name}\` is defined twice, which works only if rulesets drop one of them for each build (check with an event, e.g. --event push)`,
          );
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
  check(kept.steps, 'step');
  check(kept.services, 'service');
  const stageSeen = new Set<string>();
  for (const s of kept.stages ?? kept.keptStages) {
    if (stageSeen.has(s.stage.name)) ctx.error(s.keyNode ?? s.node, `stage \`${s.stage.name}\` is already defined`, 'give each stage a unique name');
    stageSeen.add(s.stage.name);
    if (s.keyNode !== null && (s.stage.name === 'init' || (s.stage.name === 'clone' && cloneWanted))) {
      ctx.error(s.keyNode, `stage name "${s.stage.name}" is reserved for Vela's ${s.stage.name} stage`, 'rename it');
    }
  }
  for (const s of kept.keptStages) check(s.steps, 'step');
  return duplicates;
}

/**
 * Container ids that collide after Vela's name joining (stage `three_word_key` + step `build`
 * and stage `three` + step `word_key_build`), or after the runtime's sanitizing (`a b`, `a-b`),
 * would fail at run time with a name conflict; Vela refuses the first kind at compile time.
 * Call after `prepareBuild` set the ids.
 */
export function checkContainerIds(ctx: Ctx, kept: KeptContainers, duplicates: Set<Parsed>, root: Node): void {
  const byId = new Map<string, { p: Parsed; label: string }>();
  const located = (p: Parsed): string => {
    const at = p.origin.nameNode ?? p.origin.node;
    return at === null ? '' : ` (line ${ctx.lc.linePos(at.range?.[0] ?? 0).line})`;
  };
  const claim = (p: Parsed, label: string): void => {
    if (duplicates.has(p)) return;
    const id = sanitizeContainerId(p.container.id, 'docker');
    const other = byId.get(id);
    if (other === undefined) {
      byId.set(id, { p, label });
      return;
    }
    ctx.error(
      p.origin.nameNode ?? p.origin.node ?? root,
      `${label} and ${other.label}${located(other.p)} get the same container id ${id}`,
      'rename one of them',
    );
  };
  for (const p of kept.steps) claim(p, `step "${p.container.name}"`);
  for (const s of kept.keptStages) for (const p of s.steps) claim(p, `step "${p.container.name}" of stage "${s.stage.name}"`);
  for (const p of kept.services) claim(p, `service "${p.container.name}"`);
}
