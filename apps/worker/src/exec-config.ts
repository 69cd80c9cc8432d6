import path from 'node:path';
import { z } from 'zod';
import { CommandError } from './exit-codes.ts';
import { parseAssignments, parseDuration, readSecretsFile } from './options.ts';

/** Log levels of Berth's own log (pino's). */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** `berth exec`'s flags as commander hands them over (unset flags are undefined). */
export interface ExecFlags {
  runtime?: string;
  runtimeOption?: string[];
  kubeconfig?: string;
  namespace?: string;
  env: string[];
  secret: string[];
  secretsFile?: string;
  timeout?: string;
  step: string[];
  stage: string[];
  stopGrace?: string;
  logLevel?: string;
  color?: boolean;
}

/** Turns a CommandError thrown by a parser into a zod issue, so every problem is listed at once. */
function via<T>(parse: (value: string) => T) {
  return (value: string, ctx: z.RefinementCtx): T => {
    try {
      return parse(value);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: error instanceof Error ? error.message : String(error) });
      return z.NEVER;
    }
  };
}

function schema(cwd: string) {
  return z.object({
    // A built-in name, a package name or a path: checked when the plugin is loaded (plugins/load.ts).
    runtime: z.string().trim().min(1, { error: '--runtime is empty: give docker, kubernetes, host, an installed package name, or a path to a plugin module' }),
    runtimeOption: z.array(z.string()).transform((v, ctx) => via((_: string) => parseAssignments(v, '--runtime-option'))('', ctx)),
    kubeconfig: z.string().optional(),
    namespace: z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, { error: (i) => `--namespace ${JSON.stringify(i.input)} is not a Kubernetes namespace name` }),
    env: z.array(z.string()).transform((v, ctx) => via((_: string) => parseAssignments(v, '--env'))('', ctx)),
    secret: z.array(z.string()).transform((v, ctx) => via((_: string) => parseAssignments(v, '--secret'))('', ctx)),
    secretsFile: z.string().optional().transform((v, ctx) => (v === undefined ? {} : via(readSecretsFile)(path.resolve(cwd, v), ctx))),
    timeout: z.string().transform(via((v) => parseDuration(v, '--timeout'))),
    stopGrace: z.string().transform(via((v) => parseDuration(v, '--stop-grace'))),
    step: z.array(z.string()),
    stage: z.array(z.string()),
    logLevel: z.enum(LOG_LEVELS, { error: (i) => `--log-level ${JSON.stringify(i.input)} is not a level: use ${LOG_LEVELS.join(', ')}` }),
    color: z.boolean(),
  });
}

/** `berth exec`'s configuration, checked: flags first, then `BERTH_*` variables, then defaults. */
export type ExecConfig = z.output<ReturnType<typeof schema>>;

/**
 * Validates `berth exec`'s flags and environment with zod. Throws one {@link CommandError}
 * (exit 2) listing every problem.
 */
export function parseExecConfig(flags: ExecFlags, env: NodeJS.ProcessEnv, cwd: string): ExecConfig {
  const result = schema(cwd).safeParse({
    runtime: flags.runtime ?? env.BERTH_RUNTIME ?? 'docker',
    runtimeOption: flags.runtimeOption ?? [],
    kubeconfig: flags.kubeconfig ?? env.KUBECONFIG,
    namespace: flags.namespace ?? env.BERTH_NAMESPACE ?? 'default',
    env: flags.env,
    secret: flags.secret,
    secretsFile: flags.secretsFile,
    timeout: flags.timeout ?? env.BERTH_TIMEOUT ?? '30m',
    stopGrace: flags.stopGrace ?? env.BERTH_STOP_GRACE ?? '10s',
    step: flags.step,
    stage: flags.stage,
    logLevel: flags.logLevel ?? env.BERTH_LOG_LEVEL ?? 'warn',
    color: flags.color !== false,
  });
  if (!result.success) throw new CommandError(result.error.issues.map((i) => i.message).join('\n'));
  return result.data;
}
