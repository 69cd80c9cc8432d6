/**
 * @berth/runtime-kubernetes — Berth's runtime plugin for Kubernetes: one pod per build, one pod
 * watch per worker, and a build pod's events listed by its name only when something needs explaining.
 *
 * @packageDocumentation
 */
import { createRequire } from 'node:module';
import { type Context } from '@berth/context';
import { CONTRACT_VERSION, defineRuntime, isRuntimeError, type Runtime, type RuntimeConfig, type RuntimeDescriptor } from '@berth/runtime';
import { contextError, runtimeError, toRuntimeError } from './errors.ts';
import { KubeApi, loadKubeConfig } from './kube-api.ts';
import { type KubernetesRuntimeOptions, resolveOptions } from './options.ts';
import { parseVolumeAllowlist } from './pod-spec.ts';
import { emptyPodTemplate, loadPodsTemplateFile, type PipelinePodTemplate } from './pods-template.ts';
import { KubernetesRuntime } from './runtime.ts';
import { PodTracker } from './tracker/pod-tracker.ts';

export type { KubernetesRuntimeOptions, TrackerStrategy } from './options.ts';
export { DEFAULT_PAUSE_IMAGE } from './options.ts';
export { KubernetesRuntime, type KubernetesRuntimeStats } from './runtime.ts';
export {
  type PipelinePodTemplate,
  PodsTemplateError,
  parsePodsTemplate,
  parsePodsTemplateYaml,
  loadPodsTemplateFile,
  PODS_TEMPLATE_GROUP,
  PODS_TEMPLATE_VERSION,
  PODS_TEMPLATE_KIND,
  PODS_TEMPLATE_PLURAL,
} from './pods-template.ts';
export { WAITING_REASONS, type WaitingReasonPolicy } from './pull-failures.ts';
export { BUILD_ID_ANNOTATION, podNameOf, containerNameOf } from './pod-spec.ts';

const VERSION = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

/**
 * The Kubernetes runtime plugin: `kubernetesRuntime(options)` returns the descriptor the worker
 * registers (name `kubernetes`). `create()` connects, starts the worker's pod watch and waits for its
 * first list.
 *
 * Gotcha: one runtime serves every build of one worker; create one per worker id, and `close()` it
 * after the builds were removed. The default pause image is Vela's `kubernetes/pause:latest`, which
 * the cluster must be able to pull.
 *
 * @example
 * const runtime = await kubernetesRuntime({ namespace: 'ci' }).create(ctx, { workerId: 'worker-1' });
 */
export function kubernetesRuntime(options: KubernetesRuntimeOptions = {}): RuntimeDescriptor {
  return defineRuntime({
    name: 'kubernetes',
    version: VERSION,
    contract: CONTRACT_VERSION,
    create: (ctx, config) => createKubernetesRuntime(ctx, config, options),
  });
}

/**
 * Creates the runtime directly (what the descriptor's `create` does), typed as the concrete class
 * for tests and the benchmark.
 */
export async function createKubernetesRuntime(
  ctx: Context,
  config: RuntimeConfig,
  options: KubernetesRuntimeOptions = {},
): Promise<KubernetesRuntime & Runtime> {
  const where = { operation: 'create', subject: config.workerId };
  if (ctx.signal.aborted) throw contextError(ctx, where);
  let resolved;
  let volumes;
  try {
    resolved = resolveOptions(options);
    volumes = parseVolumeAllowlist(config.volumes ?? []);
  } catch (error) {
    throw runtimeError('InvalidConfig', (error as Error).message, where, error);
  }
  if (!config.workerId) throw runtimeError('InvalidConfig', 'the worker id is empty', where);
  if (config.workspaceHostPath !== undefined) {
    throw runtimeError(
      'InvalidConfig',
      `a pod cannot mount the worker's directory ${config.workspaceHostPath} as its workspace; run with the Docker runtime, or without a host workspace`,
      where,
    );
  }
  let kc;
  try {
    kc = loadKubeConfig(resolved.kubeconfig);
  } catch (error) {
    throw runtimeError('InvalidConfig', `cannot load the kubeconfig: ${(error as Error).message}`, where, error);
  }
  let fileTemplate: PipelinePodTemplate = emptyPodTemplate();
  if (resolved.podsTemplateFile && !resolved.podsTemplateName) {
    try {
      fileTemplate = await loadPodsTemplateFile(resolved.podsTemplateFile);
    } catch (error) {
      throw runtimeError('InvalidConfig', (error as Error).message, where, error);
    }
  }
  const api = await KubeApi.open(kc, resolved.namespace, resolved.requestTimeoutMs);
  const podTracker = new PodTracker(api, {
    workerId: config.workerId,
    silenceMs: resolved.watchSilenceMs,
    inactivityTimeoutMs: resolved.watchInactivityTimeoutMs,
    backoffMaxMs: resolved.watchBackoffMaxMs,
    strategy: resolved.trackerStrategy,
  });
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error(`no answer within ${resolved.requestTimeoutMs} ms`)), resolved.requestTimeoutMs);
  const onAbort = (): void => controller.abort(ctx.signal.reason);
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  try {
    await podTracker.start(controller.signal);
  } catch (error) {
    podTracker.stop();
    await api.close();
    if (ctx.signal.aborted) throw contextError(ctx, where);
    const mapped = isRuntimeError(error) ? error : toRuntimeError(error, ctx, where, api.server);
    throw mapped.code === 'Internal' ? runtimeError('Unavailable', `cannot watch pods at ${api.server}: ${mapped.detail}`, where, error) : mapped;
  } finally {
    clearTimeout(timer);
    ctx.signal.removeEventListener('abort', onAbort);
  }
  return new KubernetesRuntime({ api, options: resolved, config, podTracker, fileTemplate, volumes });
}
