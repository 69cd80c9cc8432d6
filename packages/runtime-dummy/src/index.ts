/**
 * @berth/runtime-dummy: an in-memory Runtime whose containers behave as their environment says.
 * A test double for fast executor tests, and the first plugin to pass the conformance suite.
 *
 * @packageDocumentation
 */
import { createRequire } from 'node:module';
import { CONTRACT_VERSION, defineRuntime, RuntimeError, type RuntimeDescriptor } from '@berth/runtime';
import { DEFAULT_ENGINE } from './engine.ts';
import { DummyRuntime, type DummyRuntimeOptions } from './runtime.ts';
import { parseImageReference } from '@berth/pipeline';

export { DummyRuntime, type DummyRuntimeOptions } from './runtime.ts';
export { DEFAULT_ENGINE, DummyEngine, type DummyContainer, type DummyResource, type Owner } from './engine.ts';
export { LogStore, tailLog } from './log.ts';

const manifest = createRequire(import.meta.url)('../package.json') as { version: string };

/**
 * The dummy runtime plugin: `dummyRuntime(options).create(ctx, config)` gives a {@link DummyRuntime}.
 *
 * Gotcha: runtimes share one in-memory engine per process unless `options.engine` is given, as
 * runtimes on one host share the Docker daemon; use `new DummyEngine()` to isolate tests.
 */
export function dummyRuntime(options: DummyRuntimeOptions = {}): RuntimeDescriptor {
  const engine = options.engine ?? DEFAULT_ENGINE;
  const images = options.images ?? [process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35', process.env.BERTH_PAUSE_IMAGE ?? 'berth/pause:1'];
  for (const image of images) {
    const parsed = parseImageReference(image);
    if (!parsed.ok) throw new TypeError(`[berth] [dummy] invalid image reference in options.images: ${image}: ${parsed.error}`);
    engine.images.add(parsed.reference.normalized);
  }
  const name = options.name ?? 'dummy';
  return defineRuntime({
    name,
    version: manifest.version,
    contract: CONTRACT_VERSION,
    capabilities: ['outputs', 'heldStart'],
    create(ctx, config) {
      if (ctx.signal.aborted) {
        return Promise.reject(
          new RuntimeError(ctx.err()?.name === 'DeadlineExceeded' ? 'DeadlineExceeded' : 'Canceled', 'the context ended before the runtime was created', {
            runtime: name,
            operation: 'create',
          }),
        );
      }
      if (!config.workerId) return Promise.reject(new RuntimeError('InvalidConfig', 'workerId is required', { runtime: name, operation: 'create' }));
      if (config.workspaceHostPath !== undefined) {
        return Promise.reject(
          new RuntimeError('InvalidConfig', 'the dummy runtime cannot mount host paths (workspaceHostPath)', { runtime: name, operation: 'create' }),
        );
      }
      return Promise.resolve(new DummyRuntime(config, options, engine));
    },
  });
}
