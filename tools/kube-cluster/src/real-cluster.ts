/**
 * The real cluster the test command starts (tools/kube-cluster: kube-apiserver, kubelet,
 * scheduler and controller-manager built from Kubernetes' own sources, etcd and containerd), as the
 * tests' judge of what the runtime does on a real kubelet.
 *
 * `BERTH_REAL_KUBECONFIG` names its kubeconfig; tools/test.sh sets it and also sets
 * `BERTH_REAL_CLUSTER=required`, so that a cluster that did not start fails the lane with the
 * reason instead of skipping it. Run alone, a test file reports the real-cluster cases skipped
 * with the way to run them.
 */
import { existsSync, readFileSync } from 'node:fs';

/** How a test file reaches the real cluster, or why it cannot. */
export type RealCluster = { readonly kubeconfig: string; readonly skip?: undefined } | { readonly kubeconfig?: undefined; readonly skip: string };

/** Reads the real cluster's settings from the environment (see the module's comment). */
export function realCluster(env: NodeJS.ProcessEnv = process.env): RealCluster {
  const path = env.BERTH_REAL_KUBECONFIG;
  const required = env.BERTH_REAL_CLUSTER === 'required';
  const missing = (why: string): RealCluster => {
    if (required)
      throw new Error(`the real-cluster lane is required (BERTH_REAL_CLUSTER=required) but ${why}: see the "real Kubernetes cluster" step of the test command`);
    return { skip: `${why}; start one with \`bash tools/kube-cluster/cluster.sh start\` and set BERTH_REAL_KUBECONFIG=/var/lib/berth-kube/berth.kubeconfig` };
  };
  if (path === undefined || path === '') return missing('BERTH_REAL_KUBECONFIG is not set');
  if (!existsSync(path)) return missing(`BERTH_REAL_KUBECONFIG names ${path}, which does not exist`);
  return { kubeconfig: readFileSync(path, 'utf8') };
}
