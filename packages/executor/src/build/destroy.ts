/**
 * The runtime side of destroyBuild (go-vela/worker `executor/linux/build.go` DestroyBuild and
 * `step.go` / `service.go` DestroyStep / DestroyService): each removal in its own cleanup budget,
 * failures logged and never thrown (what is left goes to the runtime's reap).
 */
import { type Context, withTimeout } from '@berth/context';
import type { Build, Container } from '@berth/pipeline';
import { isRuntimeError, type Runtime } from '@berth/runtime';
import { messageOf } from '../errors.ts';
import type { TargetKind } from '../reporter.ts';
import type { Status } from '../status.ts';

/** What the destroy sequence needs of the build. */
export interface DestroyOptions {
  readonly runtime: Runtime;
  /** The budget of each removal (and of each wait for a log stream). */
  readonly budgetMs: number;
  readonly logger: { debug?(message: string): void; warn?(message: string): void };
}

/** Runs `body` under a child of `ctx` bounded by `ms`, and clears its timer. */
async function withBudget<T>(ctx: Context, ms: number, body: (budget: Context) => Promise<T>): Promise<T> {
  const [budget, cancel] = withTimeout(ctx, ms);
  try {
    return await body(budget);
  } finally {
    cancel();
  }
}

/** What {@link removeContainerOf} knows and updates of one container (the executor's ContainerRun). */
export interface DestroyedRun {
  readonly kind: TargetKind;
  readonly container: Container;
  readonly status: Status;
  /** How far its container is set up (`held`: started, waiting for its go signal). */
  readonly setup: 'none' | 'created' | 'held';
  /** A setup was asked for and its container not removed since: it may exist even though the setup did not resolve. */
  readonly setupAsked: boolean;
  /** runContainer resolved. */
  readonly ran: boolean;
  /** The container has ended (set here when an inspect finds it exited). */
  exited: boolean;
  exitCode: number;
}

/**
 * Removes the run's container: an ended one after its log was read (`waitForStream`), a running
 * one (a service, a detached step, a step the build stopped waiting for) inspected then removed,
 * which ends its stream; one that never ran only removed, when a setup was asked for (it may exist
 * even if the setup failed). Each call in its own budget.
 */
export async function removeContainerOf(
  ctx: Context,
  run: DestroyedRun,
  waitForStream: (budget: Context) => Promise<void>,
  options: DestroyOptions,
): Promise<void> {
  const { runtime, budgetMs, logger } = options;
  const container = run.container;
  const remove = (): Promise<void> =>
    withBudget(ctx, budgetMs, async (budget) => {
      try {
        logger.debug?.(`removing ${run.kind} ${container.name}`);
        await runtime.removeContainer(budget, container);
        logger.debug?.(`removed ${run.kind} ${container.name}`);
      } catch (error) {
        logger.warn?.(`destroy ${run.kind} ${container.name}: ${messageOf(error)}`);
      }
    });
  const waitStream = (): Promise<void> => withBudget(ctx, budgetMs, waitForStream);
  if (run.ran && run.exited) {
    // Read the whole log before the container goes.
    await waitStream();
    await remove();
  } else if (run.ran) {
    if (run.status === 'running') {
      try {
        const state = await withBudget(ctx, budgetMs, (budget) => runtime.inspectContainer(budget, container));
        if (state.state === 'exited') {
          run.exited = true;
          run.exitCode = state.exitCode ?? 0;
        }
      } catch (error) {
        if (!isRuntimeError(error, 'NotFound')) logger.warn?.(`destroy ${run.kind} ${container.name}: ${messageOf(error)}`);
      }
    }
    await remove();
    await waitStream();
  } else if (run.setup !== 'none' || run.setupAsked) {
    // Also one whose setup failed or was cut off: the runtime may have created it, and the volume
    // and the network go only once no container is attached to them (go-vela/worker
    // executor/linux/step.go DestroyStep inspects and removes the container of every step).
    await remove();
  }
}

/** Removes the build's volume, network and runtime build, in that order, each in its own budget. */
export async function removeBuildResources(ctx: Context, build: Build, options: DestroyOptions): Promise<void> {
  const { runtime, budgetMs, logger } = options;
  for (const [what, remove] of [
    ['volume', (budget: Context) => runtime.removeVolume(budget, build)],
    ['network', (budget: Context) => runtime.removeNetwork(budget, build)],
    ['build', (budget: Context) => runtime.removeBuild(budget, build)],
  ] as const) {
    await withBudget(ctx, budgetMs, async (budget) => {
      try {
        await remove(budget);
      } catch (error) {
        logger.warn?.(`destroy ${build.id}: removing the ${what}: ${messageOf(error)}`);
      }
    });
  }
}
