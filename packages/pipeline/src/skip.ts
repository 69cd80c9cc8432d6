/**
 * Vela's rule for a build with nothing to run, from go-vela/server api/build/skip.go.
 */
import type { Build } from './model.ts';

const LIKELY = 'it is likely no rulesets matched for the webhook payload';

/**
 * go-vela/server api/build/skip.go `SkipEmptyBuild`: the reason Vela's server skips a compiled
 * build that holds only the init (and clone) step or stage, or `''` when it has more to run.
 *
 * Gotcha: the server never queues such a build (api/build/compile_publish.go CompileAndPublish
 * sets status `skipped` and returns this text as the hook's error), so a worker never sees one.
 */
export function skipEmptyBuild(build: Pick<Build, 'steps' | 'stages'>): string {
  const stages = build.stages.map((s) => s.name);
  if (stages.length === 1 && stages[0] === 'init') return `skipping build since only init stage found — ${LIKELY}`;
  if (stages.length === 2 && stages[0] === 'init' && stages[1] === 'clone') return `skipping build since only init and clone stages found — ${LIKELY}`;
  const steps = build.steps.map((s) => s.name);
  if (steps.length === 1 && steps[0] === 'init') return `skipping build since only init step found — ${LIKELY}`;
  if (steps.length === 2 && steps[0] === 'init' && steps[1] === 'clone') return `skipping build since only init and clone steps found — ${LIKELY}`;
  return '';
}
