/**
 * @berth/runtime-conformance: the vitest suite every Berth runtime plugin runs from its own tests,
 * with the builders and drivers it uses (the executor's tests may reuse them).
 *
 * @packageDocumentation
 */
export { runtimeConformance } from './suite.ts';
export type { ConformanceTarget } from './plan.ts';
export {
  CONFORMANCE_CAPABILITIES,
  resolveConformanceOptions,
  type ConformanceCapability,
  type ConformanceFactory,
  type ConformanceOptions,
  type ConformanceTimeouts,
  type ResolvedConformanceOptions,
} from './options.ts';
export { conformanceCases, imageNameWithoutTag, type ConformanceCase } from './cases.ts';
export {
  conformanceBuild,
  conformanceContainer,
  conformanceService,
  conformanceStep,
  encodeScript,
  uniqueSuffix,
  type ConformanceContainerFields,
} from './builders.ts';
export {
  buildContainers,
  collectStream,
  EarlyTailEndError,
  logSoFar,
  runToCompletion,
  setupBuildResources,
  teardownBuild,
  waitForExit,
  type RunOptions,
  type RunResult,
} from './drive.ts';
export { CaseHarness, describeError, describeOutcome, pollUntil, rejectedWith, settleWithin, type Settlement } from './harness.ts';
