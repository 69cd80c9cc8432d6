/**
 * @berth/runtime-host: the Berth runtime plugin that runs steps as local processes in a
 * per-build workspace, without any isolation.
 *
 * @packageDocumentation
 */
import { createRequire } from 'node:module';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { defineRuntime, RuntimeError, type RuntimeDescriptor } from '@berth/runtime';
import { HostRuntime, NO_ISOLATION_WARNING, type HostRuntimeOptions } from './runtime.ts';

export { HostRuntime, NO_ISOLATION_WARNING, type HostRuntimeOptions } from './runtime.ts';

/**
 * The conformance suite's options for this runtime: the capabilities a host runtime lacks, each
 * with the reason (`berth runtimes verify host` and this package's own test use them).
 */
export const conformance: { skip: Record<string, string> } = {
  skip: {
    images: 'the host runtime runs no images: steps run on the host',
    fixedWorkspacePath: 'each build gets its own directory under the runtime root; workspacePath is mapped onto it',
    user: "steps run as the worker's user",
    serviceNetworking: 'the host runtime does not run services',
    privileged: "steps run with the worker's own privileges; the runtime grants none",
    ...(process.getuid?.() === 0 ? { confinement: "the worker runs as root here, and its steps have root's privileges" } : {}),
    ...(process.platform === 'linux' ? {} : { linuxProc: `${process.platform} has no Linux /proc` }),
  },
};

const manifest = createRequire(import.meta.url)('../package.json') as { version: string };
let warned = false;

/**
 * The host runtime plugin: `hostRuntime(options).create(ctx, config)` gives a {@link HostRuntime}.
 *
 * Gotcha: it gives no isolation (see {@link NO_ISOLATION_WARNING}), which it says at every create
 * (through `options.warn`, or once per process through `process.emitWarning`) and at the top of
 * every build's init log.
 */
export function hostRuntime(options: HostRuntimeOptions = {}): RuntimeDescriptor {
  if (options.root !== undefined && !path.isAbsolute(options.root)) {
    throw new TypeError(`[berth] [host] options.root must be an absolute path; got ${JSON.stringify(options.root)}`);
  }
  return defineRuntime({
    name: 'host',
    version: manifest.version,
    contract: '1.2.0',
    // The build's workspace may be a host directory (`berth exec` runs on the current directory).
    capabilities: ['hostWorkspace'],
    async create(ctx, config) {
      const fail = (code: 'InvalidConfig' | 'Canceled', detail: string): never => {
        throw new RuntimeError(code, detail, { runtime: 'host', operation: 'create' });
      };
      if (ctx.signal.aborted) fail('Canceled', 'the context ended before the runtime was created');
      if (!config.workerId) fail('InvalidConfig', 'workerId is required');
      if (config.workspacePath !== undefined && !config.workspacePath.startsWith('/')) {
        fail('InvalidConfig', `workspacePath must be absolute; got ${JSON.stringify(config.workspacePath)}`);
      }
      if (config.workspaceHostPath !== undefined) {
        const dir = config.workspaceHostPath;
        const isDir =
          path.isAbsolute(dir) &&
          (await stat(dir).then(
            (s) => s.isDirectory(),
            () => false,
          ));
        if (!isDir) fail('InvalidConfig', `workspaceHostPath ${JSON.stringify(dir)} must be an absolute path to an existing directory`);
      }
      if (options.warn) options.warn(NO_ISOLATION_WARNING);
      else if (!warned) {
        warned = true;
        process.emitWarning(NO_ISOLATION_WARNING, { code: 'BERTH_HOST_NO_ISOLATION' });
      }
      return new HostRuntime(config, options);
    },
  });
}
