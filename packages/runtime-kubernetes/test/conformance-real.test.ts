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
      },
      // Each pause → step swap takes the kubelet about two seconds (its pod worker acts on the
      // patch, then notices the pause container's exit): the cases' bound is doubled.
      timeouts: { case: 120_000 },
      // The containerd under the kubelet writes the log to a file the kubelet serves; this process
      // only reads it, as on kube-sim.
      largeLogMemoryLimitBytes: 300_000_000,
      // A log the kubelet rotates at most once while it is read: 12 MiB of 65-byte lines is
      // ~19.4 MiB in the node's file (containerd's `<time> stdout F ` before each line, up to 40
      // bytes), and the kubelet rotates a file over 10 MiB (containerLogMaxSize) every 10 s, so
      // a second rotation would need more than 10 MiB written after the first. Two rotations
      // behind a slow reader lose the middle file in the kubelet itself (it serves only the
      // current file: log-rotation-real.test.ts, which judges 50 MiB logs across rotations
      // against the node's files). With 50 MiB here, one loaded run in six came out 40,960
      // bytes short, as a rotated file's tail lost there would. 12 MiB is still more than the
      // 8 MiB the case's paused reader may see buffered: the backpressure check keeps its meaning.
      largeLogBytes: 12 * 1024 * 1024,
    },
  );
} else {
  it.skipIf(true)(`kubernetes (real cluster) conformance [skipped: ${cluster.skip}]`, () => undefined);
}
