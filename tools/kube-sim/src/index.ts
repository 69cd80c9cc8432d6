// @berth/kube-sim: a Kubernetes API test double whose pods run in Docker.

export { startKubeSim, type KubeSim, type KubeSimOptions, type LenientOptions } from './sim.ts';
export { Faults, type FaultSettings, type FaultUpdate, type ImagePullFault } from './faults.ts';
export { Counters, type CountersSnapshot, type Verb } from './counters.ts';
export { instanceLabel } from './agent/docker-spec.ts';
export { type LogRotationPolicy, type LogRotationStats } from './agent/log-rotation.ts';
export { parseLabelSelector, matchLabels, parseFieldSelector } from './selectors.ts';
export { strategicMerge, jsonMergePatch, jsonPatch } from './patch.ts';
