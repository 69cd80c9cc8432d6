import { RUNTIME_CAPABILITIES, type Runtime, type RuntimeCapability, type RuntimeConfig } from '@berth/runtime';

/**
 * Creates a fresh runtime for one configuration, e.g. `(config) => descriptor.create(background(), config)`.
 * The suite calls it at least once per case (with a fresh `workerId`) and closes what it returns.
 */
export type ConformanceFactory = (config: RuntimeConfig) => Runtime | Promise<Runtime>;

/**
 * Capabilities a runtime may lack. Declaring one in `skip` reports its cases as skipped with the
 * reason in the test name; every other case must pass.
 *
 * - `privileged`: running an allowlisted image privileged (the engine may refuse, e.g. rootless Docker).
 * - `user`: running as the container's `user`.
 * - `serviceNetworking`: a detached service reachable from steps by its name.
 * - `parallelBuilds`: two builds at the same time.
 * - `largeLogs`: 50 MiB of output through one log stream.
 * - `reap`: removing what another runtime instance of the same worker id left behind.
 * - `images`: container images: a missing image with `pull: never` is `ImageNotFound`, an invalid
 *   reference `InvalidConfig` (a runtime that runs no images, such as a host runtime, lacks it).
 * - `fixedWorkspacePath`: every build's workspace is mounted at the configured `workspacePath`
 *   itself, an absolute path that is the same in every build and isolated per build. Without it
 *   the suite still checks the workspace through paths relative to it.
 * - `linuxProc`: processes see Linux's `/proc/self/status` (the privileged group reads its CapEff).
 * - `confinement`: a container's processes get no elevated privileges unless the runtime grants
 *   them (`privileged`); a runtime whose steps run with the worker's own privileges lacks it.
 * - `outputs`: the optional outputs capability (`setupOutputs` and `readOutput`: Vela's outputs);
 *   a runtime that does not offer it must declare so, or its case fails saying to.
 */
export type ConformanceCapability =
  | 'privileged'
  | 'user'
  | 'serviceNetworking'
  | 'parallelBuilds'
  | 'largeLogs'
  | 'reap'
  | 'images'
  | 'fixedWorkspacePath'
  | 'linuxProc'
  | 'confinement'
  | 'outputs';

/** Every {@link ConformanceCapability}, for validation and documentation. */
export const CONFORMANCE_CAPABILITIES: readonly ConformanceCapability[] = [
  'privileged',
  'user',
  'serviceNetworking',
  'parallelBuilds',
  'largeLogs',
  'reap',
  'images',
  'fixedWorkspacePath',
  'linuxProc',
  'confinement',
  'outputs',
];

/** Time bounds of the suite, in milliseconds. */
export interface ConformanceTimeouts {
  /** Bound of one case (vitest's test timeout). Default 60 000. */
  case?: number;
  /** How soon after its ctx ends `waitContainer` / a log stream must settle. Default 1 000 (the contract's "about a second"). */
  cancel?: number;
  /** How soon a missing image or an invalid reference must be reported. Default 15 000. */
  imageError?: number;
}

/** Options of {@link runtimeConformance}. */
export interface ConformanceOptions {
  /**
   * A busybox-like image with `sh`, `sleep`, `echo`, `printf`, `cat`, `env`, `id`, `pwd`, `head`,
   * `yes`, `base64`, `kill` and `nc` (with `-ll -e`), present where the runtime runs. The suite's
   * preflight checks them and names what is missing. A runtime without images ignores it (and
   * then the host must have these tools).
   * Default `process.env.BERTH_BUSYBOX_IMAGE` or `berth/busybox:1.35`.
   */
  image?: string;
  /** A valid reference to an image that does not exist anywhere. Default `berth/conformance-missing:0`. */
  missingImage?: string;
  /** An invalid image reference. Default `UPPER/Case::bad`. */
  invalidImage?: string;
  /**
   * Where the runtime puts the build's workspace as its steps see it; `config.workspacePath`, else
   * `/vela`. The suite runs its workspace cases in this directory (`directory`) and names files
   * relative to it, so a runtime that maps it elsewhere (a per-build directory on a host) passes;
   * only the `fixedWorkspacePath` cases expect the absolute path itself. Also given to every
   * runtime as `config.workspacePath`.
   */
  workspacePath?: string;
  /** Extra settings merged into every {@link RuntimeConfig} the suite creates (not `workerId`). */
  config?: Omit<Partial<RuntimeConfig>, 'workerId'>;
  /** Time bounds. */
  timeouts?: ConformanceTimeouts;
  /** Size of the large-log case's output. Default 50 MiB. */
  largeLogBytes?: number;
  /** How much the test process's RSS may grow while reading the large log. Default 150 MB. */
  largeLogMemoryLimitBytes?: number;
  /**
   * Capabilities the runtime lacks, each with the reason shown in the skipped cases' names,
   * e.g. `{ privileged: 'the engine runs rootless' }`.
   */
  skip?: Partial<Record<ConformanceCapability, string>>;
  /**
   * The optional contract capabilities the plugin declares (its descriptor's `capabilities`; taken
   * from the descriptor when the suite is given one). A capability's cases run only when it is
   * declared. Left undefined with a factory, the `outputs` case runs when the runtime has its
   * methods and is skipped otherwise, and the `hostWorkspace` case is skipped.
   */
  capabilities?: readonly RuntimeCapability[];
}

/** {@link ConformanceOptions} with every default applied. */
export interface ResolvedConformanceOptions {
  image: string;
  missingImage: string;
  invalidImage: string;
  workspacePath: string;
  config: Omit<Partial<RuntimeConfig>, 'workerId'>;
  timeouts: Required<ConformanceTimeouts>;
  largeLogBytes: number;
  largeLogMemoryLimitBytes: number;
  skip: Partial<Record<ConformanceCapability, string>>;
  /** The declared optional capabilities; undefined when the plugin did not say (a factory without the option). */
  capabilities: readonly RuntimeCapability[] | undefined;
}

/** Applies the defaults of {@link ConformanceOptions}; throws a `TypeError` on an unknown capability in `skip`. */
export function resolveConformanceOptions(options: ConformanceOptions = {}): ResolvedConformanceOptions {
  const skip = options.skip ?? {};
  const workspacePath = options.workspacePath ?? options.config?.workspacePath ?? '/vela';
  if (!workspacePath.startsWith('/')) {
    throw new TypeError(`[berth] runtimeConformance: workspacePath must be absolute; got ${JSON.stringify(workspacePath)}`);
  }
  for (const [capability, reason] of Object.entries(skip)) {
    if (!CONFORMANCE_CAPABILITIES.includes(capability as ConformanceCapability)) {
      throw new TypeError(
        `[berth] runtimeConformance: unknown capability ${JSON.stringify(capability)} in skip; known: ${CONFORMANCE_CAPABILITIES.join(', ')}`,
      );
    }
    if (typeof reason !== 'string' || reason.trim() === '') {
      throw new TypeError(`[berth] runtimeConformance: skip.${capability} needs a reason`);
    }
  }
  for (const capability of options.capabilities ?? []) {
    if (!RUNTIME_CAPABILITIES.includes(capability)) {
      throw new TypeError(
        `[berth] runtimeConformance: unknown optional capability ${JSON.stringify(capability)} in capabilities; known: ${RUNTIME_CAPABILITIES.join(', ')}`,
      );
    }
  }
  return {
    image: options.image ?? process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35',
    missingImage: options.missingImage ?? 'berth/conformance-missing:0',
    invalidImage: options.invalidImage ?? 'UPPER/Case::bad',
    workspacePath,
    config: { ...options.config, workspacePath },
    timeouts: {
      case: options.timeouts?.case ?? 60_000,
      cancel: options.timeouts?.cancel ?? 1_000,
      imageError: options.timeouts?.imageError ?? 15_000,
    },
    largeLogBytes: options.largeLogBytes ?? 50 * 1024 * 1024,
    largeLogMemoryLimitBytes: options.largeLogMemoryLimitBytes ?? 150_000_000,
    skip,
    capabilities: options.capabilities,
  };
}
