/**
 * @berth/runtime — the Runtime contract every Berth container runtime plugin implements.
 *
 * @packageDocumentation
 */
export type { Runtime, RuntimeConfig, RuntimeEvent, ContainerExit, ContainerStatus, ReapReport } from './runtime.ts';
export { RuntimeError, isRuntimeError, type RuntimeErrorCode, type RuntimeErrorOptions } from './errors.ts';
export { CONTRACT_VERSION, defineRuntime, type RuntimeDescriptor, type ContractWarning } from './descriptor.ts';
export { LABELS, labelValue, resourceLabels } from './labels.ts';
export { isPrivilegedImage } from './privileged.ts';
