/**
 * @berth/runtime — the Runtime contract every Berth container runtime plugin implements.
 *
 * @packageDocumentation
 */
export type { Runtime, RuntimeConfig, RuntimeEvent, ContainerExit, ContainerStatus, ReapReport, RuntimeWithHeldStart, RuntimeWithOutputs } from './runtime.ts';
export { MAX_OUTPUT_FILE_BYTES, OUTPUTS_PATH, supportsHeldStart, supportsOutputs } from './runtime.ts';
export { RuntimeError, isRuntimeError, type RuntimeErrorCode, type RuntimeErrorOptions } from './errors.ts';
export {
  CONTRACT_VERSION,
  contractMismatch,
  defineRuntime,
  hasCapability,
  RUNTIME_CAPABILITIES,
  type ContractWarning,
  type RuntimeCapability,
  type RuntimeDescriptor,
} from './descriptor.ts';
export { LABELS, labelValue, resourceLabels } from './labels.ts';
export { isPrivilegedImage } from './privileged.ts';

// What a plugin needs from the layers below, re-exported so that a plugin imports @berth/runtime
// alone (with @berth/context and @berth/pipeline as this package's peers: one copy of each).
export {
  afterFunc,
  background,
  Canceled,
  DeadlineExceeded,
  errOf,
  isContextError,
  sleep,
  withCancel,
  withoutCancel,
  withTimeout,
  type CancelFunc,
  type Context,
} from '@berth/context';
export {
  parseImageReference,
  type Build,
  type Container,
  type ImageReference,
  type ImageReferenceResult,
  type PullPolicy,
  type Stage,
  type Ulimit,
  type Volume,
} from '@berth/pipeline';
