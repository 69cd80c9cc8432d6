import { randomUUID } from 'node:crypto';
import type { Context } from '@berth/context';
import { isRuntimeError, type Runtime } from '@berth/runtime';

/** Settings of the built-in runtime plugins the daemon reads itself (see `plugins/builtin.ts` for each runtime's options). */
export interface RuntimeSettings {
  /** Kubernetes: a kubeconfig path (VELA_RUNTIME_CONFIG, KUBECONFIG); default: in-cluster or ~/.kube/config. */
  kubeconfig?: string | undefined;
  /** Kubernetes: the namespace pods run in (VELA_RUNTIME_NAMESPACE). */
  namespace?: string | undefined;
  /** Kubernetes: a PipelinePodsTemplate resource name (VELA_RUNTIME_PODS_TEMPLATE_NAME). */
  podsTemplateName?: string | undefined;
  /** Kubernetes: a PipelinePodsTemplate YAML file (VELA_RUNTIME_PODS_TEMPLATE_FILE). */
  podsTemplateFile?: string | undefined;
  /** Kubernetes: the image containers start on before their own (default Vela's `kubernetes/pause:latest`). */
  pauseImage?: string | undefined;
  /** Docker: capabilities dropped from every container (VELA_RUNTIME_DROP_CAPABILITIES). */
  dropCapabilities?: string[] | undefined;
  /** Docker: CPUs per container (`--container-cpus`, a Berth extension). */
  cpus?: number | undefined;
  /** Docker: memory per container in bytes (`--container-memory`). */
  memoryBytes?: number | undefined;
  /** Docker: processes per container (`--container-pids`). */
  pidsLimit?: number | undefined;
}

/**
 * Wraps a runtime so that every method whose promise rejects with a `RuntimeError` reports its
 * code to `onError` (metrics). The wrapper is otherwise transparent.
 */
export function instrumentRuntime<R extends Runtime>(runtime: R, onError: (code: string, method: string) => void): R {
  return new Proxy(runtime, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function' || prop === 'constructor') return value;
      return (...args: unknown[]): unknown => {
        const out: unknown = (value as (...a: unknown[]) => unknown).apply(target, args);
        if (out instanceof Promise) {
          out.catch((e: unknown) => {
            if (isRuntimeError(e)) onError(e.code, String(prop));
          });
        }
        return out;
      };
    },
  });
}

/**
 * Whether the runtime's engine answers: a reap of a worker id nobody has (a list call per kind of
 * resource, removing nothing). Resolves with an error message, or undefined when reachable.
 */
export async function probeRuntime(ctx: Context, runtime: Runtime): Promise<string | undefined> {
  try {
    await runtime.reap(ctx, `berth-probe-${randomUUID()}`);
    return undefined;
  } catch (e) {
    return isRuntimeError(e) ? `${e.code}: ${e.detail}` : e instanceof Error ? e.message : String(e);
  }
}
