/** The tracker strategies; only `worker` is meant for production (see {@link KubernetesRuntimeOptions.trackerStrategy}). */
export type TrackerStrategy = 'worker' | 'build' | 'container';

/** Options of {@link kubernetesRuntime}. Every duration is in milliseconds unless its name says otherwise. */
export interface KubernetesRuntimeOptions {
  /**
   * The kubeconfig: a file path, or the YAML text itself when it contains a newline.
   * Default: `KUBECONFIG` / `~/.kube/config` / the in-cluster service account (client-node's `loadFromDefault`),
   * as Vela does when `VELA_RUNTIME_CONFIG` is empty.
   */
  kubeconfig?: string;
  /** The namespace pods are created in. Default: the kubeconfig context's namespace, else `default`. */
  namespace?: string;
  /**
   * The image every container starts on until `runContainer` swaps in the step's image.
   * Default `kubernetes/pause:latest` (Vela's). It must ignore its arguments and run until SIGTERM.
   */
  pauseImage?: string;
  /** A YAML file holding a `PipelinePodsTemplate` (go-vela.github.io/v1alpha1), as Vela's `VELA_RUNTIME_PODS_TEMPLATE_FILE`. */
  podsTemplateFile?: string;
  /**
   * The name of a `PipelinePodsTemplate` custom resource in the namespace, read at every `setupBuild`
   * (Vela's `VELA_RUNTIME_PODS_TEMPLATE_NAME`). Takes precedence over {@link podsTemplateFile}.
   */
  podsTemplateName?: string;
  /**
   * How long a container may stay in `ErrImagePull`, `ImagePullBackOff`, `ErrImageNeverPull` or
   * `CreateContainerConfigError` before the step fails. Default 30 000. `InvalidImageName` fails at once.
   */
  pullGraceMs?: number;
  /** How long the build's pod may stay `Pending` before the build fails. Default 300 000 (5 minutes). */
  pendingTimeoutMs?: number;
  /**
   * A pod watch that delivered nothing (not even a bookmark) for this long is restarted.
   * Default 120 000. client-node's inactivity timer ({@link watchInactivityTimeoutMs}) reconnects an
   * idle stream first; this catches what it cannot (a list or reconnect that never returns).
   */
  watchSilenceMs?: number;
  /**
   * client-node's watch inactivity timeout: a watch stream that delivered nothing (not even a
   * bookmark) for this long is reconnected from its resourceVersion. client-node's own 30 s is
   * shorter than the API server's bookmark gap (about a minute: cacher.go, defaultBookmarkFrequency),
   * so a quiet watch reconnected twice a minute. Default: 3/4 of {@link watchSilenceMs}, at least
   * 30 000 (90 000 with the defaults). Keep it above 60 000 and below `watchSilenceMs`.
   */
  watchInactivityTimeoutMs?: number;
  /** The longest wait before restarting a failed watch (capped exponential backoff with jitter). Default 10 000. */
  watchBackoffMaxMs?: number;
  /** The build timeout used for `activeDeadlineSeconds` when the build's metadata has none, in minutes. Default 60 (Vela's default repo timeout). */
  buildTimeoutMinutes?: number;
  /** Added to the build timeout for the pod's `activeDeadlineSeconds`, so the pod outlives the executor's own timeout. Default 300 000 (5 minutes). */
  deadlineMarginMs?: number;
  /** How long `removeBuild` waits for the pod to be gone (bounded further by its ctx). Default 60 000. */
  removeWaitMs?: number;
  /** Timeout of one ordinary API call (create, patch, delete, list). Default 30 000. */
  requestTimeoutMs?: number;
  /**
   * Internal, for the benchmark in tools/bench only: how pods are tracked. `worker` (default): one pod
   * watch per worker, pod events listed by pod name. `build`: one informer per build (Vela's design).
   * `container`: one pod watch per running container (the design the seed replaced).
   * @internal
   */
  trackerStrategy?: TrackerStrategy;
}

/** {@link KubernetesRuntimeOptions} with defaults applied. */
export interface ResolvedOptions {
  kubeconfig: string | undefined;
  namespace: string | undefined;
  pauseImage: string;
  podsTemplateFile: string | undefined;
  podsTemplateName: string | undefined;
  pullGraceMs: number;
  pendingTimeoutMs: number;
  watchSilenceMs: number;
  watchInactivityTimeoutMs: number;
  watchBackoffMaxMs: number;
  buildTimeoutMinutes: number;
  deadlineMarginMs: number;
  removeWaitMs: number;
  requestTimeoutMs: number;
  trackerStrategy: TrackerStrategy;
}

/** Vela's pause image. */
export const DEFAULT_PAUSE_IMAGE = 'kubernetes/pause:latest';

/** Applies the defaults; throws a TypeError naming a bad value. */
export function resolveOptions(options: KubernetesRuntimeOptions = {}): ResolvedOptions {
  const duration = (name: keyof KubernetesRuntimeOptions, value: number | undefined, fallback: number, min = 0): number => {
    if (value === undefined) return fallback;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < min) {
      throw new TypeError(`[kubernetes] option ${name} must be a number >= ${min}; got ${JSON.stringify(value)}`);
    }
    return value;
  };
  const strategy = options.trackerStrategy ?? 'worker';
  if (!['worker', 'build', 'container'].includes(strategy)) {
    throw new TypeError(`[kubernetes] option trackerStrategy must be worker, build or container; got ${JSON.stringify(strategy)}`);
  }
  return {
    kubeconfig: options.kubeconfig,
    namespace: options.namespace,
    pauseImage: options.pauseImage ?? DEFAULT_PAUSE_IMAGE,
    podsTemplateFile: options.podsTemplateFile,
    podsTemplateName: options.podsTemplateName,
    pullGraceMs: duration('pullGraceMs', options.pullGraceMs, 30_000),
    pendingTimeoutMs: duration('pendingTimeoutMs', options.pendingTimeoutMs, 300_000),
    watchSilenceMs: duration('watchSilenceMs', options.watchSilenceMs, 120_000, 100),
    watchInactivityTimeoutMs: duration(
      'watchInactivityTimeoutMs',
      options.watchInactivityTimeoutMs,
      Math.max(30_000, Math.round(duration('watchSilenceMs', options.watchSilenceMs, 120_000, 100) * 0.75)),
      100,
    ),
    watchBackoffMaxMs: duration('watchBackoffMaxMs', options.watchBackoffMaxMs, 10_000, 1),
    buildTimeoutMinutes: duration('buildTimeoutMinutes', options.buildTimeoutMinutes, 60, 1),
    deadlineMarginMs: duration('deadlineMarginMs', options.deadlineMarginMs, 300_000),
    removeWaitMs: duration('removeWaitMs', options.removeWaitMs, 60_000),
    requestTimeoutMs: duration('requestTimeoutMs', options.requestTimeoutMs, 30_000, 1),
    trackerStrategy: strategy,
  };
}
