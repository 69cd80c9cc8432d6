/**
 * Cross-field checks of a compiled pipeline, for pipelines that did not come from
 * {@link compilePipeline} (a Vela server's JSON).
 */
import type { Build, Container, ParseIssue } from './model.ts';

/**
 * Problems a runtime would trip over in a parsed {@link Build}: steps and stages both present,
 * duplicate stage names, duplicate step names within a stage or among steps or services,
 * `needs` naming a stage that does not exist, and cycles through `needs`.
 *
 * Returns [] for a valid build. Gotcha: a need of `clone` is accepted even without a clone stage,
 * because Vela's compiler adds it to every stage even when it runs without clone (local builds).
 */
export function validateBuild(build: Build): ParseIssue[] {
  const issues: ParseIssue[] = [];
  if (build.steps.length > 0 && build.stages.length > 0) {
    issues.push({ path: 'stages', message: 'cannot have both stages and steps at the top level of pipeline' });
  }
  const names = (list: Container[], path: string): void => {
    const seen = new Set<string>();
    list.forEach((c, i) => {
      if (seen.has(c.name)) issues.push({ path: `${path}[${i}].name`, message: `step \`${c.name}\` is already defined` });
      seen.add(c.name);
    });
  };
  names(build.steps, 'steps');
  names(build.services, 'services');
  const stageNames = new Set<string>();
  build.stages.forEach((stage, i) => {
    if (stageNames.has(stage.name)) issues.push({ path: `stages[${i}].name`, message: `stage \`${stage.name}\` is already defined` });
    stageNames.add(stage.name);
    names(stage.steps, `stages[${i}].steps`);
  });
  build.stages.forEach((stage, i) => {
    stage.needs.forEach((need, j) => {
      if (need === stage.name) issues.push({ path: `stages[${i}].needs[${j}]`, message: `stage ${stage.name} references itself in 'needs' declaration` });
      else if (!stageNames.has(need) && need !== 'clone')
        issues.push({ path: `stages[${i}].needs[${j}]`, message: `stage ${stage.name} needs unknown stage "${need}"` });
    });
  });
  const needs = new Map<string, string[]>();
  for (const s of build.stages) if (!needs.has(s.name)) needs.set(s.name, s.needs);
  const state = new Map<string, 1 | 2>();
  const visit = (name: string, trail: string[]): string[] | null => {
    if (state.get(name) === 2) return null;
    if (state.get(name) === 1) return [...trail.slice(trail.indexOf(name)), name];
    state.set(name, 1);
    for (const need of needs.get(name) ?? []) {
      if (need === name || !needs.has(need)) continue;
      const cycle = visit(need, [...trail, name]);
      if (cycle !== null) return cycle;
    }
    state.set(name, 2);
    return null;
  };
  for (const stage of build.stages) {
    const cycle = visit(stage.name, []);
    if (cycle !== null) {
      issues.push({ path: 'stages', message: `stages form a cycle through needs: ${cycle.join(' -> ')}` });
      break;
    }
  }
  return issues;
}
