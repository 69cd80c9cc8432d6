import type { Context } from '@berth/context';
import type { Runtime, RuntimeConfig } from './runtime.ts';

/**
 * The version of the Runtime contract this package defines, independent of the package's own
 * version: its major changes only when a plugin written for the previous major would break, its
 * minor when methods or fields are added. A plugin declares the one it was written against as a
 * literal (importing this constant would always match the installed contract).
 */
export const CONTRACT_VERSION = '1.4.0';

/**
 * An optional part of the contract a plugin declares it offers, in {@link RuntimeDescriptor.capabilities}.
 * The worker uses one only when the plugin declares it, and the conformance suite runs its cases
 * only then (so a new optional capability never fails a plugin written before it).
 *
 * - `outputs`: {@link Runtime.setupOutputs} and {@link Runtime.readOutput} (Vela's `/vela/outputs`; contract 1.1).
 * - `hostWorkspace`: {@link RuntimeConfig.workspaceHostPath}, a host directory as the build's
 *   workspace (`berth exec` runs a pipeline on the current directory; contract 1.2).
 * - `heldStart`: {@link Runtime.holdContainer} and {@link Runtime.releaseContainer}, a step's
 *   container started ahead and held until its step runs (contract 1.4).
 */
export type RuntimeCapability = 'outputs' | 'hostWorkspace' | 'heldStart';

/** Every {@link RuntimeCapability} this contract defines. */
export const RUNTIME_CAPABILITIES: readonly RuntimeCapability[] = ['outputs', 'hostWorkspace', 'heldStart'];

/**
 * A runtime plugin as the worker registers it: what `dockerRuntime(options)` returns.
 * Plugins are factories; nothing is discovered by scanning folders.
 */
export interface RuntimeDescriptor {
  /** The driver name users select, e.g. `docker` (Vela's `VELA_RUNTIME_DRIVER`). */
  readonly name: string;
  /** The plugin package's own version. */
  readonly version: string;
  /**
   * The contract version the plugin was written against, e.g. `1.0.0`: the {@link CONTRACT_VERSION}
   * of the `@berth/runtime` it was built with, as a literal. The worker refuses a plugin whose
   * major differs from its own contract's.
   */
  readonly contract: string;
  /**
   * The optional capabilities the plugin offers (contract 1.2); none when absent. A capability
   * this worker does not know (a plugin for a later minor) is ignored.
   */
  readonly capabilities?: readonly RuntimeCapability[];
  /**
   * Connects to the engine and returns a ready runtime. Rejects with a `RuntimeError` of code
   * `Unavailable` when the engine cannot be reached, `InvalidConfig` for bad settings.
   * On ctx done: reject promptly, leaving nothing open.
   */
  create(ctx: Context, config: RuntimeConfig): Promise<Runtime>;
}

/** Called with the warning text when a plugin's contract major differs from this package's. */
export type ContractWarning = (message: string) => void;

const emitContractWarning: ContractWarning = (message) => {
  process.emitWarning(message, { code: 'BERTH_RUNTIME_CONTRACT' });
};

/**
 * Declares a runtime plugin. Checks the contract version the plugin was written against
 * and warns (once per plugin, through `process.emitWarning` with code `BERTH_RUNTIME_CONTRACT`)
 * when its major differs from the installed contract's: the plugin may call methods that
 * changed meaning.
 *
 * @example
 * export const dummyRuntime = (options = {}) =>
 *   defineRuntime({ name: 'dummy', version: '1.0.0', contract: '1.0.0', create: async (ctx, config) => new DummyRuntime(config, options) });
 */
export function defineRuntime(descriptor: RuntimeDescriptor, warn: ContractWarning = emitContractWarning): RuntimeDescriptor {
  if (!descriptor.name || !/^[a-z][a-z0-9-]*$/.test(descriptor.name)) {
    throw new TypeError(`[berth] a runtime plugin's name must be lower-case letters, digits and dashes; got ${JSON.stringify(descriptor.name)}`);
  }
  if (majorOf(descriptor.contract) === undefined) {
    throw new TypeError(`[berth] runtime plugin "${descriptor.name}" declares contract ${JSON.stringify(descriptor.contract)}, which is not a version`);
  }
  for (const capability of descriptor.capabilities ?? []) {
    if (!RUNTIME_CAPABILITIES.includes(capability)) {
      throw new TypeError(
        `[berth] runtime plugin "${descriptor.name}" declares capability ${JSON.stringify(capability)}, which contract ${CONTRACT_VERSION} does not define; known: ${RUNTIME_CAPABILITIES.join(', ')}`,
      );
    }
  }
  const mismatch = contractMismatch(descriptor);
  if (mismatch !== undefined) warn(`${mismatch}; it may misbehave.`);
  return Object.freeze({ ...descriptor, ...(descriptor.capabilities ? { capabilities: Object.freeze([...descriptor.capabilities]) } : {}) });
}

/**
 * Why a plugin cannot be trusted with this contract, or `undefined` when its `contract` has the
 * major of {@link CONTRACT_VERSION}. The worker refuses a plugin for which this returns a message.
 */
export function contractMismatch(descriptor: Pick<RuntimeDescriptor, 'name' | 'version' | 'contract'>): string | undefined {
  const pluginMajor = majorOf(String(descriptor.contract));
  const ourMajor = majorOf(CONTRACT_VERSION);
  if (pluginMajor === ourMajor) return undefined;
  const declared =
    pluginMajor === undefined
      ? `declares contract ${JSON.stringify(descriptor.contract)}, which is not a version`
      : `was written for Runtime contract ${descriptor.contract}`;
  return (
    `runtime plugin "${descriptor.name}" ${descriptor.version} ${declared}, but this @berth/runtime speaks contract ${ourMajor}.x (it defines ${CONTRACT_VERSION}). ` +
    `Use a release of the plugin made for contract ${ourMajor}.x, or a Berth whose contract is ${pluginMajor ?? '?'}.x`
  );
}

/**
 * Whether the plugin declares the optional `capability` (works on a descriptor from any copy of
 * this package: it reads the plain field).
 */
export function hasCapability(descriptor: Pick<RuntimeDescriptor, 'capabilities'>, capability: RuntimeCapability): boolean {
  return Array.isArray(descriptor.capabilities) && descriptor.capabilities.includes(capability);
}

function majorOf(version: string): number | undefined {
  const match = /^\D*(\d+)\./.exec(version) ?? /^\D*(\d+)$/.exec(version);
  return match?.[1] === undefined ? undefined : Number(match[1]);
}
