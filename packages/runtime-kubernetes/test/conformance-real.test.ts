// The shared Runtime conformance suite on a real cluster (tools/kube-cluster: the real kubelet,
// apiserver, scheduler and controller-manager, containerd), beside the same suite on kube-sim
// (conformance.test.ts). The real cluster is the judge; the test command always runs this lane.
import { it } from 'vitest';
import { background } from '@berth/context';
import { runtimeConformance } from '@berth/runtime-conformance';
import { createKubernetesRuntime } from '../src/index.ts';
import { TEST_OPTIONS } from './helpers.ts';
import { realCluster } from '@berth/kube-cluster';

const cluster = realCluster();

if (cluster.skip === undefined) {
  runtimeConformance(
    'kubernetes (real cluster)',
    (config) => createKubernetesRuntime(background(), config, { kubeconfig: cluster.kubeconfig, ...TEST_OPTIONS }),
    {
      skip: {
        // As go-vela/worker runtime/kubernetes/container.go PollOutputsContainer (a no-op): a pod's containers are fixed when it is created.
        outputs: 'the kubernetes runtime does not offer outputs: the environment of a pod container cannot change after the pod is created',
        // What no client of this cluster can get, and the case cannot tell from Berth's loss: the
        // kubelet serves only a container's current log file (a 12 MiB log whose step then slept
        // 2 s came back empty, as one the kubelet rotated before the read began would), and
        // containerd 1.6 drops what is still in the stdout pipe at the exit (containerd issue
        // 7289: runs came out 40,960 and 49,152 bytes short).
        // Large logs on this cluster are judged against the node's files instead:
        // log-rotation-real.test.ts (50 MiB across rotations) and log-completeness-real.test.ts.
        largeLogs:
          "the kubelet serves only the current log file and containerd 1.6 drops the pipe's tail at the exit; judged against the node's files by log-rotation-real and log-completeness-real",
      },
      // Each pause → step swap takes the kubelet about two seconds (its pod worker acts on the
      // patch, then notices the pause container's exit): the cases' bound is doubled.
      timeouts: { case: 120_000 },
    },
  );
} else {
  it.skipIf(true)(`kubernetes (real cluster) conformance [skipped: ${cluster.skip}]`, () => undefined);
}
