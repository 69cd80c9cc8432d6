import type { RuntimeCapability, RuntimeDescriptor } from '@berth/runtime';

/** How one option of a built-in runtime is typed, for `--runtime-option key=value`. */
type OptionKind = 'string' | 'number' | 'list';

/** A runtime the worker ships: its package, the options it takes, and its factory (loaded on demand). */
export interface BuiltinRuntime {
  readonly name: string;
  readonly packageName: string;
  readonly description: string;
  readonly options: Readonly<Record<string, OptionKind>>;
  load(options: Record<string, unknown>): Promise<RuntimeDescriptor>;
  /** The plugin module's exports (its `conformance` options, for `berth runtimes verify`). */
  exports(): Promise<Readonly<Record<string, unknown>>>;
}

/**
 * The app's own list: only a shortcut for names (ARCHITECTURE.md: "The app's own list (docker,
 * kubernetes, host) is only a shortcut for names"). Each plugin module is imported only when chosen.
 */
export const BUILTIN_RUNTIMES: readonly BuiltinRuntime[] = [
  {
    name: 'docker',
    packageName: '@berth/runtime-docker',
    description: 'containers on a Docker engine (DOCKER_HOST or /var/run/docker.sock)',
    options: { socketPath: 'string', host: 'string', cpus: 'number', memoryBytes: 'number', pidsLimit: 'number', dropCapabilities: 'list' },
    load: async (options) => declaring((await import('@berth/runtime-docker')).dockerRuntime(options), ['outputs', 'hostWorkspace', 'heldStart']),
    exports: async () => import('@berth/runtime-docker'),
  },
  {
    name: 'kubernetes',
    packageName: '@berth/runtime-kubernetes',
    description: 'one pod per build on a Kubernetes cluster (kubeconfig or in-cluster)',
    options: {
      kubeconfig: 'string',
      namespace: 'string',
      pauseImage: 'string',
      podsTemplateFile: 'string',
      podsTemplateName: 'string',
      pullGraceMs: 'number',
      pendingTimeoutMs: 'number',
    },
    load: async (options) => (await import('@berth/runtime-kubernetes')).kubernetesRuntime(options),
    exports: async () => import('@berth/runtime-kubernetes'),
  },
  {
    name: 'host',
    packageName: '@berth/runtime-host',
    description: 'local /bin/sh processes in a per-build workspace, WITHOUT isolation',
    options: { root: 'string', inheritEnv: 'list' },
    load: async (options) => (await import('@berth/runtime-host')).hostRuntime(options),
    exports: async () => import('@berth/runtime-host'),
  },
];

/**
 * The descriptor with the optional capabilities the runtime is known to offer, when it does not
 * declare any itself (a plugin written before contract 1.2: the Docker runtime binds a host
 * folder as the workspace and has outputs).
 */
function declaring(descriptor: RuntimeDescriptor, capabilities: readonly RuntimeCapability[]): RuntimeDescriptor {
  return descriptor.capabilities === undefined ? Object.freeze({ ...descriptor, capabilities }) : descriptor;
}

/**
 * Types `--runtime-option` strings for a built-in runtime (lists are comma-separated); `typed`
 * (settings the worker read itself, e.g. `--kubeconfig`) fill what the strings leave unset.
 * Throws an `Error` naming the unknown option or the bad value, and what is accepted.
 */
export function builtinOptions(
  runtime: BuiltinRuntime,
  strings: Readonly<Record<string, string>>,
  typed: Readonly<Record<string, unknown>> = {},
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(typed)) if (value !== undefined && key in runtime.options) out[key] = value;
  for (const [key, value] of Object.entries(strings)) {
    const kind = runtime.options[key];
    if (kind === undefined) {
      throw new Error(`the ${runtime.name} runtime has no option ${JSON.stringify(key)}; its options: ${Object.keys(runtime.options).join(', ')}`);
    }
    if (kind === 'number') {
      const number = Number(value);
      if (value.trim() === '' || !Number.isFinite(number))
        throw new Error(`option ${key} of the ${runtime.name} runtime must be a number; got ${JSON.stringify(value)}`);
      out[key] = number;
    } else if (kind === 'list') {
      out[key] = value
        .split(',')
        .map((item) => item.trim())
        .filter((item) => item !== '');
    } else {
      out[key] = value;
    }
  }
  return out;
}
