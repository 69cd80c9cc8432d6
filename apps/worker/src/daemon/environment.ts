/**
 * The variables Vela's worker lays over every container when a build runs (W
 * `internal/step/environment.go`): the build as it is now (running, on this worker) and its repo.
 * The server compiled them into the executable when the build was queued; these are fresher.
 */
import { buildEnvironment, type Container, repoEnvironment, WORKSPACE_DEFAULT } from '@berth/pipeline';
import { eventNames, type VelaEvents } from '../vela/events.ts';
import type { VelaBuild } from '../vela/models.ts';

/** What the worker knows of the build's run. */
export interface RunFacts {
  /** The worker's host name. */
  host: string;
  /** The runtime's name (`docker`, `kubernetes`). */
  runtime: string;
  /** When the build started, in Unix seconds. */
  started: number;
}

/**
 * The environment {@link RunFacts} and the build give each container: `VELA_BUILD_*` and
 * `BUILD_*` (with the container's own `VELA_WORKSPACE`), then `VELA_REPO_*` and `REPOSITORY_*`.
 * `build` is read for each container: the build as the server last stored it (the answer to the
 * running PUT), as go-vela/worker executor/linux/build.go CreateBuild keeps `c.build` from the
 * server's answer to Build.Update, so `enqueued` (set by the server after the push, S
 * api/build/enqueue.go) and what else the queue item lacks are there.
 */
export function runEnvironment(build: VelaBuild | (() => VelaBuild), facts: RunFacts): (container: Container) => Record<string, string> {
  const current = typeof build === 'function' ? build : () => build;
  return (container) => {
    const { repo: velaRepo = {}, ...fields } = current();
    const running = { ...fields, status: 'running', host: facts.host, runtime: facts.runtime, distribution: 'linux', started: facts.started };
    const allowEvents = velaRepo['allow_events'];
    const repo = repoEnvironment({
      ...velaRepo,
      owner: velaRepo.owner?.name,
      allow_events: allowEvents !== null && typeof allowEvents === 'object' && !Array.isArray(allowEvents) ? eventNames(allowEvents as VelaEvents) : [],
    });
    return { ...buildEnvironment(running, container.environment['VELA_WORKSPACE'] ?? WORKSPACE_DEFAULT), ...repo };
  };
}
