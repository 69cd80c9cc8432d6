// The shared Runtime conformance suite against kube-sim (pods run in Docker, nothing is pulled).
import { afterAll, beforeAll } from 'vitest';
import { runtimeConformance } from '@berth/runtime-conformance';
import { background } from '@berth/context';
import { createKubernetesRuntime } from '../src/index.ts';
import { privilegedUnsupported, type SimProcess, startSimProcess, TEST_OPTIONS } from './helpers.ts';

// Skipped only when the engine under kube-sim cannot start privileged containers at all, with its message.
const privileged = await privilegedUnsupported();

// kube-sim runs in a child process, so that the large-log case's memory bound counts the
// runtime's memory, not the double's too.
let sim: SimProcess | undefined;
beforeAll(async () => {
  sim = await startSimProcess();
});
afterAll(async () => {
  await sim?.close();
});

runtimeConformance(
  'kubernetes (kube-sim)',
  (config) => {
    if (!sim) throw new Error('kube-sim did not start');
    return createKubernetesRuntime(background(), config, { kubeconfig: sim.kubeconfig, ...TEST_OPTIONS });
  },
  {
    // TEST_OPTIONS sets a 1.5 s pull grace: the image cases must settle within 15 s (the default grace is 30 s).
    skip: {
      // As go-vela/worker runtime/kubernetes/container.go PollOutputsContainer (a no-op): a pod's containers are fixed when it is created.
      outputs: 'the kubernetes runtime does not offer outputs: the environment of a pod container cannot change after the pod is created',
      ...(privileged === undefined ? {} : { privileged: `the Docker engine under kube-sim cannot start privileged containers (${privileged})` }),
    },
  },
);
