import { existsSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { CONTRACT_VERSION, contractMismatch, isRuntimeError, type RuntimeDescriptor } from '@berth/runtime';
import { CommandError, EXIT } from '../exit-codes.ts';
import { BUILTIN_RUNTIMES, builtinOptions } from './builtin.ts';

/** Where a runtime plugin came from. */
type PluginSource = 'builtin' | 'package' | 'path';

/** A runtime plugin the worker loaded and checked. */
export interface LoadedRuntime {
  descriptor: RuntimeDescriptor;
  source: PluginSource;
  /** The built-in name, the package name, or the file path. */
  location: string;
  /** The plugin module's exports (not for built-ins): `berth runtimes verify` reads its `conformance` export. */
  exports?: Readonly<Record<string, unknown>>;
}

/** What {@link loadRuntime} needs. */
export interface LoadOptions {
  /** `--runtime-option key=value` pairs, handed to the plugin's factory. */
  options?: Readonly<Record<string, string>>;
  /** Settings of the built-in runtimes the worker read itself (`--kubeconfig`, …); ignored for others. */
  builtinSettings?: Readonly<Record<string, unknown>>;
  /** Where a path or a package name is resolved from (the current directory). */
  cwd: string;
}

/** `./x.js`, `../x`, `/abs/x.mjs`, `C:\…` or a name ending in a script extension is a path; anything else a package. */
function isPathSpec(spec: string): boolean {
  return spec.startsWith('.') || path.isAbsolute(spec) || /\.(?:[cm]?js|[cm]?ts)$/.test(spec);
}

/**
 * Loads the runtime plugin `spec` names, as `--runtime` accepts it: a built-in name (`docker`,
 * `kubernetes`, `host`), an installed package name, or a path to a module. The module's default
 * export (or its export named `runtime`) is a `defineRuntime` descriptor, or a function taking
 * the `--runtime-option` pairs and returning one. Checks the descriptor's shape and contract
 * version (another major is refused: `contractMismatch`).
 *
 * Every failure is a {@link CommandError} (exit 2) saying what is wrong and what to do.
 */
export async function loadRuntime(spec: string, load: LoadOptions): Promise<LoadedRuntime> {
  const strings = load.options ?? {};
  const builtin = BUILTIN_RUNTIMES.find((b) => b.name === spec);
  if (builtin) {
    let options: Record<string, unknown>;
    try {
      options = builtinOptions(builtin, strings, load.builtinSettings);
    } catch (error) {
      throw usage(`--runtime-option: ${(error as Error).message}`);
    }
    return { descriptor: checked(await builtin.load(options), spec), source: 'builtin', location: builtin.name, exports: await builtin.exports() };
  }

  const source: PluginSource = isPathSpec(spec) ? 'path' : 'package';
  let url: string;
  if (source === 'path') {
    const file = path.resolve(load.cwd, spec);
    if (!existsSync(file))
      throw usage(`--runtime ${spec}: no such file ${file}. Give docker, kubernetes, host, an installed package name, or a path to a plugin module.`);
    url = pathToFileURL(file).href;
  } else {
    url = resolvePackage(spec, load.cwd);
  }
  let module: Record<string, unknown>;
  try {
    module = (await import(url)) as Record<string, unknown>;
  } catch (error) {
    throw usage(`--runtime ${spec}: the plugin module failed to load: ${(error as Error).message ?? String(error)}`);
  }
  const exported = pluginExport(module, spec);
  let descriptor: unknown = exported;
  if (typeof exported === 'function') {
    try {
      descriptor = await (exported as (options: Record<string, string>) => unknown)({ ...strings });
    } catch (error) {
      // The plugin's own words: an InvalidConfig RuntimeError (from any copy of @berth/runtime) is its configuration error.
      if (isRuntimeError(error, 'InvalidConfig'))
        throw usage(`--runtime ${spec}: the plugin's configuration is invalid (${describeOptions(strings)}): ${error.detail}`);
      throw usage(`--runtime ${spec}: the plugin refused its options (${describeOptions(strings)}): ${(error as Error).message ?? String(error)}`);
    }
  } else if (Object.keys(strings).length > 0) {
    throw usage(`--runtime ${spec}: the plugin exports a descriptor, not a function, so it takes no --runtime-option (got ${describeOptions(strings)}).`);
  }
  return { descriptor: checked(descriptor, spec), source, location: source === 'path' ? path.resolve(load.cwd, spec) : spec, exports: module };
}

/** Whether `value` looks like a runtime descriptor (checked fully later). */
function isDescriptorLike(value: unknown): boolean {
  return typeof value === 'object' && value !== null && typeof (value as { create?: unknown }).create === 'function';
}

/**
 * The plugin's export: `default`, else `runtime`, else the one named export that is a descriptor
 * (or, when none is, the one that is a function: a factory). Refuses, listing the exports, when
 * there is none or more than one.
 */
function pluginExport(module: Record<string, unknown>, spec: string): unknown {
  const exported = module.default ?? module.runtime;
  if (exported !== undefined) return exported;
  const names = Object.keys(module);
  const descriptors = names.filter((name) => isDescriptorLike(module[name]));
  // A class is not a factory (a plugin may export its Runtime class beside its factory).
  const factories = names.filter((name) => typeof module[name] === 'function' && !/^class\b/.test(Function.prototype.toString.call(module[name])));
  const candidates = descriptors.length > 0 ? descriptors : factories;
  if (candidates.length === 1) return module[candidates[0]!];
  const kind = (value: unknown) =>
    isDescriptorLike(value) ? 'descriptor' : typeof value === 'function' && /^class\b/.test(Function.prototype.toString.call(value)) ? 'class' : typeof value;
  const listed = names.map((name) => `${name} (${kind(module[name])})`).join(', ') || 'nothing';
  throw usage(
    `--runtime ${spec}: the module has no default export and no export named "runtime", and ${candidates.length === 0 ? 'no' : 'more than one'} named export that is a descriptor or a factory (it exports: ${listed}). ` +
      'A runtime plugin exports its descriptor: `export default defineRuntime({ name, version, contract, create })`, or a function `(options) => defineRuntime(...)`.',
  );
}

/** The descriptor, after checking its shape and its contract version. */
function checked(candidate: unknown, spec: string): RuntimeDescriptor {
  const d = candidate as Partial<RuntimeDescriptor> | null;
  const problems: string[] = [];
  if (typeof d !== 'object' || d === null) {
    throw usage(
      `--runtime ${spec}: the plugin's export is ${d === null ? 'null' : typeof d}, not a runtime descriptor; export \`defineRuntime({ name, version, contract, create })\` from @berth/runtime.`,
    );
  }
  if (typeof d.name !== 'string' || d.name === '') problems.push('a name');
  if (typeof d.version !== 'string') problems.push('a version');
  if (typeof d.contract !== 'string') problems.push('a contract version');
  if (typeof d.create !== 'function') problems.push('a create(ctx, config) function');
  if (problems.length > 0) {
    throw usage(
      `--runtime ${spec}: the plugin's export is not a runtime descriptor: it lacks ${problems.join(', ')}. Build it with \`defineRuntime({ name, version, contract, create })\` from @berth/runtime.`,
    );
  }
  const mismatch = contractMismatch(d as RuntimeDescriptor);
  if (mismatch !== undefined)
    throw usage(`--runtime ${spec}: ${mismatch}. This worker speaks Runtime contract ${CONTRACT_VERSION.split('.')[0]}.x (it implements ${CONTRACT_VERSION}).`);
  return d as RuntimeDescriptor;
}

/**
 * A package's entry URL, resolved as Node would from `cwd` (the current project's node_modules and
 * its parents'), else from the worker's own installation (beside it: a global `npm i -g` puts
 * plugins there). When it is found in neither, the error lists the folders it looked in.
 */
function resolvePackage(name: string, cwd: string): string {
  const looked: string[] = [];
  for (const from of [path.join(cwd, 'package.json'), import.meta.filename]) {
    const require = createRequire(from);
    try {
      return pathToFileURL(require.resolve(name)).href;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // Found, but broken (no entry, exports without "."): say so rather than "not found".
      if (code !== 'MODULE_NOT_FOUND') throw usage(`--runtime ${name}: the installed package cannot be loaded: ${(error as Error).message}`);
      for (const dir of require.resolve.paths(name) ?? []) if (!looked.includes(dir) && isDirectory(dir)) looked.push(dir);
    }
  }
  throw usage(
    `--runtime ${name}: not a built-in runtime (docker, kubernetes, host), and no installed package of that name was found; ` +
      `looked in ${looked.length > 0 ? looked.join(', ') : `no node_modules folder (none in ${cwd} or its parents, none beside Berth)`}. ` +
      'Install the plugin in the current project (npm install <package>) or beside Berth (npm install -g <package>), or give a path to its module.',
  );
}

function isDirectory(dir: string): boolean {
  try {
    return statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

function describeOptions(options: Readonly<Record<string, string>>): string {
  const keys = Object.keys(options);
  return keys.length === 0 ? 'none given' : keys.map((k) => `${k}=…`).join(', ');
}

function usage(message: string): CommandError {
  return new CommandError(message, EXIT.usage);
}
