/** The executor's checks and words: a runtime failure described, names an image may use, stage cycles. */
import type { Container, Stage } from '@berth/pipeline';
import { isRuntimeError } from '@berth/runtime';
import { ExecutorError, messageOf } from '../errors.ts';

/** A runtime failure in words: the RuntimeError's message names runtime, operation and subject. */
export function describeRuntimeError(error: unknown): string {
  if (isRuntimeError(error)) {
    switch (error.code) {
      case 'ImageNotFound':
        return `${error.message} (pull the image first, or allow pulling it with another pull policy)`;
      case 'ImagePullFailed':
        return `${error.message} (check the image name and the registry's credentials and reachability)`;
      case 'Unavailable':
        return `${error.message} (is the ${error.runtime} engine running and reachable?)`;
      default:
        return error.message;
    }
  }
  return messageOf(error);
}

/** Prefixes of the variables the worker lays on containers (Vela's `VELA_*`, `BUILD_*`, `REPOSITORY_*`). */
const WORKER_PREFIXES = ['VELA_', 'BUILD_', 'REPOSITORY_'];

/**
 * Whether a step's environment will have `name` before its image is substituted: its compiled
 * environment, its secrets' targets and the worker's variables (every name with a
 * {@link WORKER_PREFIXES} prefix, so `${VELA_BUILD_NUMBER}` never counts as an output).
 */
export function knownNames(step: Container, name: string): boolean {
  return Object.hasOwn(step.environment, name) || WORKER_PREFIXES.some((prefix) => name.startsWith(prefix)) || step.secrets.some((ref) => ref.target === name);
}

/** Throws when stages `need` each other in a cycle (they would wait forever). */
export function checkStages(stages: readonly Stage[]): void {
  const byName = new Map(stages.map((s) => [s.name, s]));
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (name: string, path: string[]): void => {
    const mark = state.get(name);
    if (mark === 'done') return;
    if (mark === 'visiting') {
      const cycle = [...path.slice(path.indexOf(name)), name];
      throw new ExecutorError('create', '', `stages need each other in a cycle (${cycle.join(' → ')}): none of them could start`);
    }
    state.set(name, 'visiting');
    for (const need of byName.get(name)?.needs ?? []) if (byName.has(need) && need !== name) visit(need, [...path, name]);
    state.set(name, 'done');
  };
  for (const stage of stages) visit(stage.name, []);
}
