import path from 'node:path';
import { type ConfigFileError, readConfigFile } from './config/config-file.ts';
import { type ConfigIssue, type SettingValues, ConfigError, resolveSettings } from './config/resolve.ts';
import type { SettingName } from './config/table.ts';
import { pairsOf } from './config/values.ts';
import { CommandError } from './exit-codes.ts';
import { parseAssignments, readSecretsFile } from './options.ts';
import { checkContainerLimits } from './vela/config.ts';

/** `berth exec`'s own flags as commander hands them over (unset flags are undefined); settings of the table come along by their names. */
export interface ExecFlags {
  env: string[];
  secret: string[];
  secretsFile?: string;
  step: string[];
  stage: string[];
  color?: boolean;
  config?: string;
  checkConfig?: boolean;
  [setting: string]: unknown;
}

/** `berth exec`'s configuration, checked: flags, then variables, then `--config`, then defaults. */
export interface ExecConfig {
  /** A built-in runtime (docker, kubernetes, host), an installed plugin package or a path: checked when loaded. */
  runtime: string;
  /** `--runtime-option key=value` pairs for the plugin. */
  runtimeOption: Record<string, string>;
  /** The local build's number (`localOrg_localRepo_<n>`). */
  buildNumber: number;
  kubeconfig: string | undefined;
  namespace: string | undefined;
  pauseImage: string | undefined;
  env: Record<string, string>;
  secret: Record<string, string>;
  secretsFile: Record<string, string>;
  /** The build timeout, ms (`--build-timeout`, alias `--timeout`: a Go duration, as the worker's build.timeout). */
  timeout: number;
  stopGrace: number;
  step: string[];
  stage: string[];
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  color: boolean;
  containerLimits: { cpus?: number | undefined; memoryBytes?: number | undefined; pidsLimit?: number | undefined };
  /** Every setting's value and source, for `--check-config`. */
  values: SettingValues;
  sourceOf: Partial<Record<SettingName, string>>;
}

/**
 * Validates `berth exec`'s flags, environment and `--config` file with the settings table (the
 * names `berth start` uses: `--runtime-config`, `--runtime-namespace`, `--build-timeout`; the old
 * `--kubeconfig`, `--namespace`, `--timeout` still work). Throws one {@link CommandError} (exit 2)
 * listing every problem.
 */
export async function parseExecConfig(flags: ExecFlags, env: NodeJS.ProcessEnv, cwd: string): Promise<ExecConfig> {
  const problems: string[] = [];
  const attempt = <T>(fn: () => T, fallback: T): T => {
    try {
      return fn();
    } catch (error) {
      if (!(error instanceof Error) || (!(error instanceof CommandError) && (error as ConfigFileError).name !== 'ConfigFileError')) throw error;
      problems.push(error.message);
      return fallback;
    }
  };
  const configPath = flags.config ?? (env.BERTH_CONFIG || undefined);
  let configFile: Awaited<ReturnType<typeof readConfigFile>> | undefined;
  try {
    configFile = configPath === undefined ? undefined : await readConfigFile(configPath, cwd);
  } catch (error) {
    if (!(error instanceof Error) || error.name !== 'ConfigFileError') throw error;
    problems.push(error.message);
  }
  const {
    env: _env,
    secret: _secret,
    secretsFile: _file,
    step: _step,
    stage: _stage,
    color: _color,
    config: _config,
    checkConfig: _check,
    ...settings
  } = flags;
  const resolved = resolveSettings('exec', { flags: settings, env, ...(configFile ? { configFile } : {}) });
  const v = resolved.values;
  const issues: ConfigIssue[] = [...resolved.issues];
  checkContainerLimits(v, (name, message) => issues.push({ setting: name, source: resolved.sourceOf[name] ?? 'default', message }));
  const assignments = attempt(() => parseAssignments(flags.env, '--env'), {});
  const secret = attempt(() => parseAssignments(flags.secret, '--secret'), {});
  const secretsFile = flags.secretsFile === undefined ? {} : attempt(() => readSecretsFile(path.resolve(cwd, flags.secretsFile!)), {});
  if (issues.length > 0) problems.unshift(new ConfigError(issues, 'exec').message);
  if (problems.length > 0) throw new CommandError(problems.join('\n'));
  return {
    runtime: String(v.runtimeDriver),
    runtimeOption: pairsOf(v.runtimeOptions ?? []),
    buildNumber: v.buildNumber!,
    kubeconfig: v.runtimeConfig,
    namespace: v.runtimeNamespace,
    pauseImage: resolved.sourceOf.pauseImage === 'default' ? undefined : v.pauseImage,
    env: assignments,
    secret,
    secretsFile,
    timeout: v.buildTimeout!,
    stopGrace: v.stopGrace!,
    step: flags.step,
    stage: flags.stage,
    logLevel: v.logLevel === 'panic' ? 'fatal' : v.logLevel!,
    color: flags.color !== false,
    containerLimits: { cpus: v.containerCpus, memoryBytes: v.containerMemory, pidsLimit: v.containerPids },
    values: v,
    sourceOf: resolved.sourceOf,
  };
}
