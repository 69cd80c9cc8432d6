/**
 * Routes a runtime's events (pull progress, orchestrator notices) to the executor of their build.
 */
import type { RuntimeEvent } from '@berth/runtime';

/** Receives the events of one build. Must not throw. */
export type RuntimeEventHandler = (event: RuntimeEvent) => void;

/**
 * One runtime serves every build of a worker, and takes one `onEvent` callback when it is created.
 * Pass `router.onEvent` as `RuntimeConfig.onEvent`; each executor registers its build id while it
 * runs and unregisters in `destroyBuild`. Events of builds nobody registered are dropped.
 *
 * @example
 * const router = new RuntimeEventRouter();
 * const runtime = await dockerRuntime().create(ctx, { workerId, onEvent: router.onEvent });
 * await runBuild(ctx, { build, runtime, reporter, events: router });
 */
export class RuntimeEventRouter {
  readonly #handlers = new Map<string, RuntimeEventHandler>();

  /** The callback for `RuntimeConfig.onEvent` (already bound). Never throws. */
  readonly onEvent = (event: RuntimeEvent): void => {
    const handler = this.#handlers.get(event.buildId);
    if (handler === undefined) return;
    try {
      handler(event);
    } catch {
      // A handler must not throw; the runtime calls us synchronously and must not see it.
    }
  };

  /** Number of builds registered. */
  get size(): number {
    return this.#handlers.size;
  }

  /** Sends `buildId`'s events to `handler` until the returned function is called. */
  register(buildId: string, handler: RuntimeEventHandler): () => void {
    this.#handlers.set(buildId, handler);
    return () => {
      if (this.#handlers.get(buildId) === handler) this.#handlers.delete(buildId);
    };
  }
}
