/**
 * @berth/fleet: Berth's worker image as a StatefulSet in the real cluster (tools/kube-cluster),
 * several replicas on one vela-sim queue, for the fleet lane and the fleet bench.
 *
 * @packageDocumentation
 */
export { Fleet, type FleetOptions } from './fleet.ts';
export { buildRecords, enqueueSleepBuilds, isFinal, runningOn, watchFinals, type BuildRecord } from './builds.ts';
export { pops, waitFor } from './wait.ts';
