import { randomUUID } from 'node:crypto';
import type { Context } from '@berth/context';
import { isRuntimeError, type Runtime, type RuntimeDescriptor } from '@berth/runtime';

/** The runtimes the worker knows. Only the worker app knows which plugins exist. */
export type RuntimeChoice = 'docker' | 'kubernetes';

/** Settings of the runtime plugins, as `berth exec` and `berth start` read them. */
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

const defined = <T extends object>(o: T): T => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;

/**
 * The descriptor of the chosen runtime plugin. Only the chosen plugin's module is loaded: the
 * Kubernetes client alone costs a Docker worker tens of MB and its start-up time.
 */
export async function selectRuntime(choice: RuntimeChoice, options: RuntimeSettings = {}): Promise<RuntimeDescriptor> {
  switch (choice) {
    case 'docker': {
      const { dockerRuntime } = await import('@berth/runtime-docker');
      return dockerRuntime(
        defined({
          dropCapabilities: options.dropCapabilities && options.dropCapabilities.length > 0 ? options.dropCapabilities : undefined,
          cpus: options.cpus,
          memoryBytes: options.memoryBytes,
          pidsLimit: options.pidsLimit,
        }),
      );
    }
    case 'kubernetes': {
      const { kubernetesRuntime } = await import('@berth/runtime-kubernetes');
      return kubernetesRuntime(
        defined({
          kubeconfig: options.kubeconfig,
          namespace: options.namespace,
          podsTemplateName: options.podsTemplateName,
          podsTemplateFile: options.podsTemplateFile,
          pauseImage: options.pauseImage,
        }),
      );
    }
  }
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
