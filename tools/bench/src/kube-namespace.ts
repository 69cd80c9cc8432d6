/**
 * A namespace of the bench's own on the shared real cluster: the audit log's events of the bench's
 * runtime are those in it (other engineers' tests use the same user, `berth`).
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';

/** Creates a namespace and waits for its `default` service account (the controller-manager makes it; pods need it). */
export async function createNamespace(kc: KubeConfig, name: string): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name } } });
  for (let i = 0; i < 100; i++) {
    try {
      await core.readNamespacedServiceAccount({ name: 'default', namespace: name });
      return name;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  throw new Error(`namespace ${name}: no default service account after 20 s (is kube-controller-manager running?)`);
}

/** Deletes a namespace the bench created (not waiting for it to be gone). */
export async function deleteNamespace(kc: KubeConfig, name: string): Promise<void> {
  await kc
    .makeApiClient(CoreV1Api)
    .deleteNamespace({ name })
    .catch((error: unknown) => console.error(`[bench] could not delete namespace ${name}: ${String(error)}`));
}
