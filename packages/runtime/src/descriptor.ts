import type { Context } from '@berth/context';
import type { Runtime, RuntimeConfig } from './runtime.ts';

/**
 * The version of the Runtime contract this package defines. Its major changes only when a
 * plugin built against the previous one would break.
 */
export const CONTRACT_VERSION = '1.0.0';

/**
 * A runtime plugin as the worker registers it: what `dockerRuntime(options)` returns.
 * Plugins are factories; nothing is discovered by scanning folders.
 */
export interface RuntimeDescriptor {
  /** The driver name users select, e.g. `docker` (Vela's `VELA_RUNTIME_DRIVER`). */
  readonly name: string;
  /** The plugin package's own version. */
  readonly version: string;
  /** The contract version the plugin was written against, e.g. `1.0.0` ({@link CONTRACT_VERSION} when it was built). */
  readonly contract: string;
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
  const pluginMajor = majorOf(descriptor.contract);
  const ourMajor = majorOf(CONTRACT_VERSION);
  if (pluginMajor === undefined) {
    throw new TypeError(`[berth] runtime plugin "${descriptor.name}" declares contract ${JSON.stringify(descriptor.contract)}, which is not a version`);
  }
  if (pluginMajor !== ourMajor) {
    warn(
      `runtime plugin "${descriptor.name}" ${descriptor.version} was written for Runtime contract ${descriptor.contract}, ` +
        `but @berth/runtime ${CONTRACT_VERSION} is installed; it may misbehave. Use a plugin release made for contract ${ourMajor}.x.`,
    );
  }
  return Object.freeze({ ...descriptor });
}

function majorOf(version: string): number | undefined {
  const match = /^\D*(\d+)\./.exec(version) ?? /^\D*(\d+)$/.exec(version);
  return match?.[1] === undefined ? undefined : Number(match[1]);
}
